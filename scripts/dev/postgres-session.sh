#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL primary and its synchronous standby.
#
# Usage: scripts/dev/postgres-session.sh [--no-standby] [--hosts N] -- COMMAND [ARGS...]
#
# initdb's a cluster in a fresh folder under /tmp (as the unprivileged `postgres` user when run
# as root: PostgreSQL refuses to run as root), listening on a free loopback port and a Unix
# socket in that folder, with scram-sha-256 passwords on TCP. Unless --no-standby, a second
# cluster is cloned with pg_basebackup and streams from the first as a SYNCHRONOUS standby
# (synchronous_commit = on, synchronous_standby_names = '*'): a commit is acknowledged only once
# the standby has it, so a test may SIGKILL the primary, promote the standby and find every
# acknowledged write there. COMMAND sees:
#   LOCKBOX_TEST_POSTGRES_URL_FILE          a file holding the primary's URL (role `lockbox`,
#                                           database `lockbox`, password inside; mode 0600) —
#                                           passwords are never put in argv or the environment
#   LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE  the same for the standby (unset with --no-standby)
#   LOCKBOX_TEST_POSTGRES_FAILOVER_URL_FILE both hosts, target_session_attrs=read-write
#   LOCKBOX_TEST_POSTGRES_PRIMARY_PORT, LOCKBOX_TEST_POSTGRES_STANDBY_PORT
#   LOCKBOX_TEST_POSTGRES_FAILOVER_PAIR_URL_FILE  a SECOND primary and synchronous standby (nodes
#                                           failover-primary, failover-standby), both hosts,
#                                           target_session_attrs=read-write, connect_timeout=2:
#                                           the failover test's own, so killing its primary
#                                           breaks no other test (unset with --no-standby)
#   LOCKBOX_TEST_POSTGRES_HAZARD_PAIR_URL_FILE  a THIRD such pair (nodes hazard-primary,
#                                           hazard-standby, the same URL options): the durability
#                                           tests' own, failed over again and again (unset with
#                                           --no-standby)
#   LOCKBOX_TEST_POSTGRES_CTL               a command for fault tests (NODE: primary, standby,
#                                           failover-primary, failover-standby):
#       CTL kill NODE                SIGKILL the server (postmaster and children)
#       CTL stop NODE, CTL cont NODE SIGSTOP / SIGCONT the server and its children: a server
#                                    that keeps its connections open and answers nothing
#       CTL promote [NODE]           promote a standby (default: standby) to primary and wait
#                                    until it accepts writes
#       CTL start NODE               start a stopped server again
#       CTL psql NODE SQL            run SQL as the superuser in the vault's database; prints
#                                    unaligned rows
#       CTL dump NODE                pg_dump of the vault's database (plain SQL), as a backup has it
#       CTL rebuild NODE FROM        NODE (killed after a failover) cloned anew from FROM, now its
#                                    primary, and made FROM's synchronous standby: the pair is whole
#                                    again for the next failover
# With --hosts N (root, where the kernel allows network namespaces), N network namespaces, one
# per "host" of the cross-host tests, each joined to this machine by its own veth pair with a
# private /30 and nothing else (its own loopback; no route anywhere but the primary's address on
# that link). The primary also listens on each link's address. COMMAND then sees:
#   LOCKBOX_TEST_POSTGRES_NETNS           the namespaces' names, space-separated (for `ip netns exec`)
#   LOCKBOX_TEST_POSTGRES_HOST_URL_FILES  for each, a URL file of the primary at its link's address
# Where namespaces cannot be made, the script says so on standard error and leaves both unset.
# Both servers are stopped and the folder removed on every exit path; the script exits with
# COMMAND's status. Requires Debian's postgresql (apt-get install postgresql) and python3.
set -euo pipefail

die() {
    echo "postgres-session: $*" >&2
    exit 1
}

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

# Debian keeps the server binaries out of PATH, one folder per major version; take the newest.
pg_bin=''
for dir in /usr/lib/postgresql/*/bin; do
    [[ -x $dir/initdb ]] && pg_bin=$dir
done
[[ -n $pg_bin ]] || pg_bin=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
[[ -x $pg_bin/initdb ]] || die "initdb not found (apt-get install postgresql)"

# The server runs as an unprivileged user: `postgres` (created by Debian's package) when we are
# root, ourselves otherwise.
if [[ $(id -u) -eq 0 ]]; then
    server_user=postgres
    id -u "$server_user" >/dev/null 2>&1 || die "no user '$server_user' to run PostgreSQL as (apt-get install postgresql creates it)"
    as_server() { setpriv --reuid="$server_user" --regid="$server_user" --init-groups --reset-env -- env PATH="$pg_bin:/usr/bin:/bin" "$@"; }
else
    server_user=$(id -un)
    as_server() { env PATH="$pg_bin:$PATH" "$@"; }
fi

tmp=''
command_pid=''
namespaces=()
# shellcheck disable=SC2317 # only reached through the EXIT trap
cleanup() {
    local rc=$?
    set +e
    if [[ -n $command_pid ]]; then kill -TERM "$command_pid" 2>/dev/null; wait "$command_pid" 2>/dev/null; fi
    for namespace in "${namespaces[@]}"; do ip netns delete "$namespace" 2>/dev/null; done
    if [[ -n $tmp && -d $tmp ]]; then
        for node in standby primary failover-standby failover-primary hazard-standby hazard-primary; do
            [[ -f $tmp/$node/postmaster.pid ]] || continue
            # A server a test left SIGSTOPped would not stop.
            pkill -CONT -P "$(head -n 1 "$tmp/$node/postmaster.pid")" 2>/dev/null
            kill -CONT "$(head -n 1 "$tmp/$node/postmaster.pid")" 2>/dev/null
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
mkdir -p "$tmp/server" "$tmp/client"
chmod 0700 "$tmp/client" "$tmp/server"
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

start_node() { # node
    as_server "$pg_bin/pg_ctl" -D "$tmp/$1" -l "$tmp/server/$1.log" -w -t 30 start >/dev/null ||
        { cat "$tmp/server/$1.log" >&2; die "$1 did not start"; }
}
psql_node() { # node sql
    as_server "$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$tmp/server" -p "$(cat "$tmp/server/$1.port")" -U postgres -d postgres -c "$2"
}
url_file() { # file hosts [query]
    (umask 077 && printf 'postgresql://lockbox:%s@%s/lockbox%s\n' "$lockbox_password" "$2" "${3:-}" >"$1")
}

# A primary (node PREFIXprimary) with the role and database, and unless --no-standby its
# synchronous standby (PREFIXstandby). Ports go to $tmp/server/NODE.port.
start_pair() { # prefix
    local primary="${1}primary" standby_node="${1}standby" port standby_port
    port=$(free_port)
    echo "$port" >"$tmp/server/$primary.port"
    mkdir -m 0700 "$tmp/$primary"
    [[ $server_user == "$(id -un)" ]] || chown "$server_user:" "$tmp/$primary"
    as_server "$pg_bin/initdb" -D "$tmp/$primary" -U postgres --pwfile="$tmp/server/superuser-password" \
        --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$tmp/server/$primary-initdb.log" 2>&1 ||
        { cat "$tmp/server/$primary-initdb.log" >&2; die "initdb failed"; }
    # Loopback only; the socket lives in our folder, not /var/run/postgresql. Durability settings are
    # PostgreSQL's defaults, stated so a reader of the tests sees them.
    local listen='127.0.0.1'
    [[ -n $1 ]] || listen+=$host_listen
    cat >>"$tmp/$primary/postgresql.conf" <<EOF
listen_addresses = '$listen'
port = $port
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
    # The application's role and database. The password goes in through psql's stdin, never argv
    # (it is URL-safe base64: nothing to quote).
    as_server "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$tmp/server" -p "$port" -U postgres -d postgres \
        >/dev/null <<EOF
CREATE ROLE lockbox LOGIN PASSWORD '$lockbox_password';
CREATE DATABASE lockbox OWNER lockbox;
EOF
    ((standby)) || return 0
    standby_port=$(free_port)
    echo "$standby_port" >"$tmp/server/$standby_node.port"
    mkdir -m 0700 "$tmp/$standby_node"
    [[ $server_user == "$(id -un)" ]] || chown "$server_user:" "$tmp/$standby_node"
    as_server env PGPASSFILE="$tmp/server/pgpass" "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres \
        -D "$tmp/$standby_node" -R -X stream -c fast --no-sync >"$tmp/server/$standby_node-basebackup.log" 2>&1 ||
        { cat "$tmp/server/$standby_node-basebackup.log" >&2; die "pg_basebackup failed"; }
    {
        echo "port = $standby_port"
        echo "primary_conninfo = 'host=127.0.0.1 port=$port user=postgres passfile=''$tmp/server/pgpass'' application_name=$standby_node'"
    } >>"$tmp/$standby_node/postgresql.auto.conf"
    start_node "$standby_node"
    # Commits wait for the standby only from now on (set before it existed, CREATE ROLE would
    # wait forever).
    psql_node "$primary" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
    psql_node "$primary" "SELECT pg_reload_conf()" >/dev/null
    # Synchronous from here on: wait until the primary reports the standby as `sync`.
    for _ in $(seq 100); do
        [[ $(psql_node "$primary" "SELECT sync_state FROM pg_stat_replication") == sync ]] && break
        sleep 0.1
    done
    [[ $(psql_node "$primary" "SELECT sync_state FROM pg_stat_replication") == sync ]] || die "$standby_node did not become synchronous"
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
primary_port=$(cat "$tmp/server/primary.port")
url_file "$tmp/client/primary.url" "127.0.0.1:$primary_port"
if ((${#namespaces[@]})); then
    host_urls=()
    for i in $(seq "${#namespaces[@]}"); do
        url_file "$tmp/client/host-$i.url" "${host_addresses[$((i - 1))]}:$primary_port"
        host_urls+=("$tmp/client/host-$i.url")
    done
    export LOCKBOX_TEST_POSTGRES_NETNS="${namespaces[*]}"
    export LOCKBOX_TEST_POSTGRES_HOST_URL_FILES="${host_urls[*]}"
fi
export LOCKBOX_TEST_POSTGRES_URL_FILE="$tmp/client/primary.url"
export LOCKBOX_TEST_POSTGRES_PRIMARY_PORT="$primary_port"
if ((standby)); then
    standby_port=$(cat "$tmp/server/standby.port")
    url_file "$tmp/client/standby.url" "127.0.0.1:$standby_port"
    url_file "$tmp/client/failover.url" "127.0.0.1:$primary_port,127.0.0.1:$standby_port" "?target_session_attrs=read-write"
    export LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE="$tmp/client/standby.url"
    export LOCKBOX_TEST_POSTGRES_FAILOVER_URL_FILE="$tmp/client/failover.url"
    export LOCKBOX_TEST_POSTGRES_STANDBY_PORT="$standby_port"
    # The failover test's own pair: it kills this primary, which no other test uses.
    start_pair failover-
    url_file "$tmp/client/failover-pair.url" \
        "127.0.0.1:$(cat "$tmp/server/failover-primary.port"),127.0.0.1:$(cat "$tmp/server/failover-standby.port")" \
        "?target_session_attrs=read-write&connect_timeout=2"
    export LOCKBOX_TEST_POSTGRES_FAILOVER_PAIR_URL_FILE="$tmp/client/failover-pair.url"
    start_pair hazard-
    url_file "$tmp/client/hazard-pair.url" \
        "127.0.0.1:$(cat "$tmp/server/hazard-primary.port"),127.0.0.1:$(cat "$tmp/server/hazard-standby.port")" \
        "?target_session_attrs=read-write&connect_timeout=2"
    export LOCKBOX_TEST_POSTGRES_HAZARD_PAIR_URL_FILE="$tmp/client/hazard-pair.url"
fi

# The fault-test command: a small script with the paths baked in, so tests need no knowledge of
# users, folders or pg_ctl.
cat >"$tmp/client/ctl" <<EOF
#!/usr/bin/env bash
set -euo pipefail
tmp='$tmp'; pg_bin='$pg_bin'; server_user='$server_user'
$(declare -f as_server)
node() { [[ -f "\$tmp/server/\$1.port" ]] || { echo "postgres-session ctl: no node '\$1'" >&2; exit 2; }; echo "\$1"; }
port_of() { cat "\$tmp/server/\$(node "\$1").port"; }
signal_all() { # signal node
    local pid
    pid=\$(head -n 1 "\$tmp/\$(node "\$2")/postmaster.pid")
    pkill -"\$1" -P "\$pid" 2>/dev/null || true
    kill -"\$1" "\$pid"
}
case "\${1:-}" in
    kill)
        pid=\$(head -n 1 "\$tmp/\$(node "\$2")/postmaster.pid")
        # The postmaster and every backend: a crash, not a shutdown.
        signal_all KILL "\$2"
        while kill -0 "\$pid" 2>/dev/null; do sleep 0.05; done
        rm -f "\$tmp/\$2/postmaster.pid" ;;
    stop) signal_all STOP "\$2" ;;
    cont) signal_all CONT "\$2" ;;
    promote)
        target=\$(node "\${2:-standby}")
        as_server "\$pg_bin/pg_ctl" -D "\$tmp/\$target" -w -t 30 promote >/dev/null
        for _ in \$(seq 100); do
            [[ \$(as_server "\$pg_bin/psql" -X -A -t -h "\$tmp/server" -p "\$(port_of "\$target")" -U postgres -d postgres -c 'SELECT pg_is_in_recovery()') == f ]] && exit 0
            sleep 0.1
        done
        echo "postgres-session ctl: \$target did not leave recovery" >&2; exit 1 ;;
    start)
        as_server "\$pg_bin/pg_ctl" -D "\$tmp/\$(node "\$2")" -l "\$tmp/server/\$2.log" -w -t 30 start >/dev/null ;;
    psql)
        as_server "\$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "\$tmp/server" -p "\$(port_of "\$2")" -U postgres -d lockbox -c "\$3" ;;
    dump)
        as_server "\$pg_bin/pg_dump" -h "\$tmp/server" -p "\$(port_of "\$2")" -U postgres -d lockbox ;;
    rebuild)
        # NODE (killed or stopped) cloned anew from FROM (a primary) as FROM's synchronous standby.
        target=\$(node "\$2"); from=\$(node "\$3")
        if [[ -f "\$tmp/\$target/postmaster.pid" ]]; then
            as_server "\$pg_bin/pg_ctl" -D "\$tmp/\$target" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
        fi
        rm -rf -- "\$tmp/\$target"
        mkdir -m 0700 "\$tmp/\$target"
        [[ \$server_user == "\$(id -un)" ]] || chown "\$server_user:" "\$tmp/\$target"
        as_server env PGPASSFILE="\$tmp/server/pgpass" "\$pg_bin/pg_basebackup" -h 127.0.0.1 -p "\$(port_of "\$from")" -U postgres \\
            -D "\$tmp/\$target" -R -X stream -c fast --no-sync >"\$tmp/server/\$target-basebackup.log" 2>&1 ||
            { cat "\$tmp/server/\$target-basebackup.log" >&2; exit 1; }
        as_server sh -c 'printf "%s\\n" "\$1" "\$2" >>"\$3"' rebuild "port = \$(port_of "\$target")" \\
            "primary_conninfo = 'host=127.0.0.1 port=\$(port_of "\$from") user=postgres passfile=''\$tmp/server/pgpass'' application_name=\$target'" \\
            "\$tmp/\$target/postgresql.auto.conf"
        as_server "\$pg_bin/pg_ctl" -D "\$tmp/\$target" -l "\$tmp/server/\$target.log" -w -t 30 start >/dev/null
        from_sql() { as_server "\$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "\$tmp/server" -p "\$(port_of "\$from")" -U postgres -d postgres -c "\$1"; }
        from_sql "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
        from_sql "SELECT pg_reload_conf()" >/dev/null
        for _ in \$(seq 300); do
            [[ \$(from_sql "SELECT sync_state FROM pg_stat_replication WHERE application_name = '\$target'") == sync ]] && exit 0
            sleep 0.1
        done
        echo "postgres-session ctl: \$target did not become \$from's synchronous standby" >&2; exit 1 ;;
    *) echo "usage: \$0 kill|stop|cont|start|dump NODE | promote [NODE] | psql NODE SQL | rebuild NODE FROM" >&2; exit 2 ;;
esac
EOF
chmod 0700 "$tmp/client/ctl"
export LOCKBOX_TEST_POSTGRES_CTL="$tmp/client/ctl"

( trap - INT QUIT; exec "$@" ) <&0 &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid=''
exit "$status"
