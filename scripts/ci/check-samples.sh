#!/usr/bin/env bash
# Builds every Swift sample of README.md and the DocC catalog (Sources/Lockbox/Lockbox.docc/*.md)
# as a consumer package would, and runs those that can run against a vault made by
# `lockbox init --key-file K` holding an item `lockbox set` stored.
#
#   scripts/ci/check-samples.sh [LOCKBOX]   LOCKBOX: the lockbox binary (default: swift build's)
#
# Each ```swift block follows a marker comment, `<!-- sample: KIND -->`, that says how it is built
# (a block without one fails the check, so no sample goes unbuilt):
#
#   manifest                  Package.swift lines: the consumer's manifest is made of them, the
#                             `.package(url: …, from: V)` line pointed at this checkout (V must
#                             be the package's version, Sources/Lockbox/Version.swift).
#   program                   a whole main.swift: its absolute paths become the program's
#                             arguments (the vault, the key file), it is run on the vault
#                             `lockbox init` made, and must then read the item `lockbox set` stored
#                             through its `store`.
#   fragment(PARAMETERS)      the body of `func f(PARAMETERS) throws`; `async fragment(…)` of an
#                             `async throws` one. Type-checked; with ` run(ARGUMENTS)` after it,
#                             also called with ARGUMENTS, which may name `fileVault` (the `init`
#                             vault, opened with FileVault.open) and `memory` (a MemoryStore).
#   service fragment(…)       a fragment that needs a service's packages (Hummingbird,
#                             swift-configuration): type-checked in a second consumer package,
#                             built into the root's .build with its traits so that it compiles no
#                             SwiftNIO of its own (scripts/ci/run-examples.sh has built it).
#
# The first consumer package depends on this checkout alone, with no trait, and must resolve
# only what the core needs: no SwiftNIO, postgres-nio, Hummingbird, FlyingFox, Yams or
# swift-configuration (the pins are checked). It also creates a vault through the library and
# checks that the file is format 2 (docs/FORMAT.md: application_id "LKBX", user_version 2).
# Build folders: .build-samples (kept between runs) and the root's .build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/traits.sh"
lockbox="${1:-$(cd "$root" && "${lockbox_build[@]}" --build-tests "${lockbox_traits[@]}" --show-bin-path)/lockbox}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$root/scripts/ci/samples.py" "$root" "$work" "${lockbox_traits[1]}"

# The consumer of the core builds into a folder of its own; the service samples (which enable
# the root's traits) into .build, with the options and hashing of every build there
# (scripts/traits.sh), or they would compile its modules anew, and the next build there again.
build() { # PACKAGE SCRATCH BUILD-COMMAND...
    local log=$work/build.log package=$1 scratch=$2
    shift 2
    if ! (cd "$package" && "$@" --scratch-path "$scratch" >"$log" 2>&1); then
        grep -v '^\[[0-9]*/[0-9]*\]' "$log" >&2
        echo "check-samples: the samples did not build (above; generated sources in $package are removed on exit)" >&2
        exit 1
    fi
    # A fragment may leave a value unused (it shows one call); any other warning in a sample
    # (a blocking call in async code: noasync) fails the check.
    if grep -E "^$package/.*: warning:" "$log" | grep -Ev "never used|never mutated|was never read"; then
        echo "check-samples: the samples build with warnings (above)" >&2
        exit 1
    fi
}
build "$work/consumer" "$root/.build-samples" swift build "${lockbox_line_tables[@]}"
resolved=$(grep '"identity"' "$work/consumer/Package.resolved" | sed 's/.*: "\(.*\)".*/\1/' | sort | tr '\n' ' ')
echo "check-samples: the consumer of the core resolved: $resolved"
if grep -E '"identity" : "(swift-nio[a-z-]*|postgres-nio|hummingbird|flyingfox|yams|swift-configuration)"' "$work/consumer/Package.resolved"; then
    echo "check-samples: a package that depends on Lockbox alone resolved the above; it must not" >&2
    exit 1
fi
if [[ -d "$work/service" ]]; then
    build "$work/service" "$root/.build" "${lockbox_build[@]}"
fi

# A key file as a service gets one (32 random bytes), and the vault `lockbox init --key-file` makes.
head -c 32 /dev/urandom >"$work/vault.key"
chmod 600 "$work/vault.key"
"$lockbox" init --vault "$work/vault.lockbox" --key-file "$work/vault.key" >/dev/null
printf 'stored by lockbox set' | "$lockbox" set readme-sample cli --vault "$work/vault.lockbox" --key-file "$work/vault.key"
bin=$(cd "$work/consumer" && swift build "${lockbox_line_tables[@]}" --scratch-path "$root/.build-samples" --show-bin-path)
while read -r program; do
    cp "$work/vault.lockbox" "$work/program.lockbox"
    output=$("$bin/$program" "$work/program.lockbox" "$work/vault.key")
    echo "$output" | sed "s/^/$program: /"
    grep -qx 'cli item: stored by lockbox set' <<<"$output" || { echo "check-samples: $program did not read the CLI's item" >&2; exit 1; }
done <"$work/programs"
output=$("$bin/Fragments" "$work/vault.lockbox" "$work/vault.key" "$work/created.lockbox")
echo "$output" | sed 's/^/Fragments: /'
grep -qx 'fragments: all ran' <<<"$output" || { echo "check-samples: the fragments did not all run" >&2; exit 1; }
python3 - "$work/created.lockbox" <<'PY'
import sys
header = open(sys.argv[1], "rb").read(100)
if header[:16] != b"SQLite format 3\0" or header[68:72] != b"LKBX" or int.from_bytes(header[60:64], "big") != 2:
    sys.exit("check-samples: a vault created through the library is not format 2")
print("check-samples: a vault created through the library (FileVault.create) is format 2")
PY
echo "check-samples: passed ($(cat "$work/count") samples)"
