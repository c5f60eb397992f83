# Sourced by the scripts that build into the package's .build (scripts/test.sh and those it runs):
# the package traits the repository's own build enables, all of them (Package.swift), so that every
# build into .build has the same compiler flags and none rebuilds another's modules. An app that
# depends on `Lockbox` enables none of them unless it asks (README, "Install").
# shellcheck shell=bash
lockbox_traits=(--traits PostgreSQL,SwiftConfiguration,YAML)
