#!/usr/bin/env bash
# Builds the libFuzzer harness (the LockboxFuzzer target, with AddressSanitizer) and runs it on
# each target.
#
# Usage: scripts/ci/fuzz.sh [--debug] [SECONDS] [TARGET]
#   --debug  build the harness unoptimised (-Onone, whole-module, line tables only, in
#            .build-fuzz-debug): it builds faster and runs fewer executions a second; for a smoke
#            run that only proves each target builds and runs (the test command's). Without it,
#            optimised (-O, in .build-fuzz), for real fuzzing.
#   SECONDS  how long each target runs (default 60)
#   TARGET   one of: vault-file vault-payload vault-row vault-database settings pin-record session-window key-file token-response token-record dbus-message
#            (default: all of them, one after the other)
#
# Each target starts from its seed corpus, Fuzz/corpus/TARGET (see Fuzz/make-seeds.py), and keeps
# what it finds in Fuzz/work/TARGET/corpus, so later runs continue where earlier ones stopped.
# A crash (memory error, trap, failed property) is saved in Fuzz/work/TARGET/artifacts/ and the
# script exits 1 after the remaining targets, printing how to reproduce it. Logs go to
# Fuzz/work/TARGET/log. Prints one summary line per target: time, executions, coverage.
# docs/SECURITY-TESTING.md says what each target covers.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

# -c release in both cases: SwiftPM's debug configuration renames an executable's entry point
# (for tests to link it), and libFuzzer's own main() then takes its place.
# Full debug information for real fuzzing; line tables (file:line in a crash's stack) for the smoke
# run, whose C targets get none (`-debug-info-format none`; SwiftPM would end their command lines
# with -g).
scratch=$repo/.build-fuzz
optimisation=(-Xswiftc -g)
kind=optimised
if [[ ${1:-} == --debug ]]; then
    scratch=$repo/.build-fuzz-debug
    source scripts/traits.sh  # lockbox_line_tables
    optimisation=(-Xswiftc -Onone -debug-info-format none "${lockbox_line_tables[@]}")
    kind=unoptimised
    shift
fi
seconds=${1:-60}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a whole number, not '$seconds'" >&2; exit 64; }
all=(vault-file vault-payload vault-row vault-database settings pin-record session-window key-file token-response token-record dbus-message)
if [[ -n ${2:-} ]]; then
    [[ " ${all[*]} " == *" $2 "* ]] || { echo "fuzz: unknown target '$2' (one of: ${all[*]})" >&2; exit 64; }
    targets=("$2")
else
    targets=("${all[@]}")
fi

scripts/ensure-deps.sh --test  # libsodium etc. to build; keyctl for the session-window target

echo "fuzz: building the harness ($kind, -sanitize=fuzzer,address) in $scratch" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# LOCKBOX_FUZZ makes LockboxFuzzer hand its main to libFuzzer's driver (LLVMFuzzerRunDriver).
# lld links it: gold stops with an internal error on the instrumented objects (its
# format_file_lineno, reached while it reports on the ASan symbols).
if ! swift build --product LockboxFuzzer --scratch-path "$scratch" -c release "${optimisation[@]}" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DLOCKBOX_FUZZ -Xswiftc -use-ld=lld >"$log" 2>&1; then
    cat "$log" >&2
    echo "fuzz: the build failed" >&2
    exit 1
fi
bin=$scratch/release

failed=()
printf '%-15s %8s %12s %10s %8s %8s %s\n' target seconds executions exec/s cov features result
for target in "${targets[@]}"; do
    work=$repo/Fuzz/work/$target
    mkdir -p "$work/corpus" "$work/artifacts"
    # Scratch files the harnesses write (settings.json, PIN lock files): on tmpfs when there is
    # one, since the settings harness writes through BackendSettings.record, which fsyncs.
    scratch_tmp=$(mktemp -d /dev/shm/lockbox-fuzz.XXXXXX 2>/dev/null || mktemp -d "$work/tmp.XXXXXX")
    max_len=4096
    [[ $target == vault-file || $target == vault-payload ]] && max_len=16384
    [[ $target == vault-database ]] && max_len=65536
    # SWIFT_BACKTRACE=enable=no: the Swift runtime's crash handler would race libFuzzer's (and
    # trip ASan reading memory); libFuzzer prints the stack of a trap itself.
    run=(env TMPDIR="$scratch_tmp" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0}"
        "$bin/LockboxFuzzer" "$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096
        -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$work/artifacts/"
        "$work/corpus" "$repo/Fuzz/corpus/$target")
    # Session windows live in the kernel's session keyring: give the harness one of its own.
    [[ $target == session-window ]] && run=(keyctl session - "${run[@]}")
    status=0
    "${run[@]}" >"$work/log" 2>&1 || status=$?
    rm -rf "$scratch_tmp"
    executions=$(awk '/^stat::number_of_executed_units:/ { print $2 }' "$work/log" | tail -1)
    rate=$(awk '/^stat::average_exec_per_sec:/ { print $2 }' "$work/log" | tail -1)
    cov=$(grep -Eo 'cov: [0-9]+' "$work/log" | tail -1 | awk '{print $2}')
    ft=$(grep -Eo 'ft: [0-9]+' "$work/log" | tail -1 | awk '{print $2}')
    artifact=$(grep -Eo "Test unit written to [^ ]+" "$work/log" | tail -1 | awk '{print $5}' || true)
    result=ok
    if ((status != 0)) || [[ -n $artifact ]]; then
        result="CRASH (exit $status)${artifact:+: $artifact}"
        failed+=("$target")
    fi
    printf '%-15s %8s %12s %10s %8s %8s %s\n' "$target" "$seconds" "${executions:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done

if ((${#failed[@]})); then
    echo "fuzz: crashes in: ${failed[*]}. Reproduce with: $bin/LockboxFuzzer TARGET ARTIFACT (logs in Fuzz/work/TARGET/log)" >&2
    exit 1
fi
