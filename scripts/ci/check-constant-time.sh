#!/usr/bin/env bash
# Checks that the secret-handling code Lockbox itself compiles for the Secret Service session has
# no branch and no memory address that depends on the secret: the PKCS#7 check of a decrypted
# secret (Sources/CLibcrypto/padding.c). The Diffie-Hellman exchange, HKDF and AES are libcrypto's
# (BN_mod_exp_mont_consttime, the default provider's HKDF and AES-128-CBC), and the key file's hex digits are decoded by libsodium's
# sodium_hex2bin: not Lockbox's code, so not checked here (SECURITY.md, "Cryptography").
# Checked as compiled: at -O1, -O2, -O3 and -Os with clang (SwiftPM's release builds use -O2),
# each run under valgrind's memcheck with the plaintext marked undefined
# (scripts/ci/constant-time/harness.c). An optimiser can turn a mask back into a branch, so the
# source alone proves nothing. No report is allowed. Exit 0 when clean, 1 with the reports.
#
# Usage: scripts/ci/check-constant-time.sh      (requires clang and valgrind)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
command -v valgrind >/dev/null || { echo "check-constant-time: valgrind is not installed" >&2; exit 1; }
status=0
for level in -O1 -O2 -O3 -Os; do
    clang "$level" -gdwarf-4 -I"$root/Sources/CLibcrypto/include" "$root/scripts/ci/constant-time/harness.c" \
        "$root/Sources/CLibcrypto/padding.c" -o "$work/harness"
    valgrind --tool=memcheck --error-exitcode=0 --num-callers=4 --log-file="$work/log" "$work/harness" 2>"$work/stderr" || {
        echo "check-constant-time: the harness failed at $level:" >&2
        cat "$work/stderr" >&2
        exit 1
    }
    # Each report is a line "==PID== Conditional jump..." / "Use of uninitialised value..."
    # followed by its first frame "at 0x...: function (file.c:LINE)".
    reports="$(awk '
        /Conditional jump or move depends on uninitialised|Use of uninitialised value/ { pending = $0; next }
        pending != "" && /(at|by) 0x/ { print pending " " $0; pending = ""; next }
    ' "$work/log")"
    if [ -n "$reports" ]; then
        echo "check-constant-time: secret-dependent branches or addresses at $level:" >&2
        echo "$reports" >&2
        status=1
    else
        echo "check-constant-time: $level clean (the PKCS#7 check, 20 paddings valid and invalid)"
    fi
done
exit $status
