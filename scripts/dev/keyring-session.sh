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
# DBUS_SESSION_BUS_ADDRESS, and HOME/XDG_* directories inside a temp folder.
# Everything (daemons, temp folder) is torn down on every exit path, and the
# script exits with COMMAND's status. Set LOCKBOX_KEYRING_DEBUG=1 to print the
# daemons' logs at teardown.
#
# Note: HOME is a fresh empty directory, so tools that keep caches under HOME
# (SwiftPM: ~/.swiftpm, ~/.cache/org.swift.swiftpm) start cold; build first,
# then run e.g. `scripts/dev/keyring-session.sh -- swift test --skip-build`.
#
# Requires: bash >= 5, dbus-daemon + dbus-send (dbus), gdbus (libglib2.0-bin),
# gnome-keyring, ps (procps).
set -euo pipefail

readonly PASSWORD='lockbox-test-password'
readonly NAME_WAIT_SECONDS=10   # upper bound for a daemon to claim its bus name
readonly STOP_WAIT_SECONDS=5    # upper bound for a daemon to exit after SIGTERM

usage() { # the header comment above, without the leading "# "
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}

die() {
    echo "keyring-session: $*" >&2
    exit 1
}

# ---------------------------------------------------------------- arguments --
mode=unlocked
while (($#)); do
    case "$1" in
        --locked) [[ $mode == none ]] && die "--locked and --no-provider conflict"; mode=locked; shift ;;
        --no-provider) [[ $mode == locked ]] && die "--locked and --no-provider conflict"; mode=none; shift ;;
        -h | --help) usage; exit 0 ;;
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
# Installed before anything is created, so every exit path (success, failure
# under set -e, Ctrl-C, SIGTERM) stops our own children and removes the folder.
# Only PIDs we started ourselves are ever signalled.
tmp=''
bus_pid=''
keyring_pid=''
command_pid=''
cleaned=0

# Milliseconds since the epoch, without forking (bash >= 5).
now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

# True while PID is alive and not yet a zombie (kill -0 succeeds on zombies).
is_running() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ $state != Z* ]]
}

# PIDs of every descendant of $1, from a single ps snapshot.
descendants() {
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

# Stop our child $1: SIGTERM it (with --tree, also everything it spawned, so
# e.g. `swift test` does not leave its test runner behind), allow
# STOP_WAIT_SECONDS, SIGKILL whatever is left, then reap $1.
stop_child() {
    local pid=$1 tree=${2:-} i p
    [[ -n $pid ]] || return 0
    local -a pids=("$pid") alive
    if [[ $tree == --tree ]]; then
        # shellcheck disable=SC2207 # PIDs contain no spaces or globs
        pids+=($(descendants "$pid"))
    fi
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i <= STOP_WAIT_SECONDS * 10; i++)); do
        alive=()
        for p in "${pids[@]}"; do
            if is_running "$p"; then alive+=("$p"); fi
        done
        ((${#alive[@]})) || break
        sleep 0.1
    done
    if ((${#alive[@]})); then
        echo "keyring-session: ${alive[*]} ignored SIGTERM, sending SIGKILL" >&2
        kill -KILL "${alive[@]}" 2>/dev/null || true
        sleep 0.1
    fi
    # Reap it, but only if it still exists (as a zombie). If bash has reaped it
    # already, `wait PID` can block forever: bash 5.2 keeps reporting a child as
    # "Running" when a trapped signal interrupted the main `wait` just as the
    # child died of the same signal (e.g. SIGHUP sent to the process group).
    if ps -p "$pid" >/dev/null 2>&1; then
        wait "$pid" 2>/dev/null || true
    fi
}

print_logs() {
    local f
    for f in "$tmp"/log/*.log; do
        [[ -s $f ]] || continue
        echo "---- ${f##*/} ----" >&2
        cat "$f" >&2
    done
}

# shellcheck disable=SC2317 # only reached through the EXIT trap
cleanup() {
    ((cleaned)) && return 0
    cleaned=1
    set +e # best effort: every step must run even if an earlier one fails
    # COMMAND is only still running if we were interrupted by a signal.
    stop_child "$command_pid" --tree
    # Keyring next: it is a client of the bus and exits more cleanly while
    # the bus is still up.
    stop_child "$keyring_pid"
    stop_child "$bus_pid"
    if [[ -n $tmp && -d $tmp ]]; then
        [[ ${LOCKBOX_KEYRING_DEBUG:-0} == 1 ]] && print_logs
        rm -rf -- "$tmp"
    fi
}

# shellcheck disable=SC2317 # only reached through the EXIT trap
on_exit() {
    local rc=$? # the status the script was exiting with
    cleanup
    exit "$rc"
}
trap on_exit EXIT
# Convert signals into an ordinary exit so the EXIT trap runs (128 + signo).
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 131' QUIT
trap 'exit 143' TERM

# ---------------------------------------------------------------- sandbox --
# Under /tmp (not $TMPDIR) on purpose: the bus socket lives inside, and unix
# socket paths are limited to ~108 bytes.
tmp=$(mktemp -d /tmp/lockbox-keyring.XXXXXX)
mkdir -p "$tmp"/{home,run,data,config,cache,services,log}
chmod 0700 "$tmp/run" # XDG_RUNTIME_DIR must be private, per the XDG spec

export HOME="$tmp/home"
export XDG_RUNTIME_DIR="$tmp/run"
export XDG_DATA_HOME="$tmp/data"     # gnome-keyring stores keyrings/ here
export XDG_CONFIG_HOME="$tmp/config"
export XDG_CACHE_HOME="$tmp/cache"
# No display means nothing can pop up an unlock prompt that would wait forever
# for a human; prompts fail instead.
unset DISPLAY WAYLAND_DISPLAY
# Never let anything inherited point at the real user's keyring or bus.
unset DBUS_SESSION_BUS_ADDRESS GNOME_KEYRING_CONTROL

# ---------------------------------------------------------------- bus --
# A minimal config instead of the stock session.conf: the stock file includes
# <standard_session_servicedirs/>, i.e. /usr/share/dbus-1/services, which holds
# org.freedesktop.secrets.service (would auto-activate a SECOND gnome-keyring,
# racing ours, and would make --no-provider meaningless) and
# org.gnome.keyring.SystemPrompter.service (gcr-prompter, a GUI prompt). With
# an empty service dir, nothing is ever activated: a missing name is an
# immediate ServiceUnknown error, and an unlock prompt fails at once.
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

# --nofork + & makes the daemon our direct child, so $! is its PID and we can
# reap it. It prints its address once it is listening: that is our readiness
# signal. (Like every background child here, it ignores SIGINT, so Ctrl-C
# cannot take the bus or keyring away while COMMAND is still shutting down.)
dbus-daemon --config-file="$tmp/bus.conf" --nofork --print-address=3 \
    3>"$tmp/bus.address" </dev/null >/dev/null 2>"$tmp/log/dbus-daemon.log" &
bus_pid=$!

address=''
deadline=$(($(now_ms) + NAME_WAIT_SECONDS * 1000))
while [[ -z $address ]] && (($(now_ms) < deadline)) && is_running "$bus_pid"; do
    sleep 0.05
    address=$(head -n1 "$tmp/bus.address" 2>/dev/null || true)
done
if [[ -z $address ]]; then
    print_logs
    die "dbus-daemon did not start"
fi
# Same value as unix:path=$XDG_RUNTIME_DIR/bus, which GLib also falls back to
# when DBUS_SESSION_BUS_ADDRESS is unset.
export DBUS_SESSION_BUS_ADDRESS="$address"

# ---------------------------------------------------------------- helpers --
# NameHasOwner is answered by the bus itself and never activates anything.
name_has_owner() {
    dbus-send --session --print-reply=literal --reply-timeout=2000 \
        --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null |
        grep -q 'boolean true'
}

# Block (bounded) until the keyring daemon owns org.freedesktop.secrets.
wait_for_provider() {
    local deadline=$(($(now_ms) + NAME_WAIT_SECONDS * 1000))
    while (($(now_ms) < deadline)); do
        name_has_owner && return 0
        if ! is_running "$keyring_pid"; then
            print_logs
            die "gnome-keyring-daemon exited before it owned org.freedesktop.secrets"
        fi
        sleep 0.05
    done
    print_logs
    die "org.freedesktop.secrets did not appear on the bus within ${NAME_WAIT_SECONDS}s"
}

# Print "true"/"false": the Locked property of the collection behind the
# "default" alias. Returns 1 (with a message) if there is no default
# collection. Runs inside $(...), so it reports with `return`, not `die`.
default_collection_locked() {
    local path reply
    path=$(gdbus call --session --timeout 5 --dest org.freedesktop.secrets \
        --object-path /org/freedesktop/secrets \
        --method org.freedesktop.Secret.Service.ReadAlias default) || {
        echo "keyring-session: ReadAlias(\"default\") failed" >&2
        return 1
    }
    # Reply looks like: (objectpath '/org/freedesktop/secrets/collection/login',)
    path=${path#*\'}
    path=${path%%\'*}
    if [[ $path != /org/freedesktop/secrets/collection/* ]]; then
        echo "keyring-session: no default collection (ReadAlias(\"default\") returned '$path')" >&2
        return 1
    fi
    reply=$(gdbus call --session --timeout 5 --dest org.freedesktop.secrets \
        --object-path "$path" --method org.freedesktop.DBus.Properties.Get \
        org.freedesktop.Secret.Collection Locked) || {
        echo "keyring-session: reading Locked of $path failed" >&2
        return 1
    }
    case "$reply" in
        *'<true>'*) echo true ;;
        *'<false>'*) echo false ;;
        *) echo "keyring-session: unexpected Locked reply for $path: $reply" >&2; return 1 ;;
    esac
}

# Die unless the default collection's Locked property equals $1.
expect_locked() { # $1 = true|false, $2 = what went wrong otherwise
    local locked
    locked=$(default_collection_locked) || { print_logs; die "$2"; }
    [[ $locked == "$1" ]] || { print_logs; die "$2 (Locked=$locked)"; }
}

# --foreground (not --daemonize, which returns before the name is owned) keeps
# the daemon as our direct child. With --unlock it reads the password from
# stdin up to EOF, so the password file has no trailing newline (a newline
# would become part of the password). If no login keyring exists yet, that
# password creates it, and gnome-keyring then treats "login" as the default
# collection.
start_keyring() { # $1 = --unlock or empty
    local stdin=/dev/null
    if [[ ${1:-} == --unlock ]]; then
        stdin="$tmp/password"
        (umask 077 && printf '%s' "$PASSWORD" >"$stdin")
    fi
    gnome-keyring-daemon --foreground --components=secrets ${1:+"$1"} \
        <"$stdin" >>"$tmp/log/gnome-keyring.log" 2>&1 &
    keyring_pid=$!
    wait_for_provider
}

# ---------------------------------------------------------------- provider --
case "$mode" in
    unlocked)
        start_keyring --unlock
        # --unlock exits 0 even when the password is wrong, so check for real.
        expect_locked false "default collection is not unlocked after --unlock"
        ;;
    locked)
        # Create the login keyring with the password, then restart the daemon
        # WITHOUT --unlock: the keyring exists on disk but nobody has unlocked
        # it, which is exactly a fresh login without PAM integration.
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
# The daemon's PID, for tests that stop the provider in the middle of a session.
export LOCKBOX_TEST_KEYRING_PID="$keyring_pid"
# COMMAND runs as a background child that we `wait` for, rather than in the
# foreground: bash defers traps until a foreground child exits, so a SIGTERM
# (e.g. from `timeout`) would otherwise wait for a hung test forever, and a
# later SIGKILL would leak the daemons. `wait` returns as soon as a trapped
# signal arrives; the EXIT trap then stops COMMAND first (stop_child).
# Without job control, bash starts background children with SIGINT/SIGQUIT
# ignored and stdin on /dev/null; `trap -` restores the signals (unless they
# were already ignored when this script started) and `<&0` keeps our stdin,
# so COMMAND behaves as if run directly: Ctrl-C reaches it, it can read input.
( trap - INT QUIT; exec "$@" ) <&0 &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid='' # reaped; never signal a PID that may have been reused
exit "$status"
