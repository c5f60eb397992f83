# Sourced by the scripts that build into the package's .build (scripts/test.sh and those it runs):
# the package traits the repository's own build enables, all of them (Package.swift), so that every
# build into .build has the same compiler flags and none rebuilds another's modules. An app that
# depends on `Lockbox` enables none of them unless it asks (README, "Install").
# shellcheck shell=bash
# The order is not a matter of taste. SwiftPM 6.3 writes the traits' -D flags in the order of a
# hashed collection, which for the root package depends on the order named here and for a
# dependency on the order its dependent lists them in; with deterministic hashing (below) the
# examples package (Examples/Package.swift) and the service samples (scripts/ci/samples.py) list
# them in this order, and both orders come out the same (-DPostgreSQL -DYAML -DSwiftConfiguration).
# With another order they differ, and every module of the package compiles a second time when the
# examples build (scripts/ci/run-examples.sh says so). swift-configuration's flags still differ
# there (its traits are enabled by two packages), so its module compiles again, about 15 s.
lockbox_traits=(--traits YAML,SwiftConfiguration,PostgreSQL)
# Builds with random hashing would pick an order anew each time SwiftPM makes a build plan (a
# touched manifest, other build options), and every module of the package would compile again:
# every build into .build runs with deterministic hashing. Only the builds: the tests run as users
# run them.
# Line tables, not full debug information (the sanitizer and fuzz builds use them too): crash
# backtraces and sanitizer reports keep file:line, and a clean build of .build takes 7% less CPU
# time (733 s against 785 s on 2 cores; an AddressSanitizer build a sixth less). For lldb with
# variables, build into a scratch folder of your own without them.
lockbox_line_tables=(-Xswiftc -gline-tables-only -Xcc -gline-tables-only)
# Builds into .build also leave out the C targets' debug information (`-debug-info-format none`:
# SwiftPM otherwise ends each C command line with -g, after the -Xcc flags): there they are mostly
# BoringSSL's 800 C and C++ files, whose full DWARF cost about a tenth of their compile time. The
# Swift modules keep their line tables (the -Xswiftc flag comes after SwiftPM's -gnone).
#
# The configuration. Builds by hand and `make` use SwiftPM's debug configuration (incremental: an
# edit recompiles the files it touches). The test command sets LOCKBOX_CONFIGURATION=test before it
# sources this file: the release configuration, unoptimised (-Onone, and -O0 for the C targets, which
# release would compile with -O2), with testable imports, as the sanitizer builds are. Two reasons.
# The debug configuration defines DEBUG in every module, and swift-argument-parser then checks the
# whole command definition again on every parse (`lockbox pin set --help`: 0.30 s of CPU, against
# 0.01 s for a `get`), in each of the thousands of `lockbox` processes the suite starts. And release
# compiles each module in one job, where debug's batches parse the module again each: a clean build
# costs less CPU. `make` keeps DEBUG, so swift-argument-parser's checks run in every `make check`.
case ${LOCKBOX_CONFIGURATION:-debug} in
    debug) lockbox_configuration=() ;;
    test) lockbox_configuration=(-c release -Xswiftc -Onone -Xswiftc -enable-testing -Xcc -O0) ;;
    *) echo "traits.sh: LOCKBOX_CONFIGURATION is debug or test, not '$LOCKBOX_CONFIGURATION'" >&2; return 64 ;;
esac
lockbox_build=(env SWIFT_DETERMINISTIC_HASHING=1 swift build -debug-info-format none "${lockbox_line_tables[@]}"
    "${lockbox_configuration[@]}")
# The examples package (Examples/), built into the root's .build with the same options and hashing,
# so the modules the root build compiled, SwiftNIO's and Lockbox's own, are reused.
lockbox_examples_build=("${lockbox_build[@]}" --package-path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Examples"
    --scratch-path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.build")
