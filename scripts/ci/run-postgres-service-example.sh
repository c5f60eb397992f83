#!/usr/bin/env bash
# Builds the example Hummingbird service on PostgreSQL (Examples/HummingbirdPostgres, a target of
# the examples package), starts it against a throwaway primary and synchronous standby
# (scripts/dev/postgres-session.sh), stores a token over HTTP and reads it back, then sends SIGTERM and
# requires a graceful stop: exit 0 within 10 s, the HTTP server and then the store's pool stopped
# by the ServiceGroup, and the store's own log lines (label `lockbox.postgres`) in the output.
#
# Usage: scripts/ci/run-postgres-service-example.sh [--binary PATH]
#
#   --binary PATH  the HummingbirdPostgres executable to run, built already (the test command
#                  passes the one scripts/ci/run-examples.sh built)
#
# Without --binary, like scripts/ci/run-service-example.sh, it builds the examples package into the
# root's .build, where scripts/ci/run-examples.sh built SwiftNIO and Hummingbird already. It runs
# itself inside scripts/dev/postgres-session.sh (--no-standby is not used: the store's commits wait
# for the standby, as in production).
set -euo pipefail
cd "$(dirname "$0")/../.."

args=("$@") service=""
while (($#)); do
    case "$1" in
        --binary) [[ $# -ge 2 ]] || { echo "run-postgres-service-example: --binary needs a path" >&2; exit 2; }; service=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-postgres-service-example: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

if [[ -z ${LOCKBOX_TEST_POSTGRES_URL_FILE:-} ]]; then
    exec scripts/dev/postgres-session.sh -- "$0" "${args[@]}"
fi

if [[ -z $service ]]; then
    log=$(mktemp)
    started=$SECONDS
    source scripts/traits.sh
    build=("${lockbox_examples_build[@]}")
    "${build[@]}" --product HummingbirdPostgres 2>&1 | tee "$log" | grep -Ev '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Write|Linking|Applying)' || true
    if ! grep -Eq 'Build (of product .* )?complete' "$log"; then
        rm -f "$log"
        echo "run-postgres-service-example: the example did not build (above)" >&2
        exit 1
    fi
    if grep -E "^$(pwd)/(Sources|Examples)/.*: warning:" "$log"; then
        rm -f "$log"
        echo "run-postgres-service-example: the build has warnings in our own code (above); fix them" >&2
        exit 1
    fi
    rm -f "$log"
    echo "run-postgres-service-example: built in $((SECONDS - started)) s"
    service="$("${build[@]}" --show-bin-path)/HummingbirdPostgres"
fi
[[ -x $service ]] || { echo "run-postgres-service-example: no executable at $service" >&2; exit 2; }

work=$(mktemp -d)
chmod 700 "$work"
pid=
cleanup() {
    [[ -z $pid ]] || kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A fresh database: no schema, no vault (the service's --create-vault migrates and creates).
"$LOCKBOX_TEST_POSTGRES_CTL" psql primary "DROP SCHEMA IF EXISTS lockbox CASCADE" >/dev/null
head -c 32 /dev/urandom >"$work/vault.key"
chmod 600 "$work/vault.key"

# The service's process ID and exit status come back through files (scripts/dev/supervise.py), polled.
scripts/dev/supervise.py "$work/pid" "$work/status" "$service" --postgres-url-file "$LOCKBOX_TEST_POSTGRES_URL_FILE" --key-file "$work/vault.key" \
    --create-vault >"$work/out" 2>"$work/err" &
port=
for _ in $(seq 1 300); do
    port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$work/out")
    [[ -n $port ]] && break
    if [[ -e $work/status ]]; then
        cat "$work/err" >&2
        echo "run-postgres-service-example: the service exited before listening" >&2
        exit 1
    fi
    sleep 0.1
done
[[ -n $port ]] || { cat "$work/err" >&2; echo "run-postgres-service-example: no port within 30 s" >&2; exit 1; }
pid=$(cat "$work/pid")

python3 - "$port" <<'PY'
import sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
token = b"rt-example-\x00\xff-token"
request = urllib.request.Request(f"{base}/tokens/alice", data=token, method="PUT")
with urllib.request.urlopen(request, timeout=30) as response:
    assert response.status == 204, response.status
with urllib.request.urlopen(f"{base}/tokens/alice", timeout=30) as response:
    body = response.read()
    assert response.status == 200 and body == token, (response.status, body)
try:
    urllib.request.urlopen(f"{base}/tokens/nobody", timeout=30)
    raise SystemExit("a missing token was not 404")
except urllib.error.HTTPError as error:
    assert error.code == 404, error.code
print("run-postgres-service-example: token stored and read back over HTTP; a missing one is 404")
PY

# Graceful stop: SIGTERM to the service, exit 0 within 10 s.
kill -TERM "$pid"
stopped=
for _ in $(seq 1 100); do
    if [[ -e $work/status ]]; then
        stopped=$(cat "$work/status")
        break
    fi
    sleep 0.1
done
pid=
cat "$work/err"
if [[ -z $stopped ]]; then
    echo "run-postgres-service-example: the service did not stop within 10 s of SIGTERM" >&2
    exit 1
fi
[[ $stopped == 0 ]] || { echo "run-postgres-service-example: the service exited $stopped on SIGTERM" >&2; exit 1; }
for line in "lockbox.postgres.*PostgreSQL store: running" "lockbox.postgres.*PostgreSQL store: using " \
    "lockbox.postgres.*PostgreSQL store: stopped"; do
    grep -Eq "$line" "$work/err" || { echo "run-postgres-service-example: no log line matching '$line'" >&2; exit 1; }
done
echo "run-postgres-service-example: stopped gracefully (exit 0) with the store's log lines in its output"
echo "run-postgres-service-example: passed"
