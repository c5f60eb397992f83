#!/usr/bin/env bash
# The starvation benchmark (docs/PERFORMANCE.md, "A service under PIN load"): the example
# Hummingbird service (Examples/HummingbirdService) on a fresh key-file vault, driven by
# scripts/ci/drive-service.py bench — rounds of 20 concurrent PIN verifies (server preset) while
# /health is probed every 5 ms (its p50/p99/max latency), verifies/s, the service's peak RSS,
# then 100 concurrent token writes and 100 concurrent token reads (p50/p99). Once with the async
# API (the default) and once with `--blocking` (the handlers call the blocking API on Swift's
# cooperative pool, as services did before the async API). Asserts nothing but that every request
# succeeded: figures, not thresholds. Ends with a Markdown table of both modes (the build, the
# commit, the machine's cores and load included), ready for docs/PERFORMANCE.md.
#
# Usage: scripts/bench/bench-service.sh [--quick] [--rounds N] [--preset server|desktop] [--service PATH] [--json FILE]
#
#   --quick           1 round per mode (what scripts/ci/run-service-example.sh runs in the test
#                     command: about 10 s)
#   --rounds N        rounds of 20 verifies per mode (default 10)
#   --preset NAME     the PIN preset (default server)
#   --service PATH    a built HummingbirdService binary (default: build the example, debug)
#   --json FILE       append each mode's figures to FILE as a JSON line
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=10 preset=server service="" json=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) rounds=1 ;;
        --rounds) rounds=$2; shift ;;
        --preset) preset=$2; shift ;;
        --service) service=$2; shift ;;
        --json) json=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-service: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
if [[ -z "$service" ]]; then
    source scripts/traits.sh
    build=("${lockbox_examples_build[@]}")
    "${build[@]}" --product HummingbirdService >/dev/null
    service="$("${build[@]}" --show-bin-path)/HummingbirdService"
fi

work=$(mktemp -d)
chmod 700 "$work"
cleanup() {
    local mode
    for mode in async blocking; do  # a service still running (its status file not yet written)
        [[ -e $work/$mode.pid && ! -e $work/$mode.status ]] && kill "$(cat "$work/$mode.pid")" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
head -c 32 /dev/urandom >"$work/vault.key"
figures="$work/figures.jsonl"
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
chmod 600 "$work/vault.key"

echo "bench-service: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), preset $preset, $rounds round(s) of 20 verifies"
for mode in async blocking; do
    flags=()
    [[ $mode == blocking ]] && flags+=(--blocking)
    rm -f "$work/$mode.lockbox"
    # Its process ID and exit status come back through files (scripts/dev/supervise.py), polled.
    : >"$work/$mode.out"
    LOCKBOX_VAULT="$work/$mode.lockbox" LOCKBOX_KEY_FILE="$work/vault.key" LOCKBOX_PIN_PRESET="$preset" \
        scripts/dev/supervise.py "$work/$mode.pid" "$work/$mode.status" "$service" --create-vault "${flags[@]}" \
        >"$work/$mode.out" 2>"$work/$mode.err" &
    port=""
    for _ in $(seq 1 300); do
        port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$work/$mode.out")
        [[ -n "$port" ]] && break
        [[ -e $work/$mode.status ]] && { cat "$work/$mode.err" >&2; exit 1; }
        sleep 0.1
    done
    pid=$(cat "$work/$mode.pid")
    [[ -n "$port" ]] || { echo "bench-service: the service did not listen" >&2; exit 1; }
    python3 scripts/ci/drive-service.py bench "$port" "$pid" --rounds "$rounds" --label "$mode" --json "$figures"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        [[ -e $work/$mode.status ]] && break
        sleep 0.1
    done
done
[[ -n "$json" ]] && cat "$figures" >>"$json"

# The table, one column per mode, with what it was measured on.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n "$(git status --porcelain -- Sources Examples 2>/dev/null)" ]] && commit="$commit (+ uncommitted changes)"
build=debug
[[ "$service" == *"/release/"* ]] && build=release
python3 - "$figures" "$build" "$commit" "$load_at_start" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" "$preset" "$rounds" \
    "${LOCKBOX_CONCURRENT_HASHES:-default}" "${LOCKBOX_BLOCKING_THREADS:-default}" <<'PY'
import json, sys
path, build, commit, load_start, load_end, cores, preset, rounds, hashes, threads = sys.argv[1:]
rows = {r["label"]: r for r in map(json.loads, open(path))}
modes = [m for m in ("async", "blocking") if m in rows]
print()
print(f"{build} build of {commit}, {cores} cores, load average {load_start} at the start and {load_end} at the end;")
print(f"{preset} preset, {rounds} round(s) of 20 concurrent verifies; concurrent hashes {hashes}, blocking threads {threads}.")
print()
print("| | " + " | ".join(f"{m} API" for m in modes) + " |")
print("|---|" + "---|" * len(modes))
def row(title, cell):
    print(f"| {title} | " + " | ".join(cell(rows[m]) for m in modes) + " |")
row("`/health` p50 / p99 / max during the verifies", lambda r: f"{r['health_p50_ms']} / **{r['health_p99_ms']}** / {r['health_max_ms']} ms ({r['health_probes']} probes)")
row("verifies/s", lambda r: f"{r['verifies_per_second']}")
row("peak RSS", lambda r: f"{r['peak_rss_mib']} MiB")
row("100 concurrent token writes p50 / p99", lambda r: f"{r['token_write_p50_ms']} / {r['token_write_p99_ms']} ms")
row("100 concurrent token reads p50 / p99", lambda r: f"{r['token_read_p50_ms']} / {r['token_read_p99_ms']} ms")
PY
