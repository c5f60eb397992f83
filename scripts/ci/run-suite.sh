#!/usr/bin/env bash
# Runs the built test bundle in several processes at once, one per shard of test modules, each
# in its own session keyring (`keyctl session`), private D-Bus session with a real gnome-keyring
# (scripts/dev/keyring-session.sh) and software TPM (scripts/dev/swtpm-session.sh).
#
# Usage: scripts/ci/run-suite.sh --bundle PATH [--skip REGEX] [SHARD...]
#
#   --bundle PATH   the test bundle: `$(swift build --show-bin-path ...)/LockboxPackageTests.xctest`
#   --skip REGEX    tests to leave out (Swift Testing's --skip, on IDs `Module.Suite/test()`)
#   SHARD           a regular expression for one shard's tests (Swift Testing's --filter); every
#                   test must fall in exactly one shard. Default: three shards, the CLI's tests
#                   (LockboxCLITests), the core's (LockboxTests) and every other module's.
#
# Why shards: many tests wait on a child process (the `lockbox` binary, gnome-keyring, swtpm)
# from a blocking call, which holds one of Swift Concurrency's cooperative threads, and there are
# only as many of those as cores. On a 2-core machine one test process therefore runs about two
# such tests at a time while the cores sit mostly idle; three processes run six.
#
# The shards' output goes to standard output as they write it (whole lines, interleaved, as the
# tests of one process already are), followed by one summary line per shard. Exit status: 0 when
# every shard passed, else the first failing shard's status.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "run-suite: $*" >&2; exit 64; }
bundle=''
skip=()
shards=()
while (($#)); do
    case "$1" in
        --bundle) (($# >= 2)) || die "--bundle needs a path"; bundle=$2; shift 2 ;;
        --skip) (($# >= 2)) || die "--skip needs a regular expression"; skip=(--skip "$2"); shift 2 ;;
        -*) die "unknown option: $1" ;;
        *) shards+=("$1"); shift ;;
    esac
done
[[ -x $bundle ]] || die "no test bundle at '$bundle' (build with --build-tests first)"
((${#shards[@]})) || shards=('^LockboxCLITests\.' '^LockboxTests\.' '^(?!LockboxCLITests\.|LockboxTests\.)')

state=$(mktemp -d "${TMPDIR:-/tmp}/lockbox-suite.XXXXXX")
# Job control: each shard is a process group of its own, stopped with all it started on an
# early exit.
set -m
groups=()
trap 'for g in "${groups[@]}"; do kill -- -"$g" 2>/dev/null || true; done; rm -rf "$state"' EXIT

for i in "${!shards[@]}"; do
    {
        status=0
        keyctl session - scripts/dev/keyring-session.sh -- scripts/dev/swtpm-session.sh -- \
            env NO_COLOR=1 "$bundle" --testing-library swift-testing --filter "${shards[$i]}" "${skip[@]}" 2>&1 |
            tee "$state/$i.log" || status=$?
        echo "$status" >"$state/$i.status"
    } &
    groups+=("$!")
done

overall=0
summary=()
for i in "${!shards[@]}"; do
    # Polled, not `wait`ed: the test environment may block SIGCHLD.
    until [[ -s $state/$i.status ]]; do
        if ! kill -0 "${groups[$i]}" 2>/dev/null; then
            sleep 1
            [[ -s $state/$i.status ]] || echo 70 >"$state/$i.status"
        fi
        sleep 1
    done
    status=$(cat "$state/$i.status")
    last=$(grep -E '^(✔|✘) Test run with ' "$state/$i.log" | tail -n 1 || true)
    summary+=("shard ${shards[$i]}: exit $status; ${last:-no summary line from Swift Testing}")
    ((status == 0 || overall != 0)) || overall=$status
done
printf 'run-suite: %s\n' "${summary[@]}"
exit "$overall"
