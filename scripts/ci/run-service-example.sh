#!/usr/bin/env bash
# Builds the example Hummingbird service (Examples/HummingbirdService, a target of the examples
# package, Examples/Package.swift), starts two
# processes of it on ONE key-file vault on free loopback ports, drives them with concurrent
# requests (scripts/ci/drive-service.py check: tokens, 20 concurrent PIN verifies beside /health
# probes, lockout across processes, device ID), stops them and checks they exit cleanly.
# Then, unless --no-bench, runs the starvation benchmark's quick mode (scripts/bench/bench-service.sh
# --quick: figures printed, no thresholds).
#
# Usage: scripts/ci/run-service-example.sh [--no-bench] [--binary PATH]
#
#   --binary PATH  the HummingbirdService executable to run, built already (the test command
#                  passes the one scripts/ci/run-examples.sh built); without it, this script builds
#                  the examples package's HummingbirdService itself
#
# Without --binary it builds the examples package into the root's .build, as
# scripts/ci/run-examples.sh does, sharing SwiftNIO with LockboxPostgres: after that script, this
# build takes seconds. Alone from a clean clone on 2 cores: about 4-6 minutes, nearly all of it
# SwiftNIO and Hummingbird.
set -euo pipefail
cd "$(dirname "$0")/../.."

bench=1 service=""
while (($#)); do
    case "$1" in
        --no-bench) bench=0 ;;
        --binary) [[ $# -ge 2 ]] || { echo "run-service-example: --binary needs a path" >&2; exit 2; }; service=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-service-example: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

if [[ -z $service ]]; then
    log=$(mktemp)
    started=$SECONDS
    source scripts/traits.sh
    build=("${lockbox_examples_build[@]}")
    "${build[@]}" --product HummingbirdService 2>&1 | tee "$log"
    if grep -E "^$(pwd)/(Sources|Examples)/.*: warning:" "$log"; then
        echo "run-service-example: the build has warnings in our own code (above); fix them" >&2
        exit 1
    fi
    rm -f "$log"
    echo "run-service-example: built in $((SECONDS - started)) s"
    service="$("${build[@]}" --show-bin-path)/HummingbirdService"
fi
[[ -x $service ]] || { echo "run-service-example: no executable at $service" >&2; exit 2; }

work=$(mktemp -d)
chmod 700 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# A key file as a service would get it (systemd LoadCredential=, a secrets mount): 32 random bytes.
head -c 32 /dev/urandom >"$work/vault.key"
chmod 600 "$work/vault.key"

# The second process reads its configuration from a JSON file, the first from LOCKBOX_* variables.
cat >"$work/config.json" <<EOF
{"lockbox": {"vault": "$work/vault.lockbox", "keyFile": "$work/vault.key", "pinPreset": "server"}}
EOF

# Starts the service (extra options after the name), waits for its port; sets $port and $pid.
start_service() {
    local name=$1
    shift
    # Its process ID and exit status come back through files (scripts/dev/supervise.py), polled.
    : >"$work/$name.out"
    scripts/dev/supervise.py "$work/$name.pid" "$work/$name.status" "$service" "$@" >"$work/$name.out" 2>"$work/$name.err" &
    for _ in $(seq 1 50); do [[ -s $work/$name.pid ]] && break; sleep 0.1; done
    pid=$(cat "$work/$name.pid")
    pids+=("$pid")
    for _ in $(seq 1 300); do
        port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$work/$name.out")
        [[ -n "$port" ]] && return 0
        if [[ -e $work/$name.status ]]; then
            cat "$work/$name.err" >&2
            echo "run-service-example: $name exited before listening" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "run-service-example: $name did not listen within 30 s" >&2
    exit 1
}

# Stops a service with SIGTERM (graceful shutdown) and requires exit status 0.
stop_service() {
    local name=$1 pid=$2
    kill -TERM "$pid"
    for _ in $(seq 1 300); do
        [[ -e $work/$name.status ]] && break
        sleep 0.1
    done
    if [[ "$(cat "$work/$name.status" 2>/dev/null)" != 0 ]]; then
        cat "$work/$name.err" >&2
        echo "run-service-example: $name did not exit cleanly on SIGTERM" >&2
        exit 1
    fi
}

LOCKBOX_VAULT="$work/vault.lockbox" LOCKBOX_KEY_FILE="$work/vault.key" LOCKBOX_PIN_PRESET=server start_service first --create-vault
first_port=$port first_pid=$pid
start_service second --create-vault --config "$work/config.json"
second_port=$port second_pid=$pid
echo "run-service-example: two processes on one vault, ports $first_port and $second_port"
python3 scripts/ci/drive-service.py check "$first_port" "$second_port"
stop_service first "$first_pid"
stop_service second "$second_pid"
pids=()
echo "run-service-example: passed"

if [[ $bench == 1 ]]; then
    scripts/bench/bench-service.sh --quick --service "$service"
fi
