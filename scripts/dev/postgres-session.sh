#!/usr/bin/env bash
# Run a command against throwaway PostgreSQL primaries, each with a synchronous standby.
#
# Usage: scripts/dev/postgres-session.sh [--no-standby] [--hosts N] -- COMMAND [ARGS...]
#
# Clusters live in a fresh folder under /tmp (run as the `postgres` user when we are root), on
# free loopback ports and a Unix socket in that folder, scram-sha-256 on TCP. Each standby is a
# pg_basebackup clone and synchronous (synchronous_standby_names = '*'): a commit is acknowledged
# only once the standby has it, so a test may SIGKILL a primary, promote its standby and find every
# acknowledged write there. pg_virtualenv makes one cluster; the tests need three such pairs, a
# control command and hosts in network namespaces. COMMAND sees (URL files are mode 0600 and hold
# role `lockbox`'s password, database `lockbox`: passwords are never in argv or the environment):
#   LOCKBOX_TEST_POSTGRES_URL_FILE                the primary
#   LOCKBOX_TEST_POSTGRES_PRIMARY_PORT            its port
#   LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE        its standby (this and below: unless --no-standby)
#   LOCKBOX_TEST_POSTGRES_STANDBY_PORT            the standby's port
#   LOCKBOX_TEST_POSTGRES_FAILOVER_URL_FILE       both, target_session_attrs=read-write
#   LOCKBOX_TEST_POSTGRES_FAILOVER_PAIR_URL_FILE  a second pair (failover-primary, failover-standby),
#                                                 both hosts, read-write, connect_timeout=2: the
#                                                 failover test kills its primary, which no other uses
#   LOCKBOX_TEST_POSTGRES_HAZARD_PAIR_URL_FILE    a third pair (hazard-primary, hazard-standby), the
#                                                 same URL options: the durability tests' own
#   LOCKBOX_TEST_POSTGRES_CTL                     the control command for fault tests, NODE one of
#                                                 the names above (primary, standby, ...):
#       CTL kill NODE                SIGKILL the server (postmaster and children): a crash
#       CTL stop NODE, CTL cont NODE SIGSTOP / SIGCONT it: connections open, nothing answered
#       CTL promote [NODE]           promote a standby (default: standby), wait until it takes writes
#       CTL start NODE               start a stopped server again
#       CTL psql NODE SQL            SQL as the superuser in database lockbox; unaligned rows
#       CTL dump NODE                pg_dump of database lockbox (plain SQL)
#       CTL rebuild NODE FROM        NODE cloned anew from FROM (now a primary) as its synchronous
#                                    standby: the pair is whole again for the next failover
# --hosts N (root, where the kernel allows network namespaces): N namespaces, one per "host" of the
# cross-host tests, each joined to this machine by a veth pair with a private /30 and nothing else;
# the primary also listens on each link's address. COMMAND then also sees
#   LOCKBOX_TEST_POSTGRES_NETNS           the namespaces' names, space-separated (`ip netns exec`)
#   LOCKBOX_TEST_POSTGRES_HOST_URL_FILES  for each, a URL file of the primary at its link's address
# Where namespaces cannot be made, a note on standard error, and both stay unset.
# Every server is stopped and the folder removed on every exit path; the exit status is COMMAND's.
# Requires Debian's postgresql (apt-get install postgresql) and python3.
set -euo pipefail

die() {
    echo "postgres-session: $*" >&2
    exit 1
}

# Debian keeps the server binaries out of PATH, one folder per major version; take the newest.
pg_bin=''
for dir in /usr/lib/postgresql/*/bin; do
    [[ -x $dir/initdb ]] && pg_bin=$dir
done
[[ -n $pg_bin ]] || pg_bin=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
[[ -x $pg_bin/initdb ]] || die "initdb not found (apt-get install postgresql)"

# PostgreSQL refuses to run as root: as root, the servers run as `postgres` (Debian's package
# creates that user).
if [[ $(id -u) -eq 0 ]]; then
    server_user=postgres
    id -u "$server_user" >/dev/null 2>&1 || die "no user '$server_user' to run PostgreSQL as (apt-get install postgresql creates it)"
    as_server() { setpriv --reuid="$server_user" --regid="$server_user" --init-groups --reset-env -- env PATH="$pg_bin:/usr/bin:/bin" "$@"; }
else
    server_user=$(id -un)
    as_server() { env PATH="$pg_bin:$PATH" "$@"; }
fi

# Nodes: $tmp/NODE is the data folder, $tmp/server/NODE.port its port, $tmp/server/NODE.log its log.
port_of() { [[ -f $tmp/server/$1.port ]] || { echo "postgres-session: no node '$1'" >&2; exit 2; }; cat "$tmp/server/$1.port"; }
sql_on() { # node database sql: as the superuser, over the socket, unaligned rows
    as_server "$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$tmp/server" -p "$(port_of "$1")" -U postgres -d "$2" -c "$3"
}
start_node() {
    as_server "$pg_bin/pg_ctl" -D "$tmp/$1" -l "$tmp/server/$1.log" -w -t 30 start >/dev/null ||
        { cat "$tmp/server/$1.log" >&2; die "$1 did not start"; }
}
new_data_folder() {
    mkdir -m 0700 "$tmp/$1"
    [[ $server_user == "$(id -un)" ]] || chown "$server_user:" "$tmp/$1"
}
postmaster_pid() { head -n 1 "$tmp/$1/postmaster.pid"; }
signal_server() { # signal node: the postmaster and its children
    local pid
    pid=$(postmaster_pid "$2")
    pkill -"$1" -P "$pid" 2>/dev/null || true
    kill -"$1" "$pid"
}

# NODE cloned from FROM (a running primary), started, and made FROM's synchronous standby. Commits
# on FROM wait for a standby only from here on (before one exists, they would wait forever).
make_standby() { # node from
    local node=$1 from=$2
    [[ -f $tmp/server/$node.port ]] || free_port >"$tmp/server/$node.port"
    new_data_folder "$node"
    as_server env PGPASSFILE="$tmp/server/pgpass" "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$(port_of "$from")" -U postgres \
        -D "$tmp/$node" -R -X stream -c fast --no-sync >"$tmp/server/$node-basebackup.log" 2>&1 ||
        { cat "$tmp/server/$node-basebackup.log" >&2; die "pg_basebackup of $node failed"; }
    as_server sh -c 'printf "%s\n" "$1" "$2" >>"$3"' make_standby "port = $(port_of "$node")" \
        "primary_conninfo = 'host=127.0.0.1 port=$(port_of "$from") user=postgres passfile=''$tmp/server/pgpass'' application_name=$node'" \
        "$tmp/$node/postgresql.auto.conf"
    start_node "$node"
    sql_on "$from" postgres "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
    sql_on "$from" postgres "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 300); do
        [[ $(sql_on "$from" postgres "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$node'") == sync ]] && return 0
        sleep 0.1
    done
    die "$node did not become $from's synchronous standby"
}

# ---------------------------------------------------------------- the control command --
# LOCKBOX_TEST_POSTGRES_CTL runs this script as `postgres-session.sh --ctl FOLDER COMMAND ...`.
if [[ ${1:-} == --ctl ]]; then
    tmp=$2 command=${3:-} node=${4:-}
    shift 4 2>/dev/null || shift $#
    [[ $command == promote ]] && node=${node:-standby}
    case "$command" in
        kill | stop | cont | promote | start | psql | dump | rebuild) port_of "$node" >/dev/null ;;
        *) echo "usage: CTL kill|stop|cont|start|dump NODE | promote [NODE] | psql NODE SQL | rebuild NODE FROM" >&2; exit 2 ;;
    esac
    case "$command" in
        kill)
            pid=$(postmaster_pid "$node")
            signal_server KILL "$node"
            while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
            rm -f "$tmp/$node/postmaster.pid" ;;
        stop) signal_server STOP "$node" ;;
        cont) signal_server CONT "$node" ;;
        promote)
            as_server "$pg_bin/pg_ctl" -D "$tmp/$node" -w -t 30 promote >/dev/null
            for _ in $(seq 100); do
                [[ $(sql_on "$node" postgres 'SELECT pg_is_in_recovery()') == f ]] && exit 0
                sleep 0.1
            done
            die "$node did not leave recovery" ;;
        start) start_node "$node" ;;
        psql) sql_on "$node" lockbox "${1:?CTL psql NODE SQL}" ;;
        dump) as_server "$pg_bin/pg_dump" -h "$tmp/server" -p "$(port_of "$node")" -U postgres -d lockbox ;;
        rebuild)
            port_of "${1:?CTL rebuild NODE FROM}" >/dev/null
            if [[ -f $tmp/$node/postmaster.pid ]]; then
                as_server "$pg_bin/pg_ctl" -D "$tmp/$node" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
            fi
            rm -rf -- "${tmp:?}/$node"
            make_standby "$node" "$1" ;;
    esac
    exit 0
fi

# ---------------------------------------------------------------- the session --
standby=1
hosts=0
while (($#)); do
    case "$1" in
        --no-standby) standby=0; shift ;;
        --hosts)
            [[ ${2:-} =~ ^[1-9][0-9]?$ ]] || die "--hosts takes 1 to 99"
            hosts=$2; shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) break ;;
    esac
done
(($#)) || die "no command given (usage: $0 [--no-standby] [--hosts N] -- COMMAND [ARGS...])"

tmp=''
command_pid=''
namespaces=()
# shellcheck disable=SC2317 # reached through the EXIT trap
cleanup() {
    local rc=$? port node
    set +e
    if [[ -n $command_pid ]]; then kill -TERM "$command_pid" 2>/dev/null; wait "$command_pid" 2>/dev/null; fi
    for namespace in "${namespaces[@]}"; do ip netns delete "$namespace" 2>/dev/null; done
    if [[ -n $tmp && -d $tmp ]]; then
        for port in "$tmp"/server/*.port; do
            node=$(basename "$port" .port)
            [[ -f $tmp/$node/postmaster.pid ]] || continue
            signal_server CONT "$node" 2>/dev/null # a server a test left stopped would not shut down
            as_server "$pg_bin/pg_ctl" -D "$tmp/$node" -m immediate -w -t 10 stop >/dev/null 2>&1
        done
        rm -rf -- "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d /tmp/lockbox-postgres.XXXXXX)
chmod 0711 "$tmp"
mkdir -m 0700 "$tmp/server" "$tmp/client"
[[ $server_user == "$(id -un)" ]] || chown "$server_user:" "$tmp/server"

secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(24))'; }
free_port() {
    python3 -c '
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])'
}
superuser_password=$(secret)
lockbox_password=$(secret)
(umask 077 && printf '%s\n' "$superuser_password" >"$tmp/server/superuser-password")
(umask 077 && printf '127.0.0.1:*:*:postgres:%s\n' "$superuser_password" >"$tmp/server/pgpass")
[[ $server_user == "$(id -un)" ]] || chown "$server_user:" "$tmp/server/superuser-password" "$tmp/server/pgpass"

url_file() { # file hosts [query]
    (umask 077 && printf 'postgresql://lockbox:%s@%s/lockbox%s\n' "$lockbox_password" "$2" "${3:-}" >"$1")
}

# A primary (PREFIXprimary) with role and database lockbox, and unless --no-standby its
# synchronous standby (PREFIXstandby).
start_pair() { # prefix
    local primary="${1}primary" listen='127.0.0.1'
    free_port >"$tmp/server/$primary.port"
    new_data_folder "$primary"
    as_server "$pg_bin/initdb" -D "$tmp/$primary" -U postgres --pwfile="$tmp/server/superuser-password" \
        --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$tmp/server/$primary-initdb.log" 2>&1 ||
        { cat "$tmp/server/$primary-initdb.log" >&2; die "initdb failed"; }
    [[ -n $1 ]] || listen+=$host_listen
    # The durability settings are PostgreSQL's defaults, stated so a reader of the tests sees them.
    cat >>"$tmp/$primary/postgresql.conf" <<EOF
listen_addresses = '$listen'
port = $(port_of "$primary")
unix_socket_directories = '$tmp/server'
fsync = on
synchronous_commit = on
wal_level = replica
max_wal_senders = 4
wal_keep_size = 64MB
log_destination = 'stderr'
logging_collector = off
EOF
    [[ -n $1 || -z $host_listen ]] || echo "host lockbox lockbox $host_network scram-sha-256" >>"$tmp/$primary/pg_hba.conf"
    start_node "$primary"
    # The password through psql's stdin, never argv (URL-safe base64: nothing to quote).
    as_server "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$tmp/server" -p "$(port_of "$primary")" -U postgres -d postgres \
        >/dev/null <<EOF
CREATE ROLE lockbox LOGIN PASSWORD '$lockbox_password';
CREATE DATABASE lockbox OWNER lockbox;
EOF
    ((standby)) || return 0
    make_standby "${1}standby" "$primary"
}

# The hosts' namespaces, before the primary starts (it listens on their links' addresses). The
# second octet comes from our PID, so two sessions on one machine use different networks.
host_listen=''
host_network=''
host_addresses=()
if ((hosts)); then
    octet=$((100 + $$ % 100))
    host_network="10.$octet.0.0/16"
    if ! ip netns add "lockbox-$$-probe" 2>"$tmp/server/netns.err"; then
        echo "postgres-session: no network namespaces here ($(head -n 1 "$tmp/server/netns.err")): the $hosts hosts run as plain processes" >&2
    else
        ip netns delete "lockbox-$$-probe"
        for i in $(seq "$hosts"); do
            namespace="lockbox-$$-$i"
            ip netns add "$namespace"
            namespaces+=("$namespace")
            ip link add "lb$$h$i" type veth peer name "lb$$n$i"
            ip link set "lb$$n$i" netns "$namespace"
            ip addr add "10.$octet.$i.1/30" dev "lb$$h$i"
            ip link set "lb$$h$i" up
            ip -n "$namespace" link set lo up
            ip -n "$namespace" addr add "10.$octet.$i.2/30" dev "lb$$n$i"
            ip -n "$namespace" link set "lb$$n$i" up
            host_listen+=",10.$octet.$i.1"
            host_addresses+=("10.$octet.$i.1")
        done
    fi
fi

start_pair ''
primary_port=$(port_of primary)
url_file "$tmp/client/primary.url" "127.0.0.1:$primary_port"
export LOCKBOX_TEST_POSTGRES_URL_FILE="$tmp/client/primary.url"
export LOCKBOX_TEST_POSTGRES_PRIMARY_PORT="$primary_port"
if ((${#namespaces[@]})); then
    host_urls=()
    for i in "${!host_addresses[@]}"; do
        url_file "$tmp/client/host-$((i + 1)).url" "${host_addresses[$i]}:$primary_port"
        host_urls+=("$tmp/client/host-$((i + 1)).url")
    done
    export LOCKBOX_TEST_POSTGRES_NETNS="${namespaces[*]}"
    export LOCKBOX_TEST_POSTGRES_HOST_URL_FILES="${host_urls[*]}"
fi
if ((standby)); then
    standby_port=$(port_of standby)
    url_file "$tmp/client/standby.url" "127.0.0.1:$standby_port"
    url_file "$tmp/client/failover.url" "127.0.0.1:$primary_port,127.0.0.1:$standby_port" "?target_session_attrs=read-write"
    export LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE="$tmp/client/standby.url"
    export LOCKBOX_TEST_POSTGRES_FAILOVER_URL_FILE="$tmp/client/failover.url"
    export LOCKBOX_TEST_POSTGRES_STANDBY_PORT="$standby_port"
    for pair in failover hazard; do
        start_pair "$pair-"
        url_file "$tmp/client/$pair-pair.url" "127.0.0.1:$(port_of "$pair-primary"),127.0.0.1:$(port_of "$pair-standby")" \
            "?target_session_attrs=read-write&connect_timeout=2"
    done
    export LOCKBOX_TEST_POSTGRES_FAILOVER_PAIR_URL_FILE="$tmp/client/failover-pair.url"
    export LOCKBOX_TEST_POSTGRES_HAZARD_PAIR_URL_FILE="$tmp/client/hazard-pair.url"
fi

self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
printf '#!/usr/bin/env bash\nexec %q --ctl %q "$@"\n' "$self" "$tmp" >"$tmp/client/ctl"
chmod 0700 "$tmp/client/ctl"
export LOCKBOX_TEST_POSTGRES_CTL="$tmp/client/ctl"

# In the background and waited for, so a signal reaches the trap at once; `trap -` gives COMMAND
# back SIGINT and SIGQUIT, `<&0` our stdin.
( trap - INT QUIT; exec "$@" ) <&0 &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid=''
exit "$status"
