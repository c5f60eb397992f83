#!/usr/bin/env bash
# Builds the Lockbox module's DocC documentation (the catalog Sources/Lockbox/Lockbox.docc and
# every doc comment) and fails on any DocC warning: a link that does not resolve, an ambiguous
# one, a guide that names a symbol that is gone.
#
# Usage: scripts/ci/check-docc.sh [--skip-build]
#
#   --skip-build  read the module as .build has it (the test command and `make check` have just
#                 built it); without it, `swift build --build-tests` with the traits first
#
# How: the symbol graph of the module as the build compiled it (swift-symbolgraph-extract,
# scripts/ci/symbol-graph.sh: public symbols, synthesized members and extension blocks, as
# swift-docc-plugin asks for them), then the toolchain's `docc convert` of the catalog with it.
# swift-docc-plugin (`swift package generate-documentation --target Lockbox`) makes the same
# archive, but compiles the module again for its symbol graph, with compiler flags of its own, so
# that the next build into .build compiles it once more: a minute or two of CPU each time. The
# archive is .build/check-docc/Lockbox.doccarchive.
#
# Overloads are presented together (--enable-experimental-overloaded-symbol-presentation): every
# blocking operation has an async overload of the same name, and one page per name shows both, so
# ``PinGuard/verify(_:pin:)`` links to that page instead of being ambiguous.
#
# KNOWN lists warnings tolerated (and printed) until they are fixed where they are (empty now);
# a warning not in it fails the check. Remove an entry once it no longer appears.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

skip_build=0
for arg in "$@"; do
    case "$arg" in
        --skip-build) skip_build=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "check-docc: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

KNOWN=()

work=$repo/.build/check-docc
mkdir -p "$work"
log=$work/docc.log
source scripts/traits.sh
source scripts/ci/symbol-graph.sh
build=("${lockbox_build[@]}" --build-tests "${lockbox_traits[@]}")
if ((!skip_build)) && ! "${build[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "check-docc: the package did not build (above)" >&2
    exit 2
fi
bin=$("${build[@]}" --show-bin-path)

symbol_graph Lockbox "$bin" "$work/symbol-graphs" "$work" -minimum-access-level public -emit-extension-block-symbols ||
    exit 2
rm -rf "$work/Lockbox.doccarchive"
if ! docc convert Sources/Lockbox/Lockbox.docc --additional-symbol-graph-dir "$work/symbol-graphs" \
    --fallback-display-name Lockbox --fallback-bundle-identifier Lockbox \
    --enable-experimental-overloaded-symbol-presentation \
    --output-path "$work/Lockbox.doccarchive" >"$log" 2>&1; then
    cat "$log" >&2
    echo "check-docc: the documentation did not build (above)" >&2
    exit 2
fi
status=0
while IFS= read -r line; do
    known=0
    for entry in "${KNOWN[@]}"; do [[ "$line" == "$entry" ]] && known=1; done
    if [[ $known == 1 ]]; then
        echo "check-docc: known, to fix where it is: $line"
    else
        echo "check-docc: $line" >&2
        status=1
    fi
done < <(grep -E '^(warning|error):' "$log" | sort -u)
if [[ $status != 0 ]]; then
    echo "check-docc: DocC warnings (above; the full log with their places follows)" >&2
    cat "$log" >&2
    exit 1
fi
echo "check-docc: the Lockbox documentation builds without new warnings"
