#!/usr/bin/env bash
# Runs the whole test suite under ThreadSanitizer and AddressSanitizer.
#
# Usage: scripts/ci/sanitizers.sh [thread|address|all]     (default all)
#
# Each sanitizer builds the test product (library, lockbox binary, tests) into its own scratch folder
# (.build-tsan, .build-asan), then runs the suite as scripts/test.sh does (the next build overlaps
# the previous suite, which runs in the background): inside a
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
# Job control: each background suite is a process group of its own, which an early exit stops
# with everything it started (D-Bus, gnome-keyring, swtpm, the test processes).
set -m
suite_groups=()
trap 'for g in "${suite_groups[@]}"; do kill -- -"$g" 2>/dev/null || true; done; rm -rf "$reports_root"' EXIT

# build_one SANITIZER: builds the sanitized test product; records its seconds in $reports_root.
build_one() {
    local sanitizer=$1 short=${1:0:1}san
    local scratch=$repo/.build-$short build_start=$SECONDS
    echo "== $sanitizer: building into $scratch" >&2
    # Only the test product and what it depends on (library targets, the lockbox binary, the
    # KeyringProbe helper): the examples, benchmarks and fuzzer are not run here, and building
    # them twice more would cost CI a minute or two.
    if ! swift build --product LockboxPackageTests --sanitize="$sanitizer" --scratch-path "$scratch" >"$reports_root/$short-build.log" 2>&1; then
        grep -Ev '^\[[0-9]+/[0-9]+\]' "$reports_root/$short-build.log" >&2
        echo "sanitizers: the $sanitizer build failed" >&2
        exit 1
    fi
    echo $((SECONDS - build_start)) >"$reports_root/$short-build-seconds"
}

# test_one SANITIZER: runs the sanitized suite and reads the reports; writes its one-line summary
# and its status (0 only if the suite passed and no report was written) to files in
# $reports_root, which the caller polls.
test_one() {
    local sanitizer=$1 short=${1:0:1}san
    local scratch=$repo/.build-$short reports=$reports_root/${1:0:1}san
    mkdir -p "$reports"
    echo "== $sanitizer: running the suite" >&2
    test_start=$SECONDS
    local status=0 suites skip found count suppressed
    # CrashTests is skipped: it adapts its kill window to the machine, so it would pass, but with
    # a sanitized `lockbox set` (200 ms and more) its 60-400 rounds add minutes and test nothing
    # the sanitizers look at; the normal suite (scripts/test.sh) runs it.
    # ThreadSanitizer also leaves out the test module whose subject is the `lockbox` process
    # driven from outside (LockboxCLITests: argument parsing, exit codes, docs, output,
    # cross-process locking; only the other shards run) and a few such suites elsewhere: a race is between threads of one process, and
    # those tests start single-threaded CLI processes one at a time, so TSan finds nothing there
    # that the in-process suites (executor, hash budget, PinGuard, TokenRefresher, stores on many
    # threads) do not exercise; each would cost CI a sanitized process start per call. The CLI's
    # threaded paths still run sanitized: `token get --refresh-with` (CredentialTests) and the
    # Secret Service get with its libcrypto preload thread (SecretServiceTests).
    # AddressSanitizer runs them all: memory errors in the C interop of those processes
    # (libsodium, the D-Bus client, libcrypto, tss2, SQLite) are its job.
    # The pattern matches whole suite names in test IDs (`Module.Suite/test()`).
    suites='CrashTests'
    local shards=()  # run-suite.sh's own three
    if [[ $sanitizer == thread ]]; then
        suites+='|VectorTests|FuzzFindingsTests'
        shards=('^LockboxTests\.' '^(?!LockboxCLITests\.|LockboxTests\.)')
    fi
    skip="\\.($suites)/"
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
    # In shards, as scripts/test.sh runs the suite (scripts/ci/run-suite.sh).
    scripts/dev/watchdog.sh "$suite_limit" --output "$reports_root/$short.log" -- \
        scripts/ci/run-suite.sh --bundle "$scratch/debug/LockboxPackageTests.xctest" --skip "$skip" "${shards[@]}" || status=$?
    unset TSAN_OPTIONS ASAN_OPTIONS LSAN_OPTIONS
    test_seconds=$((SECONDS - test_start))

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
    echo "$sanitizer: build $(cat "$reports_root/$short-build-seconds")s, tests ${test_seconds}s, suite exit $status, sanitizer reports from $count process(es)" >"$reports_root/$short-summary"
    if ((status != 0 || count != 0)); then
        cp "$reports_root/$short.log" "$repo/.build-$short/sanitizer-test.log" 2>/dev/null || true
        echo "sanitizers: $sanitizer: the full test log is in .build-$short/sanitizer-test.log" >&2
        echo 1 >"$reports_root/$short-status"
    else
        echo 0 >"$reports_root/$short-status"
    fi
}

# Each sanitizer's suite starts as soon as its build is done, in the background, so the next
# sanitizer's build (compiler work) overlaps the previous suite (much of it waiting on processes,
# D-Bus and sleeps). Their reports go to separate folders; each suite has its own session
# keyring, D-Bus session, gnome-keyring and swtpm.
for sanitizer in "${sanitizers[@]}"; do
    build_one "$sanitizer"
    short=${sanitizer:0:1}san
    test_one "$sanitizer" 2>"$reports_root/$short-output" &
    suite_groups+=("$!")
done
overall=0
summary=()
for i in "${!sanitizers[@]}"; do
    sanitizer=${sanitizers[$i]} short=${sanitizers[$i]:0:1}san
    # Polled, not `wait`ed: the test environment may block SIGCHLD.
    until [[ -s $reports_root/$short-status ]]; do
        if ! kill -0 "${suite_groups[$i]}" 2>/dev/null; then
            sleep 1
            [[ -s $reports_root/$short-status ]] || {
                echo "sanitizers: the $sanitizer suite ended without a status" >"$reports_root/$short-summary"
                echo 1 >"$reports_root/$short-status"
            }
        fi
        sleep 2
    done
    cat "$reports_root/$short-output" >&2
    summary+=("$(cat "$reports_root/$short-summary")")
    (($(cat "$reports_root/$short-status") == 0)) || overall=1
done
printf 'sanitizers: %s\n' "${summary[@]}"
exit "$overall"
