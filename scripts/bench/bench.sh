#!/usr/bin/env bash
# Builds Lockbox in release mode, runs the LockboxBenchmarks executable, and prints its report:
# the command, date, machine, results table and which aims were met.
#
#   scripts/bench/bench.sh                  full run (a few minutes)
#   scripts/bench/bench.sh --quick          smoke run (seconds)
#   scripts/bench/bench.sh --output FILE    the report into FILE instead of standard output
#
# Any other arguments go to the benchmark (e.g. --dir PATH, --only get,set). The benchmark runs
# inside scripts/dev/keyring-session.sh (a private bus with an unlocked gnome-keyring), so the Secret
# Service rows are measured; the build uses its own scratch path, .build-bench, never .build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
scratch="$root/.build-bench"
invocation="scripts/bench/bench.sh${*:+ $*}"

quick=0
output=""
bench_args=()
while (($#)); do
    case "$1" in
        --quick) quick=1; bench_args+=("$1") ;;
        --output)
            [[ $# -ge 2 ]] || { echo "bench.sh: --output needs a path" >&2; exit 64; }
            output="$2"; shift ;;
        -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) bench_args+=("$1") ;;
    esac
    shift
done
[[ -n "$output" ]] || output="-"

if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
    PATH="/opt/swift/usr/bin:$PATH"
fi

# Static Swift runtime: how the CLI should ship; it halves process start-up (dynamic linking
# of Foundation and ICU dominates a short-lived `lockbox get`).
# Only the two products measured: the examples need libcurl, which a static build does not link.
build_cmd=(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lockbox)
echo "bench.sh: ${build_cmd[*]}" >&2
"${build_cmd[@]}" >&2
swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product LockboxBenchmarks >&2
bin="$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)"

results="$(mktemp "${TMPDIR:-/tmp}/lockbox-bench-results.XXXXXX")"
report="$(mktemp "${TMPDIR:-/tmp}/lockbox-bench-report.XXXXXX")"
trap 'rm -f "$results" "$report"' EXIT

load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
started="$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
bench_cmd=("$bin/LockboxBenchmarks" ${bench_args[@]+"${bench_args[@]}"})
# The Secret Service group stores 1,000 items, so it runs only against a throwaway keyring: a
# private session bus with its own unlocked gnome-keyring-daemon (HOME and XDG folders in a temp
# folder, all torn down afterwards). Without those tools the group is skipped with a note.
keyring_note=""
missing_tools=()
for tool in dbus-daemon dbus-send gdbus gnome-keyring-daemon; do
    command -v "$tool" >/dev/null 2>&1 || missing_tools+=("$tool")
done
if ((${#missing_tools[@]} == 0)); then
    bench_cmd=(scripts/dev/keyring-session.sh -- "${bench_cmd[@]}")
else
    keyring_note="not installed here: ${missing_tools[*]} (scripts/ensure-deps.sh --test installs them)"
    echo "bench.sh: no private keyring session ($keyring_note); the Secret Service rows will be skipped" >&2
fi
echo "bench.sh: ${bench_cmd[*]}" >&2
"${bench_cmd[@]}" >"$results"
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"

# Machine description.
cpu_model="$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
hypervisor="$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' || true)"
mem_total="$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null || true)"
bench_dir="${TMPDIR:-/tmp}"
for ((i = 0; i < ${#bench_args[@]}; i++)); do
    [[ "${bench_args[$i]}" == "--dir" && $((i + 1)) -lt ${#bench_args[@]} ]] && bench_dir="${bench_args[$((i + 1))]}"
done
fs_type="$(df -PT "$bench_dir" 2>/dev/null | awk 'NR == 2 { print $2 " on " $1 }' || true)"
swift_version="$(swift --version 2>/dev/null | head -n1 || true)"
sodium_version="$(pkg-config --modversion libsodium 2>/dev/null || echo unknown)"
libsecret_version="$(pkg-config --modversion libsecret-1 2>/dev/null || echo unknown)"
keyring_version="$(gnome-keyring-daemon --version 2>/dev/null | head -n1 | sed 's/^gnome-keyring-daemon: *//' || true)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain -- Sources Package.swift Benchmarks 2>/dev/null)" ]]; then
    commit="$commit (with uncommitted changes in Sources/, Package.swift or Benchmarks/)"
fi

# Which aims the run met, from the benchmark's own Aims table.
met="$(awk -F'|' '/^#### Aims/ { on = 1 } on && NF > 6 && $6 ~ /yes/ { gsub(/^ +| +$/, "", $2); printf "%s%s", sep, $2; sep = "; " }' "$results")"
missed="$(awk -F'|' '/^#### Aims/ { on = 1 } on && NF > 6 && $6 ~ /no/ { gsub(/^ +| +$/, "", $2); printf "%s%s", sep, $2; sep = "; " }' "$results")"

{
    echo "# Lockbox benchmark report"
    echo
    echo "## How it was measured"
    echo
    echo "- Command: \`$invocation\`, which ran"
    echo "  \`${build_cmd[*]/#"$root/"/}\` (and the same for \`--product LockboxBenchmarks\`), then"
    echo "  \`${bench_cmd[*]/#"$root/"/}\`"
    echo "- Date: $started"
    echo "- Machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}${hypervisor:+ (virtual machine, $hypervisor)}, ${mem_total:-unknown} RAM;"
    echo "  kernel $(uname -sr) ($(uname -m)); vault folder on ${fs_type:-unknown file system}"
    echo "- Toolchain: ${swift_version:-swift unknown}; libsodium $sodium_version; libsecret $libsecret_version;"
    echo "  gnome-keyring ${keyring_version:-unknown}; commit $commit"
    echo "- Load average (1, 5, 15 min) before the run: $load_before; after: $load_after. Other work on"
    echo "  this 2-CPU machine shows up most in the process rows and in the p90/p99 columns."
    echo
    echo "The benchmark (\`Benchmarks/LockboxBenchmarks\`) is a plain release executable: each"
    echo "operation is timed on its own with \`CLOCK_MONOTONIC\` after a warm-up, on one thread;"
    echo "Median, p90 and p99 are nearest-rank percentiles. \`get\` and \`set\` pick a random item each"
    echo "iteration (items are 40-byte tokens); \`set\` overwrites an existing item, so every run"
    echo "includes the whole atomic replacement (temporary file, fsync, rename, fsync of the folder)."
    echo "\`lockbox get\` is the release CLI spawned with Foundation's \`Process\` and timed until the"
    echo "child has exited; the spawn baseline row is the same harness running \`true\`. Vaults are"
    echo "built in \`/dev/shm\` (building a 10,000-item vault one \`set\` at a time is slow, see below),"
    echo "copied to a fresh temporary folder for measuring, and deleted afterwards."
    echo
    if [[ -z "$keyring_note" ]]; then
        echo "The Secret Service rows run against a real gnome-keyring-daemon on a private session bus"
        echo "(\`scripts/dev/keyring-session.sh\`; its login collection unlocked, its files in a temporary"
        echo "folder). The benchmark first stores 1,000 tokens (100 with \`--quick\`) through"
        echo "\`SecretServiceStore\` one \`set\` at a time, then times \`get\` and \`set\` in-process with one reused connection, next to a bare"
        echo "libsecret lookup (\`secret_service_lookup_sync\`, one \`SearchItems\` and one \`GetSecrets\` call)"
        echo "as the floor for a D-Bus read; then it runs \`lockbox --backend secret-service get S A\`,"
        echo "\`secret-tool lookup service S username A\` (same item) and \`lockbox --version\` interleaved, in"
        echo "rotating order, and \`secret-tool store\` as the provider's cost of a write. \"CPU/op\" splits"
        echo "each row's CPU time between the client (this process, or the child) and gnome-keyring-daemon."
    else
        echo "The Secret Service rows were not measured: $keyring_note."
    fi
    echo
    echo "## Results"
    echo
    cat "$results"
    echo
    echo "## Verdict"
    echo
    if ((quick)); then
        echo "This was a \`--quick\` smoke run; its numbers are too few to judge the aims."
    else
        echo "- **Met:** ${met:-none}."
        echo "- **Not met:** ${missed:-none}."
    fi
    echo
    echo "For reference, the aims quote \`secret-tool lookup\` at about 10 ms and \`pass show\` at"
    echo "about 29 ms on this machine, as whole processes; \`secret-tool lookup\` is measured above in the"
    echo "same run as \`lockbox get\` (\`pass\` is not). For an in-process Secret Service read, a bare"
    echo "libsecret lookup loop from Swift took about 0.83 ms here and Python \`keyring\` about 11.5 ms."
} >"$report"

if [[ "$output" == "-" ]]; then
    cat "$report"
else
    mkdir -p "$(dirname "$output")"
    cp "$report" "$output.tmp.$$"
    mv "$output.tmp.$$" "$output"
    echo "bench.sh: wrote ${output#"$root/"}" >&2
fi
