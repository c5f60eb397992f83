#!/usr/bin/env bash
# lockbox next to secret-tool as whole processes, in one run, paired: Secret Service lookup, store
# and delete, start-up, a file-vault get, peak RSS; with --dbus also the D-Bus method calls of get,
# set, list and delete against secret-tool's lookup, store, search and clear. Prints the tables
# (the figures in docs/PERFORMANCE.md, "lockbox next to secret-tool"). Asserts no time; with
# --dbus it fails (exit 1) when lockbox makes more D-Bus calls than secret-tool for the same
# operation (the counts do not depend on the machine's load).
#
# Usage: scripts/bench/bench-cli.sh [--quick] [--dbus] [--runs N] [--binary PATH]
#
#   --quick        a smoke run for the test command: 3 pairs per row (seconds)
#   --dbus         also count D-Bus calls per command (dbus-monitor on the private bus), and
#                  fail if lockbox's count for get/set/list/delete exceeds secret-tool's
#   --runs N       pairs per row (default 30)
#   --binary PATH  the lockbox to measure (default: build the release binary the README's
#                  `make install` installs, with `make release`, and measure that)
#
# Runs inside scripts/dev/keyring-session.sh (a private bus with an unlocked gnome-keyring) unless
# already in one. Requires python3, secret-tool (libsecret-tools), dbus-monitor (dbus-bin).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
binary=""
args=()
while (($#)); do
    case "$1" in
        --quick | --dbus) args+=("$1"); shift ;;
        --runs) [[ $# -ge 2 ]] || { echo "bench-cli: --runs needs a number" >&2; exit 64; }; args+=(--runs "$2"); shift 2 ;;
        --binary) [[ $# -ge 2 ]] || { echo "bench-cli: --binary needs a path" >&2; exit 64; }; binary="$(realpath "$2")"; shift 2 ;;
        -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-cli: unknown argument: $1" >&2; exit 64 ;;
    esac
done

if [[ -z $binary ]]; then
    make --no-print-directory release >&2
    binary="$root/$(make --no-print-directory -s release-path)"
fi
[[ -x $binary ]] || { echo "bench-cli: no executable at $binary" >&2; exit 66; }

if [[ ${LOCKBOX_TEST_KEYRING:-} != unlocked ]]; then
    exec scripts/dev/keyring-session.sh -- python3 "$root/Benchmarks/cli/bench_cli.py" --lockbox "$binary" ${args[@]+"${args[@]}"}
fi
exec python3 "$root/Benchmarks/cli/bench_cli.py" --lockbox "$binary" ${args[@]+"${args[@]}"}
