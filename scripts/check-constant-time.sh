#!/usr/bin/env bash
# Checks that the Secret Service session's C code (Sources/CLibSecret/session_crypto.c) has no
# branch and no memory address that depends on the private exponent, the AES key or the data, as
# compiled: at -O1, -O2, -O3 and -Os with clang (SwiftPM's release builds use -O2), each run under
# valgrind's memcheck with the secrets marked undefined (scripts/constant-time/harness.c). An
# optimiser can turn a mask back into a branch (it did, before the barrier in session_crypto.c),
# so the source alone proves nothing. The one allowed report is the zero-exponent check: a report
# at a source line that calls is_zero (it tells only whether the whole exponent is zero). Exit 0
# when clean, 1 with the reports.
#
# Usage: scripts/check-constant-time.sh      (requires clang and valgrind)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
command -v valgrind >/dev/null || { echo "check-constant-time: valgrind is not installed" >&2; exit 1; }
status=0
for level in -O1 -O2 -O3 -Os; do
    clang "$level" -gdwarf-4 -I"$root/Sources/CLibSecret/include" "$root/scripts/constant-time/harness.c" \
        "$root/Sources/CLibSecret/session_crypto.c" -o "$work/harness" -lpthread
    valgrind --tool=memcheck --error-exitcode=0 --num-callers=4 --log-file="$work/log" "$work/harness" 2>"$work/stderr" || {
        echo "check-constant-time: the harness failed at $level:" >&2
        cat "$work/stderr" >&2
        exit 1
    }
    # Each report is a line "==PID== Conditional jump..." / "Use of uninitialised value..."
    # followed by its first frame "at 0x...: function (file.c:LINE)"; a report whose line calls
    # is_zero is the allowed one.
    reports="" allowed=0
    while IFS= read -r report; do
        line="$(sed -n 's/.*session_crypto\.c:\([0-9]*\)).*/\1/p' <<<"$report")"
        if [ -n "$line" ] && sed -n "${line}p" "$root/Sources/CLibSecret/session_crypto.c" | grep -q "is_zero("; then
            allowed=$((allowed + 1))
        else
            reports+="$report"$'\n'
        fi
    done < <(awk '
        /Conditional jump or move depends on uninitialised|Use of uninitialised value/ { pending = $0; next }
        pending != "" && /(at|by) 0x/ { print pending " " $0; pending = ""; next }
    ' "$work/log")
    if [ -n "$reports" ]; then
        echo "check-constant-time: secret-dependent branches or addresses at $level:" >&2
        echo "$reports" >&2
        status=1
    else
        echo "check-constant-time: $level clean ($allowed allowed report(s) at the zero-exponent check)"
    fi
done
exit $status
