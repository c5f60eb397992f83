#!/usr/bin/env bash
# Runs a command with a time limit, so a hung test fails CI with a diagnosis instead of running
# out CI's clock with none.
#
# Usage: scripts/dev/watchdog.sh SECONDS [--log FILE | --output FILE] -- COMMAND [ARGS...]
#
# COMMAND runs in a session of its own (setsid). If it is still running after SECONDS, the script
# prints to standard error the tests that started but never finished (from FILE, the command's
# output as `swift test` writes it: Swift Testing's "◇ Test X started." without a later
# "✔/✘ Test X ...", XCTest's "Test Case 'X' started." without "passed/failed") and every process
# of the session with its age, state and kernel wait channel, then sends SIGTERM to the session,
# and SIGKILL to what is left 30 seconds later. Exit status: COMMAND's own, or 124 after a timeout
# (as timeout(1)). With --output, COMMAND's standard output and error go to FILE (which is also
# the log read for unfinished tests) and the script's own messages to its standard error; with
# --log, the caller redirects COMMAND's output to FILE itself (e.g. through tee).
set -euo pipefail

die() { echo "watchdog: $*" >&2; exit 64; }

(($# >= 2)) || die "usage: $0 SECONDS [--log FILE] -- COMMAND [ARGS...]"
limit=$1
shift
[[ $limit =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive whole number, not '$limit'"
log=''
output=''
while (($#)); do
    case "$1" in
        --log) (($# >= 2)) || die "--log needs a file"; log=$2; shift 2 ;;
        --output) (($# >= 2)) || die "--output needs a file"; output=$2; log=$2; shift 2 ;;
        --) shift; break ;;
        *) die "unknown option: $1" ;;
    esac
done
(($#)) || die "no command given"

# Tests that started and have not finished, by name, from swift test's output.
unfinished_tests() {
    [[ -n $log && -r $log ]] || return 0
    awk '
        /^◇ Test .* started\.$/ {
            n = $0; sub(/^◇ Test /, "", n); sub(/ started\.$/, "", n); open[n] = 1; next
        }
        /^(✔|✘) Test / {
            n = $0; sub(/^(✔|✘) Test /, "", n)
            sub(/ (passed|failed|recorded|skipped).*$/, "", n); delete open[n]; next
        }
        /^Test Case .* started\./ {
            n = $0; sub(/^Test Case /, "", n); sub(/ started\..*$/, "", n); open[n] = 1; next
        }
        /^Test Case .* (passed|failed|skipped)/ {
            n = $0; sub(/^Test Case /, "", n); sub(/ (passed|failed|skipped).*$/, "", n); delete open[n]; next
        }
        END { for (n in open) print "watchdog:   " n }' "$log"
}

if [[ -n $output ]]; then
    setsid "$@" >"$output" 2>&1 &
else
    setsid "$@" &
fi
session=$!
# setsid execs COMMAND directly (a background child is not a process-group leader), so the
# session's ID is this PID.
deadline=$((SECONDS + limit))
while kill -0 "$session" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
        echo "watchdog: still running after ${limit}s: $*" >&2
        tests=$(unfinished_tests)
        if [[ -n $tests ]]; then
            echo "watchdog: tests started and not finished:" >&2
            echo "$tests" >&2
        fi
        echo "watchdog: processes of the session (age in seconds, state, wait channel):" >&2
        ps -s "$session" --forest -o pid=,etimes=,stat=,wchan:24=,args= 2>/dev/null | cut -c1-240 | sed 's/^/watchdog:   /' >&2 || true
        if [[ -n $log && -r $log ]]; then
            echo "watchdog: the last lines of $log:" >&2
            tail -n 20 "$log" | sed 's/^/watchdog:   /' >&2
        fi
        kill -TERM -- "-$session" 2>/dev/null || true
        for ((i = 0; i < 30; i++)); do
            pgrep -s "$session" >/dev/null || break
            sleep 1
        done
        pkill -KILL -s "$session" 2>/dev/null || true
        wait "$session" 2>/dev/null || true
        exit 124
    fi
    sleep 2
done
status=0
wait "$session" || status=$?
exit "$status"
