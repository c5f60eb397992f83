#!/usr/bin/env bash
# Run a command against a private, throwaway freedesktop Secret Service.
#
# Usage: scripts/dev/keyring-session.sh [--locked] [--no-provider] -- COMMAND [ARGS...]
#
#   (default)      a real gnome-keyring-daemon owns org.freedesktop.secrets and
#                  its default ("login") collection is UNLOCKED.
#   --locked       the login collection exists but is LOCKED. Nothing can show
#                  an unlock prompt, so any prompt fails at once instead of hanging.
#   --no-provider  a session bus exists but nobody owns org.freedesktop.secrets.
#
# COMMAND sees LOCKBOX_TEST_KEYRING=unlocked|locked|none, the keyring daemon's
# PID in LOCKBOX_TEST_KEYRING_PID (empty with --no-provider), a session bus in
# DBUS_SESSION_BUS_ADDRESS, and HOME/XDG_* directories inside a temp folder
# (so SwiftPM's caches start cold: build first, then `swift test --skip-build`).
# Everything is torn down on every exit path, and the script exits with
# COMMAND's status. LOCKBOX_KEYRING_DEBUG=1 prints the daemons' logs at teardown.
#
# Requires: bash >= 5, dbus-daemon + dbus-send (dbus), gdbus (libglib2.0-bin),
# gnome-keyring, ps (procps).
set -euo pipefail

readonly PASSWORD='lockbox-test-password'
readonly START_TICKS=200 # 10 s in steps of 0.05 s for a daemon to start
readonly STOP_TICKS=100  # 5 s for a process to exit after SIGTERM

die() {
    echo "keyring-session: $*" >&2
    exit 1
}

mode=unlocked
while (($#)); do
    case "$1" in
        --locked) [[ $mode == none ]] && die "--locked and --no-provider conflict"; mode=locked; shift ;;
        --no-provider) [[ $mode == locked ]] && die "--locked and --no-provider conflict"; mode=none; shift ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) break ;;
    esac
done
(($#)) || die "no command given (usage: $0 [--locked] [--no-provider] -- COMMAND [ARGS...])"

for tool in dbus-daemon dbus-send gdbus; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
if [[ $mode != none ]]; then
    command -v gnome-keyring-daemon >/dev/null || die "gnome-keyring-daemon not found (apt-get install gnome-keyring)"
fi

# ---------------------------------------------------------------- teardown --
# Installed before anything is created; only PIDs started here are ever signalled.
tmp='' bus_pid='' keyring_pid='' command_pid='' cleaned=0

# Alive and not a zombie (kill -0 succeeds on zombies).
is_running() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ $state != Z* ]]
}

descendants() { # PIDs below $1, from one ps snapshot
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            found[root] = 1
            do {
                changed = 0
                for (p in parent)
                    if (!(p in found) && (parent[p] in found)) { found[p] = 1; changed = 1 }
            } while (changed)
            for (p in found) if (p != root) print p
        }'
}

# SIGTERM our child $1 (with --tree also all it spawned, e.g. `swift test`'s runner), SIGKILL
# what is left after 5 s, then reap $1.
stop_child() {
    local pid=$1 tree=${2:-} i p
    [[ -n $pid ]] || return 0
    local -a pids=("$pid") alive=()
    # shellcheck disable=SC2207 # PIDs contain no spaces or globs
    [[ $tree != --tree ]] || pids+=($(descendants "$pid"))
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < STOP_TICKS; i++)); do
        alive=()
        for p in "${pids[@]}"; do
            if is_running "$p"; then alive+=("$p"); fi
        done
        ((${#alive[@]})) || break
        sleep 0.05
    done
    if ((${#alive[@]})); then
        echo "keyring-session: ${alive[*]} ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "${alive[@]}" 2>/dev/null || true
        sleep 0.1
    fi
    # Only `wait` for a child that still exists: bash 5.2 can report one it has reaped already
    # as running, and `wait` then blocks forever.
    if ps -p "$pid" >/dev/null 2>&1; then wait "$pid" 2>/dev/null || true; fi
}

print_logs() {
    local f
    for f in "$tmp"/log/*.log; do
        [[ -s $f ]] || continue
        echo "---- ${f##*/} ----" >&2
        cat "$f" >&2
    done
}

# shellcheck disable=SC2317 # reached through the EXIT trap
on_exit() {
    local rc=$?
    if ((!cleaned)); then
        cleaned=1
        set +e
        stop_child "$command_pid" --tree # still running only if a signal interrupted us
        stop_child "$keyring_pid"        # a client of the bus: it exits cleanly while the bus is up
        stop_child "$bus_pid"
        if [[ -n $tmp && -d $tmp ]]; then
            [[ ${LOCKBOX_KEYRING_DEBUG:-0} == 1 ]] && print_logs
            rm -rf -- "$tmp"
        fi
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 131' QUIT
trap 'exit 143' TERM

# ---------------------------------------------------------------- sandbox --
# Under /tmp, not $TMPDIR: the bus socket lives inside, and socket paths are limited to ~108 bytes.
tmp=$(mktemp -d /tmp/lockbox-keyring.XXXXXX)
mkdir -p "$tmp"/{home,run,data,config,cache,services,log}
chmod 0700 "$tmp/run"
export HOME="$tmp/home" XDG_RUNTIME_DIR="$tmp/run" XDG_DATA_HOME="$tmp/data" \
    XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"
# Without a display no unlock prompt can wait for a human; nothing inherited points at the
# user's own bus or keyring.
unset DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL

# ---------------------------------------------------------------- bus --
# Not the stock session.conf: its service folders would activate a second gnome-keyring (racing
# ours, and defeating --no-provider) and gcr-prompter. With an empty one, a missing name is an
# immediate ServiceUnknown and an unlock prompt fails at once. The daemon is our direct child (so
# teardown can stop it after the keyring, whatever signal ends us: dbus-run-session leaves its bus
# and command running when it gets SIGTERM) and logs to a file, not to COMMAND's stderr.
cat >"$tmp/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$tmp/run/bus</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$tmp/services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
dbus-daemon --config-file="$tmp/bus.conf" --nofork --print-address=3 \
    3>"$tmp/bus.address" </dev/null >/dev/null 2>"$tmp/log/dbus-daemon.log" &
bus_pid=$!
address=''
for ((i = 0; i < START_TICKS; i++)); do
    address=$(head -n1 "$tmp/bus.address" 2>/dev/null || true)
    [[ -z $address ]] && is_running "$bus_pid" || break
    sleep 0.05
done
[[ -n $address ]] || { print_logs; die "dbus-daemon did not start"; }
export DBUS_SESSION_BUS_ADDRESS="$address"

# ---------------------------------------------------------------- provider --
# NameHasOwner is answered by the bus itself and never activates anything.
name_has_owner() {
    dbus-send --session --print-reply=literal --reply-timeout=2000 \
        --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true'
}

# Dies unless the default collection exists and its Locked property is $1 (true or false).
expect_locked() { # $1 = true|false, $2 = what went wrong otherwise
    local reply
    reply=$(gdbus call --session --timeout 5 --dest org.freedesktop.secrets \
        --object-path /org/freedesktop/secrets/aliases/default --method org.freedesktop.DBus.Properties.Get \
        org.freedesktop.Secret.Collection Locked 2>&1) || { print_logs; die "$2 (no default collection: $reply)"; }
    [[ $reply == *"<$1>"* ]] || { print_logs; die "$2 (Locked: $reply)"; }
}

# --foreground keeps the daemon our direct child (--daemonize returns before the name is owned).
# --unlock reads the password from stdin up to EOF (so no trailing newline); with no login
# keyring yet, it creates one with that password, the default collection.
start_keyring() { # $1 = --unlock or empty
    local stdin=/dev/null i
    if [[ ${1:-} == --unlock ]]; then
        stdin="$tmp/password"
        (umask 077 && printf '%s' "$PASSWORD" >"$stdin")
    fi
    gnome-keyring-daemon --foreground --components=secrets ${1:+"$1"} \
        <"$stdin" >>"$tmp/log/gnome-keyring.log" 2>&1 &
    keyring_pid=$!
    for ((i = 0; i < START_TICKS; i++)); do
        name_has_owner && return 0
        is_running "$keyring_pid" || { print_logs; die "gnome-keyring-daemon exited before it owned org.freedesktop.secrets"; }
        sleep 0.05
    done
    print_logs
    die "org.freedesktop.secrets did not appear on the bus within 10 s"
}

case "$mode" in
    unlocked)
        start_keyring --unlock
        # --unlock exits 0 even when the password is wrong, so check.
        expect_locked false "default collection is not unlocked after --unlock"
        ;;
    locked)
        # The login keyring made with the password, then the daemon restarted without --unlock:
        # a fresh login without PAM integration.
        start_keyring --unlock
        expect_locked false "could not create an unlocked login keyring"
        stop_child "$keyring_pid"
        keyring_pid=''
        start_keyring
        expect_locked true "default collection is not locked after the restart"
        ;;
    none)
        ! name_has_owner || die "org.freedesktop.secrets is unexpectedly owned"
        ;;
esac
rm -f -- "$tmp/password"

# ---------------------------------------------------------------- command --
export LOCKBOX_TEST_KEYRING="$mode"
export LOCKBOX_TEST_KEYRING_PID="$keyring_pid" # for tests that stop the provider mid-session
# In the background and waited for: bash runs traps only after a foreground child exits, so a
# SIGTERM (from `timeout`) would wait for a hung test forever. `trap -` gives COMMAND back the
# SIGINT and SIGQUIT a background child starts without, and `<&0` our stdin.
(
    trap - INT QUIT
    exec "$@"
) <&0 &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid='' # reaped; never signal a PID that may have been reused
exit "$status"
