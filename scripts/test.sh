#!/usr/bin/env bash
# The test command: installs what the tests need, builds everything (failing on warnings in our
# own code), then runs the whole test suite against real files, the real `lockbox` binary and a
# real gnome-keyring on a private session bus.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's start, with the time since this script started and the CPU time the steps before it
# used (the background sanitizer run reports its own), so a slow CI run shows where the minutes
# went.
source scripts/ci/cpu-clock.sh
step() {
    count_children_cpu
    printf 'test.sh: [%02d:%02d, CPU %ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$cpu_seconds" "$*" >&2
}
trap 'step "done (exit $?)"' EXIT

step "dependencies"
scripts/ensure-deps.sh --test

# The package's traits, all enabled here (Package.swift): the PostgreSQL store and the
# swift-configuration adapter, with their tests. Every build into .build below uses the same set
# (scripts/traits.sh), so none rebuilds another's modules; the examples package (Examples/), built
# into the same .build by scripts/ci/run-examples.sh, depends on the root with these traits, so
# SwiftNIO is compiled once, here, for LockboxPostgres and the Hummingbird example together.
# Every build into .build, here and in the scripts below, is the test configuration (release,
# unoptimised, testable; scripts/traits.sh says why), the `swift test` runs name it too, and the
# binaries are in $bin (.build/release).
export LOCKBOX_CONFIGURATION=test
source scripts/traits.sh
log=$(mktemp)
trap 'status=$?; rm -f "$log"; step "done (exit $status)"' EXIT
step "build"
"${lockbox_build[@]}" --build-tests "${lockbox_traits[@]}" 2>&1 | tee "$log"
if grep -E "^$(pwd)/(Sources|Tests|Examples|Benchmarks)/.*: warning:" "$log"; then
    echo "test: the build has warnings in our own code (above); fix them" >&2
    exit 1
fi
# The same options for the path as for the build, so the query makes no plan of its own.
bin="$("${lockbox_build[@]}" --build-tests "${lockbox_traits[@]}" --show-bin-path)"

# The suite again under ThreadSanitizer and AddressSanitizer (library, lockbox binary and tests
# rebuilt for each, into .build-tsan and .build-asan): a data race, or a memory error in the C
# interop (libsodium, D-Bus, the guarded-memory heap, tss2, SQLite), fails CI. Any report fails
# the run (docs/SECURITY-TESTING.md, section 4). It runs in the background from here on, beside
# the checks and suites below; the sanitized suites widen their timing slack
# (LOCKBOX_SANITIZER_BUILD), and the last step waits for it and prints its log. It starts as soon
# as the first build is done, being the longest chain of steps (two builds, two suites). The
# machine is busy from the first build to the end (2 cores), so beyond that the order of the steps
# does not change the total: only less work does.
sanitizer_log=$(mktemp)
sanitizer_status=$(mktemp -u)
setsid bash -c 'scripts/ci/sanitizers.sh all >"$1" 2>&1; echo $? >"$2"' sanitizers "$sanitizer_log" "$sanitizer_status" </dev/null &
sanitizer_pid=$!
trap 'status=$?; kill -- -"$sanitizer_pid" 2>/dev/null || true; rm -f "$log" "$sanitizer_log" "$sanitizer_status" ${suite_log:+"$suite_log"}; step "done (exit $status)"' EXIT
step "sanitizers started in the background"

# Every public symbol of the library has its own doc comment (the CLI reference, man page and
# completions are checked against the command definitions by CLIDocsTests in the suite). Here,
# before the examples package is built into .build: it compiles the package's modules again, as a
# dependency (other flags), and its build plan replaces this one, which the check reads.
step "check-docs"
scripts/ci/check-docs.sh --skip-build

# The examples (a package of their own, Examples/, built into .build with the root's traits: the
# SwiftNIO and Hummingbird the service example needs come from the build above and this one) must
# still do what they say, on the file vault and on gnome-keyring.
step "examples"
scripts/ci/run-examples.sh
# Every Swift sample of README.md and the DocC catalog, built as a consumer package would build it
# (a path dependency on the root, no traits: it must resolve no SwiftNIO, postgres-nio or Yams)
# and run against a vault `lockbox init` made, reading what `lockbox set` stored.
step "README and DocC samples as a consumer package"
scripts/ci/check-samples.sh "$bin/lockbox"
# Blocking calls a service can reach from async code are refused by the compiler (async overloads
# win; `noasync` where there is none), as a consumer package sees them.
step "blocking API from async code"
scripts/ci/check-noasync.sh
# The example Hummingbird service (built by run-examples.sh above, into the root's .build: so its
# binary is in $bin, and the script need not plan a build again): two processes on one vault
# driven with concurrent requests, then the starvation benchmark's quick mode (figures, no
# thresholds).
step "Hummingbird service example"
scripts/ci/run-service-example.sh --binary "$bin/HummingbirdService"
# The Hummingbird service on PostgreSQL (also built by run-examples.sh): under ServiceGroup with the
# store's pool as a service, a token stored and read over HTTP, SIGTERM → exit 0 within 10 s, the
# store's log lines in its output (inside its own scripts/dev/postgres-session.sh).
step "Hummingbird on PostgreSQL example"
scripts/ci/run-postgres-service-example.sh --binary "$bin/HummingbirdPostgres"

# Every Swift source is formatted as .swift-format says (swift-format, part of the toolchain;
# `swift format -i -r Sources Tests Examples Benchmarks` applies it).
step "swift-format"
swift format lint --strict -r Sources Tests Examples Benchmarks
# The DocC catalog and every doc comment build without DocC warnings (docc convert over the
# symbol graph of the module built above; about 5 s).
step "check-docc"
scripts/ci/check-docc.sh --skip-build
# The PostgreSQL store's cross-host protocols (PIN ledger, refresh lease, conditional PIN change,
# device ID), model-checked with spin under host crashes and a failover: each model holds and
# each mutant, a key step removed, fails (docs/ARCHITECTURE.md, "Model-checked cross-host
# protocols"; ~35 s).
step "check-models"
scripts/ci/check-models.sh

# docs/FORMAT.md must describe the real bytes: an independent decryptor (Python + PyNaCl,
# written from the document alone) must read what lockbox writes.
step "check-format"
scripts/ci/check-format.sh "$bin/lockbox"

# The PKCS#7 check of the Secret Service session (Lockbox's own code; the rest of the session is
# libcrypto's), as the optimiser compiled it, has no branch or address that depends on the
# decrypted secret (valgrind; Sources/CLibcrypto/padding.c).
step "check-constant-time"
scripts/ci/check-constant-time.sh

# The suite runs inside a private D-Bus session with a real gnome-keyring-daemon (started and
# stopped by the script), and in a session keyring of its own (`keyctl session`), as a login
# session has one, for the re-authentication windows. The keyring tests refuse to be skipped
# when this variable is set.
export LOCKBOX_REQUIRE_KEYRING_TESTS=1
# Evidence a reviewer can rerun (docs/SECURITY-TESTING.md): the known-answer vectors match their
# generators, the session's HKDF, AES-CBC and MODP vectors are recomputed without libcrypto (VectorTests checks that LockboxSelfTest compiles in exactly those files), and the
# binary passes every one of them; every
# fuzzing harness builds and runs for 2 seconds (every seed, then some thousands of mutations).
step "vectors, selftest, fuzz smoke"
python3 scripts/format/make-vault-vectors.py --check
python3 scripts/ci/check-session-vectors.py
"$bin/lockbox" selftest | tail -n 1
scripts/ci/fuzz.sh --debug 2

# Re-authentication windows where the test command itself runs, outside the suite's `keyctl
# session`: in CI and containers there is no login session keyring, so `unlock` must refuse with
# 41; in a desktop login it must succeed and the next invocation must see the window. Never a
# success whose window is gone (SECURITY.md, "No login session keyring, no window").
step "window outside the session keyring"
scripts/ci/check-window-here.sh "$bin/lockbox"

# The suite, with a software TPM 2.0 (swtpm on loopback, LOCKBOX_TPM_TCTI) for the TPM key slot
# tests; TPM tests that need to lock out or restart a TPM start a private swtpm of their own.
# They fail rather than skip when no swtpm is there.
export LOCKBOX_REQUIRE_TPM_TESTS=1
# The PostgreSQL store's tests run below, against their own cluster.
# Each suite run has a time limit (scripts/dev/watchdog.sh): a hung test fails the step, naming the
# tests still running and the processes they wait on, instead of using up CI's 90 minutes.
step "suite"
suite_log=$(mktemp)
# The swift-configuration adapter's tests are built here (trait SwiftConfiguration) and must run;
# the sanitizer builds (started above) enable no trait, so the variable is set for this run only.
LOCKBOX_REQUIRE_CONFIGURATION_TESTS=1 scripts/dev/watchdog.sh 1800 --log "$suite_log" -- \
    keyctl session - scripts/dev/keyring-session.sh -- scripts/dev/swtpm-session.sh -- \
    swift test --skip-build "${lockbox_configuration[@]}" "${lockbox_traits[@]}" --skip LockboxPostgresTests > >(tee "$suite_log") 2>&1
# LockboxPostgres against a real PostgreSQL 15 primary with a synchronous standby on loopback
# (scripts/dev/postgres-session.sh starts and removes them), and a second pair that the failover test
# (8 writer processes, primary SIGKILLed, standby promoted) has to itself; the tests fail rather
# than skip without them. About 30-50 s in all (session 14-35 s, tests ~15 s). Built once, by the
# `swift build --build-tests` above (trait PostgreSQL); the sanitizer builds, which enable no
# trait, leave it out.
# The cross-host tests' 8 hosts run in 8 network namespaces (--hosts 8) wherever this machine can
# make one (root with CAP_NET_ADMIN): then they must (LOCKBOX_REQUIRE_NETNS=1).
step "PostgreSQL tests"
require_netns=0
if ip netns add "lockbox-probe-$$" 2>/dev/null; then
    ip netns delete "lockbox-probe-$$"
    require_netns=1
else
    echo "test.sh: this machine cannot make network namespaces; the cross-host tests run their hosts as plain processes"
fi
LOCKBOX_REQUIRE_NETNS=$require_netns LOCKBOX_REQUIRE_POSTGRES_TESTS=1 scripts/dev/watchdog.sh 900 --log "$suite_log" -- \
    scripts/dev/postgres-session.sh --hosts 8 -- \
    swift test --skip-build "${lockbox_configuration[@]}" "${lockbox_traits[@]}" --filter LockboxPostgresTests > >(tee "$suite_log") 2>&1
# The PostgreSQL store's benchmark in its quick mode (the test build, ~10 s), so it keeps working;
# figures, no thresholds (docs/PERFORMANCE.md, "PostgreSQL store").
step "PostgreSQL benchmark, quick"
scripts/bench/bench-postgres.sh --quick --binary "$bin/LockboxPostgresLoad"
# git (credential helper, clone over loopback HTTP) and Python keyring (its own BackendBasicTests,
# pytest) against Lockbox, on a file vault and on this gnome-keyring (~30 s).
step "integrations (git, Python keyring)"
scripts/dev/keyring-session.sh -- scripts/ci/test-integrations.sh "$bin/lockbox"
# lockbox next to secret-tool as whole processes, with D-Bus call counts (docs/PERFORMANCE.md):
# the benchmark script in its quick mode (3 pairs a row, ~10 s, the test build), so it keeps working.
# It prints figures and asserts no thresholds.
step "CLI benchmark, quick"
scripts/bench/bench-cli.sh --quick --dbus --binary "$bin/lockbox"

# The sanitizers, started in the background above: wait for them and show what they said.
step "sanitizers (waiting for the background run)"
while [[ ! -s $sanitizer_status ]]; do
    if ! kill -0 "$sanitizer_pid" 2>/dev/null && [[ ! -s $sanitizer_status ]]; then
        sleep 1
        [[ -s $sanitizer_status ]] || { cat "$sanitizer_log"; echo "test: the sanitizer run ended without a status" >&2; exit 1; }
    fi
    sleep 2
done
cat "$sanitizer_log"
exit "$(cat "$sanitizer_status")"
