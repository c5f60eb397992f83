#!/usr/bin/env bash
# Crash injection: `lockbox set` writers killed with SIGKILL at random moments.
#
# Usage: scripts/crash-injection.sh [ROUNDS]      (default 500)
#   LOCKBOX=PATH  use this lockbox binary (default: build one with `swift build --product lockbox`)
#   SEED=N        seed bash's RANDOM, to replay a run
#
# Every round starts 1 to 4 writers at once on one vault (key-file slot), each storing a new item
# or overwriting an item an earlier round stored, waits a random 0-60 ms and SIGKILLs a random
# subset of those still running. A writer that exited 0 before the kill has been told "stored":
# that is an acknowledged write. After every round:
#   - `lockbox list --json` must open the vault (exit 0) and list every acknowledged item;
#   - scripts/vault-decrypt.py, the independent decryptor, must open it too, and every
#     acknowledged item must hold exactly its last acknowledged value; an item whose writer was
#     killed may hold the old value or the new one, never anything else.
# At the end, one more write must remove every temporary file killed writers left behind.
# Prints the counts; exits 1 on any violation, 2 if it cannot run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rounds=${1:-500}
[[ $rounds =~ ^[0-9]+$ ]] && ((rounds > 0)) || { echo "crash-injection: ROUNDS must be a positive number" >&2; exit 2; }
[[ -n ${SEED:-} ]] && RANDOM=$SEED

lockbox=${LOCKBOX:-}
if [[ -z $lockbox ]]; then
    (cd "$here/.." && swift build --product lockbox >/dev/null)
    lockbox="$(cd "$here/.." && swift build --show-bin-path)/lockbox"
fi
[[ -x $lockbox ]] || { echo "crash-injection: no lockbox binary at $lockbox" >&2; exit 2; }
python3 -c 'import nacl.bindings' 2>/dev/null || { echo "crash-injection: needs PyNaCl (pip install pynacl) for scripts/vault-decrypt.py" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/lockbox-crash.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077
vault=$work/vault.lockbox key=$work/vault.key
"$lockbox" init --vault "$vault" --generate-key-file "$key" 2>/dev/null

declare -A acknowledged=()   # account -> last acknowledged value
declare -A pending=()        # account -> value a killed writer may or may not have stored
declare -A temporaries=()    # temporary files killed writers left (killed between create and rename)
started=0 acked=0 killed=0 landed=0 other=0 checks=0 violations=0

fail() { echo "crash-injection: round $round: $*" >&2; violations=$((violations + 1)); }

# Values and their storage order come from the decryptor's JSON; compare in Python.
check_round() {
    local listed
    if ! listed=$("$lockbox" list --vault "$vault" --key-file "$key" --json 2>"$work/list.err"); then
        fail "lockbox list could not open the vault: $(cat "$work/list.err")"; return
    fi
    if ! python3 "$here/vault-decrypt.py" "$vault" --key-file "$key" >"$work/decrypted.json" 2>"$work/decrypt.err"; then
        fail "vault-decrypt.py could not open the vault: $(cat "$work/decrypt.err")"; return
    fi
    : >"$work/expect.tsv"
    local account
    for account in "${!acknowledged[@]}"; do
        printf 'ack\t%s\t%s\n' "$account" "${acknowledged[$account]}" >>"$work/expect.tsv"
    done
    for account in "${!pending[@]}"; do
        printf 'maybe\t%s\t%s\n' "$account" "${pending[$account]}" >>"$work/expect.tsv"
    done
    if ! printf '%s' "$listed" | python3 -c '
import base64, json, sys
decrypted = json.load(open(sys.argv[1]))
listed = {i["account"] for i in json.load(sys.stdin) if i["service"] == "crash"}
stored = {i["account"]: base64.b64decode(i["secret_base64"]).decode() for i in decrypted["items"] if i["service"] == "crash"}
ack, maybe = {}, {}
for line in open(sys.argv[2]):
    kind, account, value = line.rstrip("\n").split("\t")
    (ack if kind == "ack" else maybe)[account] = value
errors = []
for account, value in ack.items():
    if account not in listed: errors.append(f"{account}: acknowledged but not in lockbox list")
    got = stored.get(account)
    if got != value and got != maybe.get(account):
        errors.append(f"{account}: acknowledged value lost (found {None if got is None else got[:40]!r})")
for account, got in stored.items():
    if account not in ack and got != maybe.get(account):
        errors.append(f"{account}: holds a value no writer wrote ({got[:40]!r})")
print(sum(1 for a in maybe if stored.get(a) == maybe[a]))
for e in errors: print("ERROR " + e)
' "$work/decrypted.json" "$work/expect.tsv" >"$work/verdict"; then
        fail "the comparison failed to run"; return
    fi
    checks=$((checks + 1))
    while IFS= read -r line; do
        if [[ $line == ERROR* ]]; then fail "${line#ERROR }"; fi
    done <"$work/verdict"
    return 0
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
    writers=$((1 + RANDOM % 4))
    pids=() accounts=() values=()
    declare -A used=()
    for ((w = 0; w < writers; w++)); do
        # Half the time overwrite an item an earlier round stored (never two writers on one item).
        account="r$round-w$w"
        if ((${#acknowledged[@]} > 0 && RANDOM % 2 == 0)); then
            keys=("${!acknowledged[@]}")
            candidate=${keys[RANDOM % ${#keys[@]}]}
            [[ -z ${used[$candidate]:-} && -z ${pending[$candidate]:-} ]] && account=$candidate
        fi
        used[$account]=1
        value="v$round.$w-$(printf "%0$((1 + RANDOM % 2000))d" 0)"
        printf '%s' "$value" >"$work/in.$w"
        "$lockbox" set --vault "$vault" --key-file "$key" crash "$account" <"$work/in.$w" 2>/dev/null &
        pids+=($!) accounts+=("$account") values+=("$value")
        started=$((started + 1))
    done
    sleep "0.0$(printf '%02d' $((RANDOM % 60)))"
    for pid in "${pids[@]}"; do
        ((RANDOM % 4 != 0)) && kill -KILL "$pid" 2>/dev/null || true
    done
    for ((w = 0; w < writers; w++)); do
        status=0
        wait "${pids[w]}" 2>/dev/null || status=$?
        account=${accounts[w]}
        if ((status == 0)); then
            acked=$((acked + 1))
            acknowledged[$account]=${values[w]}
            unset "pending[$account]"
        elif ((status == 128 + 9)); then
            killed=$((killed + 1))
            pending[$account]=${values[w]}
        else
            other=$((other + 1))
            fail "writer for $account exited $status without being killed"
        fi
    done
    unset used
    for tmp in "$work"/.vault.lockbox.tmp-*; do
        [[ -e $tmp ]] && temporaries[${tmp##*/}]=1
    done
    check_round
    # A pending value either landed (it is there now) or never will: settle it for the next rounds.
    count=$(head -n1 "$work/verdict" 2>/dev/null || echo 0)
    landed=$((landed + count))
    if ((${#pending[@]})); then
        python3 - "$work/decrypted.json" >"$work/now.tsv" <<'PY'
import base64, json, sys
for i in json.load(open(sys.argv[1]))["items"]:
    if i["service"] == "crash":
        print(i["account"] + "\t" + base64.b64decode(i["secret_base64"]).decode())
PY
        declare -A now=()
        while IFS=$'\t' read -r a v; do now[$a]=$v; done <"$work/now.tsv"
        for account in "${!pending[@]}"; do
            if [[ ${now[$account]+set} ]]; then acknowledged[$account]=${now[$account]}; else unset "acknowledged[$account]"; fi
        done
        unset now
        pending=()
    fi
    ((round % 50 != 0)) || echo "crash-injection: $round/$rounds rounds, $acked acknowledged, $killed killed ($landed landed anyway), $violations violations" >&2
done

# One more write clears the temporary files killed writers left.
printf 'after' | "$lockbox" set --vault "$vault" --key-file "$key" crash final 2>/dev/null || fail "the final write failed"
leftovers=$(find "$work" -maxdepth 1 -name '.vault.lockbox.tmp-*' | wc -l)
((leftovers == 0)) || fail "$leftovers temporary files left after a later write"

elapsed=$((SECONDS - start))
echo "crash-injection: $rounds rounds in ${elapsed}s: $started writers started, $acked acknowledged, $killed killed by SIGKILL ($landed of them had stored their value anyway, ${#temporaries[@]} were killed mid-write and left a temporary file), $other other failures; vault opened and checked after every round ($checks checks, lockbox + vault-decrypt.py); $violations violations"
((violations == 0)) || exit 1
