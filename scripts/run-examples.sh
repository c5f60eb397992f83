#!/usr/bin/env bash
# Runs every example (Examples/) on a throwaway file vault, then again on a private gnome-keyring
# (scripts/keyring-session.sh). Each exits non-zero if a step does not behave as described.
# Build first (`swift build`); the test command does.
set -euo pipefail
cd "$(dirname "$0")/.."

examples=(TokenKeeper FamilyProfiles ParentMode SessionRestore DriverUnlock DeviceLogin)
bin="$(swift build --show-bin-path)"
runtime=$(mktemp -d)
trap 'rm -rf "$runtime"' EXIT
chmod 700 "$runtime"

for example in "${examples[@]}"; do
    echo "== $example (file vault)"
    XDG_RUNTIME_DIR="$runtime" "$bin/$example"
done
for example in "${examples[@]:1}"; do
    echo "== $example (gnome-keyring)"
    scripts/keyring-session.sh -- env LOCKBOX_EXAMPLE_BACKEND=secret-service "$bin/$example"
done
echo "examples: all passed"
