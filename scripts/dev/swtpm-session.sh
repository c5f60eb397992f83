#!/usr/bin/env bash
# Run a command with a throwaway software TPM 2.0 (swtpm) on loopback.
#
# Usage: scripts/dev/swtpm-session.sh -- COMMAND [ARGS...]
#
# Starts `swtpm socket --tpm2` with a fresh state folder under /tmp, its command
# and control channels on two free consecutive loopback ports, already started up
# (TPM2_Startup(CLEAR), like a TPM after boot). COMMAND sees:
#   LOCKBOX_TPM_TCTI       the tpm2-tss TCTI string for it (swtpm:host=127.0.0.1,port=N)
#   TPM2TOOLS_TCTI         the same, for tpm2-tools in tests
#   LOCKBOX_TEST_SWTPM_STATE  the state folder (tests may start their own swtpm on a copy)
# swtpm is stopped and the folder removed on every exit path; the script exits
# with COMMAND's status. Requires swtpm (apt-get install swtpm swtpm-tools) and
# python3 (to find free ports).
set -euo pipefail

die() {
    echo "swtpm-session: $*" >&2
    exit 1
}

while (($#)); do
    case "$1" in
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) break ;;
    esac
done
(($#)) || die "no command given (usage: $0 -- COMMAND [ARGS...])"
command -v swtpm >/dev/null || die "swtpm not found (apt-get install swtpm swtpm-tools)"

tmp=''
swtpm_pid=''
command_pid=''
# shellcheck disable=SC2317 # only reached through the EXIT trap
cleanup() {
    local rc=$?
    set +e
    if [[ -n $command_pid ]]; then kill -TERM "$command_pid" 2>/dev/null; wait "$command_pid" 2>/dev/null; fi
    if [[ -n $swtpm_pid ]]; then kill -TERM "$swtpm_pid" 2>/dev/null; wait "$swtpm_pid" 2>/dev/null; fi
    [[ -n $tmp && -d $tmp ]] && rm -rf -- "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d /tmp/lockbox-swtpm.XXXXXX)
mkdir -p "$tmp/state"

# Two free consecutive loopback ports (swtpm binds them a moment later). If another
# process takes one in between, swtpm fails to start and we try again.
started=0
for _attempt in 1 2 3 4 5; do
    # tpm2-tss's swtpm TCTI expects the control channel on the next port up.
    read -r port ctrl_port < <(python3 -c '
import random, socket
while True:
    port = random.randrange(20000, 60000, 2)
    try:
        for p in (port, port + 1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(port, port + 1)
    break')
    swtpm socket --tpm2 --tpmstate dir="$tmp/state" \
        --server type=tcp,port="$port",bindaddr=127.0.0.1 \
        --ctrl type=tcp,port="$ctrl_port",bindaddr=127.0.0.1 \
        --flags not-need-init,startup-clear --log file="$tmp/swtpm.log" </dev/null >/dev/null 2>&1 &
    swtpm_pid=$!
    for _ in $(seq 50); do
        if ! kill -0 "$swtpm_pid" 2>/dev/null; then break; fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then started=1; break; fi
        sleep 0.05
    done
    ((started)) && break
    kill -TERM "$swtpm_pid" 2>/dev/null || true
    wait "$swtpm_pid" 2>/dev/null || true
    swtpm_pid=''
done
((started)) || { cat "$tmp/swtpm.log" >&2 2>/dev/null; die "swtpm did not start"; }

export LOCKBOX_TPM_TCTI="swtpm:host=127.0.0.1,port=$port"
export TPM2TOOLS_TCTI="$LOCKBOX_TPM_TCTI"
export LOCKBOX_TEST_SWTPM_STATE="$tmp/state"

( trap - INT QUIT; exec "$@" ) <&0 &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid=''
exit "$status"
