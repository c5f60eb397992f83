#!/usr/bin/env bash
# The PostgreSQL store's benchmark (docs/PERFORMANCE.md, "PostgreSQL store"): get and
# set through PostgresStore (sealed rows, keyed addresses; a set is one CALL of lockbox.put_item)
# beside the same operations on a plain table (service, account, secret in clear), a bare SELECT
# by key and an autocommit upsert, each once as a prepared statement (the peer) and once sent by
# postgres-nio's query() (unnamed: parsed and planned on every call), in the same run, over the
# same database and pool size (16 connections), with 1, 16 and 64 concurrent clients. Paired: each
# cell is R rounds of the three one after another for S seconds each (order rotating), the ratio
# (plain ops/s ÷ Lockbox ops/s) taken per round, its median printed with its range; throughput
# and p50/p99 latency over all rounds. Runs LockboxPostgresLoad bench inside
# scripts/dev/postgres-session.sh (a fresh cluster; a primary alone unless --standby). Figures, not
# thresholds: it asserts only that every call succeeded.
#
# Usage: scripts/bench/bench-postgres.sh [--quick] [--seconds S] [--rounds R] [--clients LIST] [--items N] [--standby] [--binary PATH]
#
#   --quick          0.3 s slices, 1 round, clients 1,4, 50 items, the debug build: checks the
#                    benchmark runs (what scripts/test.sh does, a few seconds); its figures mean nothing
#   --seconds S      seconds per slice (default 1)
#   --rounds R       rounds per cell (default 5)
#   --clients LIST   concurrent clients, comma-separated (default 1,16,64)
#   --items N        items in each table (default 1000)
#   --standby        with the synchronous standby (every commit waits for it)
#   --binary PATH    a built LockboxPostgresLoad (default: build it, release)
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=1 rounds=5 clients=1,16,64 items=1000 standby=--no-standby binary="" configuration=release
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) seconds=0.3 rounds=1 clients=1,4 items=50 configuration=debug ;;
        --seconds) seconds=$2; shift ;;
        --rounds) rounds=$2; shift ;;
        --clients) clients=$2; shift ;;
        --items) items=$2; shift ;;
        --standby) standby="" ;;
        --binary) binary=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-postgres: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
if [[ -z "$binary" ]]; then
    source scripts/traits.sh
    swift build -c "$configuration" "${lockbox_traits[@]}" --product LockboxPostgresLoad >/dev/null
    binary="$(swift build -c "$configuration" "${lockbox_traits[@]}" --show-bin-path)/LockboxPostgresLoad"
fi
[[ -x $binary ]] || { echo "bench-postgres: no LockboxPostgresLoad at $binary" >&2; exit 2; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(basename "$(dirname "$binary")") build, $rounds rounds of ${seconds} s slices per cell, $items items, pool of 16 connections, $([[ -n $standby ]] && echo 'primary alone' || echo 'synchronous standby')"
echo "# load before: $(uptime | sed 's/.*load average/load average/')"
# shellcheck disable=SC2086 # $standby is one option or none
scripts/dev/postgres-session.sh $standby -- sh -c '"$1" bench --url-file "$LOCKBOX_TEST_POSTGRES_URL_FILE" --seconds "$2" --clients "$3" --items "$4" --rounds "$5"' \
    bench "$binary" "$seconds" "$clients" "$items" "$rounds"
echo "# load after: $(uptime | sed 's/.*load average/load average/')"
