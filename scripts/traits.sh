# Sourced by the scripts that build into the package's .build (scripts/test.sh and those it runs):
# the package traits the repository's own build enables, all of them (Package.swift), so that every
# build into .build has the same compiler flags and none rebuilds another's modules. An app that
# depends on `Lockbox` enables none of them unless it asks (README, "Install").
# shellcheck shell=bash
lockbox_traits=(--traits PostgreSQL,SwiftConfiguration,YAML)
# SwiftPM writes the traits' -D flags in the order of a Set, which a process with random hashing
# picks anew each time it makes a build plan (a touched manifest, other build options): every
# module of the package then compiles again. The builds run with deterministic hashing, so the
# order stays the same from one plan to the next. Only the builds: the tests run as users run them.
# Line tables, not full debug information (the sanitizer and fuzz builds use them too): crash
# backtraces and sanitizer reports keep file:line, and a clean build of .build takes 7% less CPU
# time (733 s against 785 s on 2 cores; an AddressSanitizer build a sixth less). For lldb with
# variables, build into a scratch folder of your own without them.
lockbox_line_tables=(-Xswiftc -gline-tables-only -Xcc -gline-tables-only)
# Builds into .build also leave out the C targets' debug information (`-debug-info-format none`:
# SwiftPM otherwise ends each C command line with -g, after the -Xcc flags): there they are mostly
# BoringSSL's 800 C and C++ files, whose full DWARF cost about a tenth of their compile time. The
# Swift modules keep their line tables (the -Xswiftc flag comes after SwiftPM's -gnone).
lockbox_build=(env SWIFT_DETERMINISTIC_HASHING=1 swift build -debug-info-format none "${lockbox_line_tables[@]}")
# The examples package (Examples/), built into the root's .build with the same options and hashing,
# so the SwiftNIO modules the root build compiled are reused. Lockbox's own modules compile once
# more there: SwiftPM lists the traits' -D flags of a dependency in another order than those of
# the root package.
lockbox_examples_build=("${lockbox_build[@]}" --package-path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Examples"
    --scratch-path "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.build")
