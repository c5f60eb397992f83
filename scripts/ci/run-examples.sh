#!/usr/bin/env bash
# Builds the examples package (Examples/Package.swift: a package of its own with a path dependency
# on the root, as an app would have) and runs every headless example on a throwaway file vault,
# then again on a private gnome-keyring (scripts/dev/keyring-session.sh). Each exits non-zero if a
# step does not behave as described. Fails on a compiler warning in the examples' code.
#
# The examples package is built into the root's .build (--scratch-path), and depends on the root
# with the traits the test command builds it with (scripts/traits.sh): the root's modules and
# SwiftNIO, which `swift build --build-tests` compiled for LockboxPostgres, are reused, not compiled
# again; the Hummingbird examples (scripts/ci/run-service-example.sh and
# scripts/ci/run-postgres-service-example.sh run them) are built here too.
# Alone from a clean clone on 2 cores: several minutes, most of them SwiftNIO and Hummingbird.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

examples=(TokenKeeper FamilyProfiles ParentMode SessionRestore DriverUnlock DeviceLogin)
source scripts/traits.sh
build=("${lockbox_examples_build[@]}")
log=$(mktemp)
started=$SECONDS
bin="$("${build[@]}" --show-bin-path)"
root_built=false
[[ -e $bin/Modules/Lockbox.swiftmodule ]] && root_built=true
"${build[@]}" 2>&1 | tee "$log" | grep -Ev '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Write|Linking|Applying)' || true
if ! grep -q 'Build complete' "$log"; then
    rm -f "$log"
    echo "examples: the examples package did not build (above)" >&2
    exit 1
fi
if grep -E "^$root/Examples/.*: warning:" "$log"; then
    rm -f "$log"
    echo "examples: the build has warnings in the examples' code (above); fix them" >&2
    exit 1
fi
# The root's modules are compiled already: compiling them again means the two build plans differ
# (other options, or the traits' flags in another order: scripts/traits.sh), a minute of CPU lost
# here and again at the root's next build.
recompiled=$(grep -cE '^\[[0-9]+/[0-9]+\] Compiling Lockbox ' "$log" || true)
if $root_built && ((recompiled)); then
    echo "examples: note: this build compiled $recompiled of the Lockbox module's files again; its flags differ from the root build's (scripts/traits.sh)" >&2
fi
rm -f "$log"
echo "examples: built in $((SECONDS - started)) s"
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
chmod 700 "$runtime"

for example in "${examples[@]}"; do
    echo "== $example (file vault)"
    XDG_RUNTIME_DIR="$runtime" "$bin/$example"
done
for example in "${examples[@]:1}"; do
    echo "== $example (gnome-keyring)"
    scripts/dev/keyring-session.sh -- env LOCKBOX_EXAMPLE_BACKEND=secret-service "$bin/$example"
done
echo "examples: all passed"
