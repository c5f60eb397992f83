#!/usr/bin/env bash
# Builds the Lockbox module's DocC documentation (the catalog Sources/Lockbox/Lockbox.docc and
# every doc comment) with swift-docc-plugin, and fails on any DocC warning: a link that does not
# resolve, an ambiguous one, a guide that names a symbol that is gone.
#
# Usage: scripts/ci/check-docc.sh
#
# Overloads are presented together (--enable-experimental-overloaded-symbol-presentation): every
# blocking operation has an async overload of the same name, and one page per name shows both, so
# ``PinGuard/verify(_:pin:)`` links to that page instead of being ambiguous.
#
# KNOWN lists warnings tolerated (and printed) until they are fixed where they are (empty now);
# a warning not in it fails the check. Remove an entry once it no longer appears.
#
# Uses the package's .build (the test command has built it), with the same traits
# (scripts/traits.sh): about 25 s on 2 cores, most of it the symbol graph and docc; the archive
# is .build/plugins/Swift-DocC/outputs/Lockbox.doccarchive.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/traits.sh

KNOWN=()

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift package "${lockbox_traits[@]}" generate-documentation --target Lockbox --enable-experimental-overloaded-symbol-presentation >"$log" 2>&1; then
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
