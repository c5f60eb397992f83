#!/usr/bin/env bash
# Checks re-authentication windows in the session keyring this script runs in (whatever the
# caller has: none in CI and containers, a login one on a desktop): `lockbox unlock` either
# refuses with exit 41, or succeeds and a second lockbox process finds the window. Usage:
# scripts/ci/check-window-here.sh PATH/TO/lockbox
set -euo pipefail
lockbox=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LOCKBOX_VAULT="$tmp/v.lockbox" XDG_CONFIG_HOME="$tmp/config"
printf 'window check\n' > "$tmp/pass"
"$lockbox" init --passphrase-fd 3 --kdf interactive 3<"$tmp/pass" >/dev/null 2>&1
where="this session keyring ($(keyctl rdescribe @s 2>/dev/null || echo none))"
set +e
"$lockbox" unlock --for 30s --passphrase-fd 3 3<"$tmp/pass" 2>"$tmp/err"
status=$?
set -e
case $status in
0)
    if "$lockbox" status | grep -q '^unlocked'; then
        "$lockbox" lock >/dev/null 2>&1
        echo "check-window-here: unlock works in $where, and the next process sees the window"
    else
        echo "check-window-here: unlock reported success in $where, but the next process sees no window" >&2
        exit 1
    fi
    ;;
41)
    grep -q 'keyctl session' "$tmp/err" || { echo "check-window-here: exit 41 without saying what to do: $(cat "$tmp/err")" >&2; exit 1; }
    echo "check-window-here: no login session keyring in $where; unlock refuses with exit 41, as documented"
    ;;
*)
    echo "check-window-here: unlock exited $status in $where: $(cat "$tmp/err")" >&2
    exit 1
    ;;
esac
