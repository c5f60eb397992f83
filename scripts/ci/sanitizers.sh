#!/usr/bin/env bash
# Runs the whole test suite under ThreadSanitizer and AddressSanitizer.
#
# Usage: scripts/ci/sanitizers.sh [thread|address|all]     (default all)
#
# Each sanitizer builds the test product (library, lockbox binary, tests) into its own scratch folder
# (.build-tsan, .build-asan), then runs the suite exactly as scripts/test.sh does: inside a
# session keyring of its own (`keyctl session`) and a private D-Bus session with a real
# gnome-keyring (scripts/dev/keyring-session.sh). The `lockbox` processes the tests start are
# sanitized too. Sanitizer reports go to files (log_path) so they cannot disturb tests that
# read a child's standard error; the script prints every report at the end. Leaks at exit inside
# Foundation and XCTest are suppressed (scripts/ci/sanitizers/lsan-suppressions.txt).
# Exits 0 only if the suite passed and no sanitizer reported anything. CI runs `all`
# (scripts/test.sh). Lockbox's locks are pthread mutexes (`Locked`), which ThreadSanitizer sees;
# Synchronization.Mutex gave false positives (docs/SECURITY-TESTING.md). The re-authentication
# CLI test's short window is retried twice as long when a loaded machine was too slow to use it.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

case "${1:-all}" in
    thread) sanitizers=(thread) ;;
    address) sanitizers=(address) ;;
    all) sanitizers=(thread address) ;;
    *) echo "sanitizers: unknown sanitizer '$1' (thread, address or all)" >&2; exit 64 ;;
esac

scripts/ensure-deps.sh --test
source scripts/ci/cpu-clock.sh
source scripts/traits.sh  # lockbox_line_tables

# The sanitizer builds enable none of the package's traits (Package.swift): LockboxPostgres and
# the swift-configuration adapter are empty there, so the test product compiles neither SwiftNIO
# nor postgres-nio nor swift-configuration under each sanitizer (3-5 minutes each on 2 cores saved);
# their tests run once, unsanitized, in scripts/test.sh, which enables both traits. (The examples,
# Hummingbird's included, are a package of their own, Examples/, never built here.)
# LOCKBOX_SANITIZER_BUILD=1 tells the tests they run sanitized (slower processes: wider timing
# slack; a few checks that cannot run under a sanitizer stand down).
export LOCKBOX_SANITIZER_BUILD=1

# Upper bound for one sanitized suite run, in seconds: about 5 minutes each on 2 cores.
suite_limit=${LOCKBOX_SANITIZER_SUITE_LIMIT:-1200}

reports_root=$(mktemp -d "${TMPDIR:-/tmp}/lockbox-sanitizers.XXXXXX")
trap 'rm -rf "$reports_root"' EXIT
overall=0
summary=()
for sanitizer in "${sanitizers[@]}"; do
    short=${sanitizer:0:1}san      # tsan, asan
    scratch=$repo/.build-$short
    reports=$reports_root/$short
    mkdir -p "$reports"

    # SwiftPM's release configuration, unoptimised (-Onone, testable imports), because the debug
    # configuration defines DEBUG in every module, and swift-argument-parser then checks the whole
    # command definition again each time it builds a command's argument set, several times per
    # parse (more with nested option groups): under AddressSanitizer `lockbox pin set --help` took
    # 0.73 s of CPU with those checks and 0.05 s without, and the suite starts about 3,000 `lockbox`
    # processes. scripts/test.sh builds its unsanitized suite the same way (scripts/traits.sh);
    # `make check`, a debug build, still runs those checks. Lockbox's own code has no `#if DEBUG`.
    # Whole-module, as the release configuration compiles: one compiler job per module instead of
    # the debug build's batches, which each parse the whole module again (the AddressSanitizer
    # build on an idle machine: 146 s and 259 s of CPU, against 181 s and 316 s for the debug
    # configuration).
    sanitized=(--sanitize="$sanitizer" --scratch-path "$scratch" -c release -Xswiftc -Onone -Xswiftc -enable-testing
        "${lockbox_line_tables[@]}")
    echo "== $sanitizer: building into $scratch" >&2
    build_start=$SECONDS
    count_children_cpu
    build_cpu_start=$cpu_seconds
    # Only the test product and what it depends on (library targets, the lockbox binary, the
    # KeyringProbe helper): the examples, benchmarks and fuzzer are not run here, and building
    # them twice more would cost CI a minute or two.
    # Line tables only, not full debug information: reports keep their file:line frames, and the
    # build takes about a sixth less CPU time (AddressSanitizer: 242 s against 293 s).
    if ! swift build --product LockboxPackageTests "${sanitized[@]}" >"$reports_root/$short-build.log" 2>&1; then
        grep -Ev '^\[[0-9]+/[0-9]+\]' "$reports_root/$short-build.log" >&2
        echo "sanitizers: the $sanitizer build failed" >&2
        exit 1
    fi
    build_seconds=$((SECONDS - build_start))
    count_children_cpu
    build_cpu=$((cpu_seconds - build_cpu_start))

    echo "== $sanitizer: running the suite" >&2
    test_start=$SECONDS
    status=0
    # CrashTests is skipped: it adapts its kill window to the machine, so it would pass, but with
    # a sanitized `lockbox set` (200 ms and more) its 60-400 rounds add minutes and test nothing
    # the sanitizers look at; the normal suite (scripts/test.sh) runs it.
    # ThreadSanitizer also skips the tests whose subject is the `lockbox` process driven from
    # outside: the whole LockboxCLITests module (argument parsing, exit codes, docs, output,
    # progress lines, exec) and the self-test's and fuzz findings' CLI suites. A race is between
    # threads of one process, and those tests start CLI processes one at a time, so TSan finds
    # nothing there that the in-process suites (executor, hash budget, PinGuard, TokenRefresher,
    # stores on many threads) do not exercise, and a thread-sanitized process costs several times
    # an unsanitized one (thousands of them in those suites). AddressSanitizer runs them all:
    # memory errors in the C interop of those processes (libsodium, libsecret, tss2, SQLite) are
    # its job. The patterns match whole module or suite names in test IDs
    # (`Module.Suite/test()`), so a suite such as CLITests does not also match the module
    # LockboxCLITests.
    skip='\.(CrashTests)/'
    if [[ $sanitizer == thread ]]; then
        skip='^LockboxCLITests\.|\.(CrashTests|VectorTests|FuzzFindingsTests)/'
    fi
    # Options are inherited by every process the suite starts that keeps the environment; the
    # tests' lockbox children get a clean environment and so the defaults (reports on stderr),
    # which a test then sees as unexpected output.
    export TSAN_OPTIONS="log_path=$reports/report:halt_on_error=0:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    export ASAN_OPTIONS="log_path=$reports/report:detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    # Leaks at exit inside Foundation and XCTest, not Lockbox (see the file).
    export LSAN_OPTIONS="suppressions=$repo/scripts/ci/sanitizers/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export LOCKBOX_REQUIRE_KEYRING_TESTS=1
    export LOCKBOX_REQUIRE_TPM_TESTS=1
    # A hung test fails the step within the time limit, naming the tests still running and the
    # processes they wait on (scripts/dev/watchdog.sh), rather than using up CI's clock.
    scripts/dev/watchdog.sh "$suite_limit" --output "$reports_root/$short.log" -- \
        keyctl session - scripts/dev/keyring-session.sh -- scripts/dev/swtpm-session.sh -- \
        swift test --skip-build "${sanitized[@]}" --skip "$skip" || status=$?
    unset TSAN_OPTIONS ASAN_OPTIONS LSAN_OPTIONS
    test_seconds=$((SECONDS - test_start))
    count_children_cpu
    test_cpu=$((cpu_seconds - build_cpu_start - build_cpu))

    # A report file may hold only LeakSanitizer's "Suppressions used" table: not a finding.
    mapfile -t found < <(grep -lE 'ERROR: |WARNING: ThreadSanitizer' "$reports"/* 2>/dev/null || true)
    count=${#found[@]}
    tail -n 3 "$reports_root/$short.log" >&2
    if ((count)); then
        echo "== $sanitizer: reports from $count process(es):" >&2
        for f in "${found[@]}"; do echo "---- ${f##*/}" >&2; cat "$f" >&2; done
    fi
    suppressed=$({ cat "$reports"/* 2>/dev/null || true; } | awk '/^ +[0-9]+ +[0-9]+ /' | sort | uniq -c |
        awk '{printf "%s%s x%s", sep, $4, $2; sep=", "}')
    [[ -z $suppressed ]] || echo "== $sanitizer: suppressed leaks (scripts/ci/sanitizers/lsan-suppressions.txt): $suppressed" >&2
    grep -E '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: AddressSanitizer|SUMMARY: )' "$reports_root/$short.log" >&2 || true
    grep -E '^✘ Test ' "$reports_root/$short.log" | grep -v 'known issue' >&2 || true
    result="suite exit $status, sanitizer reports from $count process(es)"
    summary+=("$sanitizer: build ${build_seconds}s (CPU ${build_cpu}s), tests ${test_seconds}s (CPU ${test_cpu}s), $result")
    if ((status != 0 || count != 0)); then
        overall=1
        cp "$reports_root/$short.log" "$repo/.build-$short/sanitizer-test.log" 2>/dev/null || true
        echo "sanitizers: $sanitizer: the full test log is in .build-$short/sanitizer-test.log" >&2
    fi
done
printf 'sanitizers: %s\n' "${summary[@]}"
exit "$overall"
