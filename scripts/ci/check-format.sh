#!/usr/bin/env bash
# Checks docs/FORMAT.md against the real thing: builds a vault of each format (2, then 1) with the
# lockbox CLI (key-file and passphrase slots, several items with binary secrets, attributes and non-ASCII names, a data
# key rotation), decrypts it with the independent scripts/format/vault-decrypt.py (PyNaCl only), and
# compares every item with `lockbox list --json` and `lockbox get`. Also checks that both tools
# refuse a wrong credential and a damaged file with the same exit codes.
#
# Usage: scripts/ci/check-format.sh [PATH-TO-LOCKBOX]
#   (default: .build/debug/lockbox in this repository)
# Exits 0 when everything matches, 1 on any mismatch, 2 if it cannot run; if a lockbox command
# that builds the test vault fails, exits with that command's status.
set -Eeuo pipefail
trap 'echo "check-format: line $LINENO: command failed (exit $?): $BASH_COMMAND" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lockbox="${1:-$here/../../.build/debug/lockbox}"
if [[ ! -x "$lockbox" ]]; then
    echo "check-format: no lockbox binary at $lockbox (build it with 'swift build --product lockbox', or pass its path)" >&2
    exit 2
fi
lockbox="$(cd "$(dirname "$lockbox")" && pwd)/$(basename "$lockbox")"
decrypt=(python3 "$here/../format/vault-decrypt.py")

"$here/../ensure-deps.sh" --pynacl || exit 2

work="$(mktemp -d "${TMPDIR:-/tmp}/lockbox-format.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 077
cd "$work"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*" >&2; }

printf 'correct horse battery staple\n' > "$work/passphrase"
printf 'not the passphrase\n' > "$work/wrong-passphrase"
lb() { "$lockbox" "$@" --vault "$vault" --key-file "$key1"; }

# Builds a vault of format $1 with the CLI, decrypts it with vault-decrypt.py with each
# credential before and after a data key rotation, and compares every item with lockbox's view.
# Sets vault, key1 and key2 (the functions below use them).
check_format() {
format="$1"
vault="$work/vault-$format.lockbox"
key1="$work/first-$format.key"
key2="$work/second-$format.key"
echo "== building a format-$format vault with $lockbox"
"$lockbox" init --format "$format" --vault "$vault" --generate-key-file "$key1" 2>/dev/null
"$lockbox" slot add-passphrase --vault "$vault" --key-file "$key1" --new-passphrase-fd 3 --kdf interactive \
    3<"$work/passphrase" 2>/dev/null

printf 'plain-token' | lb set com.example.api alice --kind token --label 'API token' \
    --attribute env=prod --attribute 'région=Zürich' --attribute empty= --attribute 'z-last=1'
head -c 1000 /dev/urandom > "$work/binary"
printf '\0\n\r\n\x80\xff' >> "$work/binary"
lb set --raw com.example.api binary --kind device-id < "$work/binary"
printf 'ends with a newline\n' > "$work/newline"
lb set --raw com.example.api newline < "$work/newline"
head -c 70000 /dev/urandom > "$work/large"  # several padding blocks
lb set --raw 'сервис.пример' 'アカウント' --kind password < "$work/large"
printf 'first' | lb set other.service bob
printf 'second' | lb set other.service bob --attribute rev=2  # overwrite: created stays, modified moves
printf 'doomed' | lb set other.service carol
lb delete other.service carol 2>/dev/null
"$lockbox" slot add-key-file --vault "$vault" --key-file "$key1" --generate "$key2" 2>/dev/null

# Compares the decryptor's JSON ($1) with lockbox's view of the vault, opened with key file $2.
compare() {
    local json="$1" key="$2" what="$3"
    "$lockbox" list --vault "$vault" --key-file "$key" --json > "$work/list.json"
    rm -rf "$work/secrets" && mkdir "$work/secrets"
    python3 - "$json" "$work/list.json" > "$work/addresses" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[2], encoding="utf-8")):
    sys.stdout.buffer.write((item["service"] + "\0" + item["account"] + "\0").encode("utf-8"))
EOF
    local n=0
    while IFS= read -r -d '' service && IFS= read -r -d '' account; do
        "$lockbox" get --vault "$vault" --key-file "$key" "$service" "$account" > "$work/secrets/$n"
        n=$((n + 1))
    done < "$work/addresses"
    if python3 - "$json" "$work/list.json" "$work/secrets" <<'EOF'
import base64, datetime, json, os, sys, unicodedata
decrypted = json.load(open(sys.argv[1], encoding="utf-8"))
listed = json.load(open(sys.argv[2], encoding="utf-8"))
secrets_dir = sys.argv[3]
problems = []
items = decrypted["items"]
order = lambda i: (unicodedata.normalize("NFC", i["service"]), unicodedata.normalize("NFC", i["account"]))
if [order(i) for i in items] != sorted(order(i) for i in items):
    problems.append("items are not stored sorted by (service, account)")
items = sorted(items, key=order)
if len(items) != len(listed):
    problems.append(f"decryptor found {len(items)} items, lockbox lists {len(listed)}")
def second(ms):  # lockbox list --json prints whole seconds, truncated
    t = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
for index, (mine, theirs) in enumerate(zip(items, listed)):
    where = f"item {index} ({mine['service']!r}, {mine['account']!r})"
    for field in ("service", "account", "kind", "label", "attributes"):
        if mine[field] != theirs[field]:
            problems.append(f"{where}: {field} {mine[field]!r} != lockbox's {theirs[field]!r}")
    for field in ("created", "modified"):
        if second(mine[field + "_ms"]) != theirs[field]:
            problems.append(f"{where}: {field} {mine[field + '_ms']} ms != lockbox's {theirs[field]}")
    if mine["created_ms"] > mine["modified_ms"]:
        problems.append(f"{where}: created after modified")
    with open(os.path.join(secrets_dir, str(index)), "rb") as f:
        expected = f.read()
    if base64.b64decode(mine["secret_base64"]) != expected:
        problems.append(f"{where}: secret differs from `lockbox get` ({len(expected)} bytes)")
addresses = {(i["service"], i["account"]) for i in items}
if ("other.service", "carol") in addresses:
    problems.append("the deleted item other.service/carol is still there")
for i in items:
    if (i["service"], i["account"]) == ("other.service", "bob"):
        if not (i["created_ms"] < i["modified_ms"] and i["attributes"] == {"rev": "2"}):
            problems.append("the overwritten item other.service/bob should keep its creation time "
                            "and have only the new attributes")
for p in problems:
    print("  " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
    then pass "$what: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$json") items match lockbox list/get"
    else fail "$what: the decrypted items differ from lockbox's"
    fi
}

# Decrypts with the given credential arguments into $work/out.json; checks the opened slot.
decrypt_with() {
    local what="$1" expect_slot="$2"; shift 2
    if "${decrypt[@]}" "$vault" "$@" > "$work/out.json" 2> "$work/err"; then
        local slot
        slot="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["opened_slot"])' "$work/out.json")"
        if [[ "$slot" == "$expect_slot" ]]; then pass "$what opens slot $slot"; else fail "$what opened slot $slot, expected $expect_slot"; fi
        return 0
    fi
    fail "$what: vault-decrypt.py failed: $(cat "$work/err")"
    return 1
}

check_all_credentials() {
    local stage="$1"
    decrypt_with "$stage: first key file" 0 --key-file "$key1" && compare "$work/out.json" "$key1" "$stage: first key file"
    decrypt_with "$stage: passphrase" 1 --passphrase-fd 3 3<"$work/passphrase" && compare "$work/out.json" "$key1" "$stage: passphrase"
    decrypt_with "$stage: second key file" 2 --key-file "$key2" && compare "$work/out.json" "$key2" "$stage: second key file"
}

# The key-file fingerprint (docs/FORMAT.md 18.1.1) of key file $2, whose slot is $3: what
# vault-decrypt.py computes from the key and reads from the slot, against `lockbox slot
# fingerprint` and `lockbox slot list --json`. Format 2 records it in the slot; format 1 does not.
check_fingerprint() {
    local stage="$1" key="$2" slot="$3"
    if ! "${decrypt[@]}" "$vault" --key-file "$key" > "$work/fp.json" 2> "$work/err" ||
        ! "$lockbox" slot fingerprint "$key" > "$work/fp.txt" 2>> "$work/err" ||
        ! "$lockbox" slot list --json --vault "$vault" --key-file "$key" > "$work/slots.json" 2>> "$work/err"; then
        fail "$stage: slot $slot's fingerprint: a command failed: $(cat "$work/err")"
        return
    fi
    if python3 - "$work/fp.json" "$work/fp.txt" "$work/slots.json" "$slot" "$format" > "$work/err" <<'EOF'
import json, sys
decrypted, printed = json.load(open(sys.argv[1])), open(sys.argv[2]).read().strip()
listed, slot, format_version = json.load(open(sys.argv[3]))[int(sys.argv[4])], int(sys.argv[4]), int(sys.argv[5])
computed, recorded = decrypted.get("opened_key_file_fingerprint"), decrypted["key_slots"][slot]["key_file_fingerprint"]
problems = []
if decrypted["opened_slot"] != slot:
    problems.append(f"vault-decrypt.py opened slot {decrypted['opened_slot']}")
if computed != printed or len(printed) != 32:
    problems.append(f"vault-decrypt.py computes {computed}, lockbox slot fingerprint prints {printed}")
expected = printed if format_version == 2 else None
if recorded != expected or listed["keyFileFingerprint"] != expected:
    problems.append(f"recorded: {recorded} (vault-decrypt.py), {listed['keyFileFingerprint']} (slot list), expected {expected}")
if listed["keyFileFingerprintMatches"] != (True if format_version == 2 else None):
    problems.append(f"slot list --json keyFileFingerprintMatches is {listed['keyFileFingerprintMatches']}")
print("; ".join(problems))
sys.exit(1 if problems else 0)
EOF
    then pass "$stage: slot $slot's key-file fingerprint agrees in vault-decrypt.py, slot fingerprint and slot list"
    else fail "$stage: slot $slot's key-file fingerprint: $(cat "$work/err")"
    fi
}

echo "== decrypting the format-$format vault with vault-decrypt.py"
check_all_credentials "format $format, before rotation"
check_fingerprint "format $format, before rotation" "$key1" 0
check_fingerprint "format $format, before rotation" "$key2" 2
before="$("${decrypt[@]}" "$vault" --header-only)"

# The CLI takes one key file per command: rotate with the first key file and the passphrase,
# dropping the second key file's slot, then give the second key file a new slot.
"$lockbox" rotate-key --vault "$vault" --key-file "$key1" --passphrase-fd 3 --drop-unmatched-slots \
    3<"$work/passphrase" 2>/dev/null
"$lockbox" slot add-key-file --vault "$vault" --key-file "$key1" "$key2" 2>/dev/null
lb set --raw com.example.api hex-key < "$key2"  # one more write after the rotation
check_all_credentials "format $format, after rotation"
check_fingerprint "format $format, after rotation" "$key1" 0
check_fingerprint "format $format, after rotation" "$key2" 2
after="$("${decrypt[@]}" "$vault" --header-only)"
if python3 - "$before" "$after" <<'EOF'
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ok = a["vault_id"] == b["vault_id"] and a["key_slots"] == b["key_slots"]
if "generation" in b:  # format 1 counts writes in its header; format 2 has no generation
    ok = ok and a["generation"] == b["generation"] + 3
sys.exit(0 if ok else 1)
EOF
then pass "format $format: vault ID and slot parameters survive a rotation (format 1: generation counts writes, +3)"
else fail "format $format: header after rotation: expected same vault ID and slots (format 1: generation +3); before $before after $after"
fi
}

check_format 2
check_format 1  # last: the refusals below damage copies of this format-1 vault

echo "== refusals"
# expect_both CODE WHAT FILE ARGS...: both tools must fail on FILE with exit code CODE.
# With passfile=PATH set, descriptor 3 reads PATH (for --passphrase-fd 3).
expect_both() {
    local code="$1" what="$2" file="$3"; shift 3
    local mine=0 theirs=0
    # Each tool gets its own descriptor 3 on $passfile: a shared one would be read only once.
    "${decrypt[@]}" "$file" "$@" > /dev/null 2> "$work/err" 3<"${passfile:-/dev/null}" || mine=$?
    "$lockbox" list --vault "$file" "$@" > /dev/null 2> "$work/lockbox-err" 3<"${passfile:-/dev/null}" || theirs=$?
    if [[ "$mine" == "$code" && "$theirs" == "$code" ]]; then
        pass "$what: both exit $code"
    else
        fail "$what: vault-decrypt.py exit $mine ($(cat "$work/err")), lockbox exit $theirs ($(cat "$work/lockbox-err")), expected $code"
    fi
}
head -c 32 /dev/urandom > "$work/stranger.key"
for format_vault in "$work/vault-2.lockbox" "$vault"; do
    passfile="$work/wrong-passphrase" expect_both 5 "$(basename "$format_vault"): wrong passphrase" "$format_vault" --passphrase-fd 3
    expect_both 5 "$(basename "$format_vault"): unknown key file" "$format_vault" --key-file "$work/stranger.key"
done
# A format-2 key-file slot whose recorded fingerprint (docs/FORMAT.md 18.1.1) was changed opens in
# both tools, each saying so; one of 15 bytes is a damaged slot to both (exit 6).
fingerprint_copy() {  # fingerprint_copy NAME change|truncate: a copy of the format-2 vault, slot 0 edited
    python3 - "$work/vault-2.lockbox" "$work/$1" "$2" <<'EOF'
import sqlite3, sys
source, target, how = sys.argv[1:]
with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
    src.backup(dst)
db = sqlite3.connect(target)
slot_id, row = db.execute("SELECT slot_id, slot FROM key_slots ORDER BY slot_id LIMIT 1").fetchone()
row = bytearray(row)
assert row[0] == 2 and len(row) == 3 + 104, "slot 0 is a key-file slot recording a fingerprint"
if how == "change":
    row[-1] ^= 0x80
else:
    row = row[:-1]
    row[1:3] = (len(row) - 3).to_bytes(2, "little")
db.execute("UPDATE key_slots SET slot = ? WHERE slot_id = ?", (bytes(row), slot_id))
db.commit()
db.close()
EOF
}
fingerprint_copy fingerprint-changed.lockbox change
mine=0 theirs=0
"${decrypt[@]}" "$work/fingerprint-changed.lockbox" --key-file "$work/first-2.key" > /dev/null 2> "$work/err" || mine=$?
"$lockbox" slot list --vault "$work/fingerprint-changed.lockbox" --key-file "$work/first-2.key" > /dev/null \
    2> "$work/lockbox-err" || theirs=$?
if [[ "$mine" == 0 && "$theirs" == 0 ]] && grep -q "records a fingerprint that is not its key file's" "$work/err" &&
    grep -q "records a fingerprint that is not its key file's" "$work/lockbox-err"; then
    pass "a changed key-file fingerprint: both open the vault and warn"
else
    fail "a changed key-file fingerprint: vault-decrypt.py exit $mine ($(cat "$work/err")), lockbox exit $theirs ($(cat "$work/lockbox-err")), expected 0 and a warning from each"
fi
fingerprint_copy fingerprint-short.lockbox truncate
expect_both 6 "a key-file fingerprint of 15 bytes" "$work/fingerprint-short.lockbox" --key-file "$work/first-2.key"
size="$(stat -c %s "$vault")"
damage() {  # damage NAME OFFSET: flips one bit at OFFSET of a copy of the vault
    cp "$vault" "$work/$1"
    python3 - "$work/$1" "$2" <<'EOF'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
data[offset] ^= 0x01
open(path, "wb").write(bytes(data))
EOF
}
damage magic.lockbox 0
expect_both 6 "damaged magic" "$work/magic.lockbox" --key-file "$key1"
damage header.lockbox 40
expect_both 6 "damaged header (checksum)" "$work/header.lockbox" --key-file "$key1"
damage body.lockbox $((size - 100))
expect_both 6 "damaged body (AEAD)" "$work/body.lockbox" --key-file "$key1"
head -c $((size - 1)) "$vault" > "$work/short.lockbox"
expect_both 6 "truncated file" "$work/short.lockbox" --key-file "$key1"
# A future format version with a valid checksum must be reported as such, not as damage.
cp "$vault" "$work/v2.lockbox"
python3 - "$work/v2.lockbox" <<'EOF'
import sys, nacl.hash, nacl.encoding, struct
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[8:10] = struct.pack("<H", 2)
length = struct.unpack_from("<I", data, 12)[0]
data[length - 32:length] = nacl.hash.blake2b(bytes(data[:length - 32]), digest_size=32, encoder=nacl.encoding.RawEncoder)
open(path, "wb").write(bytes(data))
EOF
expect_both 7 "format version 2 with a valid checksum" "$work/v2.lockbox" --key-file "$key1"

echo "== the test vector in docs/FORMAT.md"
format_doc="$here/../../docs/FORMAT.md"
if [[ -f "$format_doc" ]] && python3 - "$format_doc" "$work/tv.key" "$work/tv.lockbox" <<'EOF'
import re, sys
doc = open(sys.argv[1], encoding="utf-8").read()
for marker, path in (("key-file", sys.argv[2]), ("vault", sys.argv[3])):
    match = re.search(r"<!-- test-vector: " + marker + r" -->\s*```hex\n(.*?)```", doc, re.S)
    if not match:
        sys.exit(f"no test vector '{marker}' in {sys.argv[1]}")
    data = bytes.fromhex("".join(match.group(1).split()))
    if marker == "key-file":
        data = data.hex().encode() + b"\n"  # the key file is the hex text and a newline
    open(path, "wb").write(data)
EOF
then
    printf 'correct horse battery staple\n' > "$work/tv.pass"
    tv_ok=1
    for creds in key-file passphrase; do
        if [[ "$creds" == key-file ]]; then args=(--key-file "$work/tv.key"); else args=(--passphrase-fd 3); fi
        if ! "${decrypt[@]}" "$work/tv.lockbox" "${args[@]}" > "$work/tv.json" 2> "$work/err" 3<"$work/tv.pass" ||
            ! python3 - "$work/tv.json" <<'EOF'
import base64, json, sys
out = json.load(open(sys.argv[1]))
item, = out["items"]
ok = (out["generation"] == 3 and out["vault_id"] == "d217454efd9c14b23bd45a4b0942480b"
      and (item["service"], item["account"], item["kind"]) == ("com.example.api", "alice", "token")
      and item["attributes"] == {"env": "prod"} and item["created_ms"] == 1795240623183
      and base64.b64decode(item["secret_base64"]) == b"hunter2")
sys.exit(0 if ok else 1)
EOF
        then tv_ok=0; fail "test vector with the $creds: vault-decrypt.py gave $(cat "$work/tv.json" "$work/err")"; fi
        got="$("$lockbox" get --vault "$work/tv.lockbox" "${args[@]}" com.example.api alice 3<"$work/tv.pass" 2>&1)" || true
        if [[ "$got" != hunter2 ]]; then tv_ok=0; fail "test vector with the $creds: lockbox get gave '$got'"; fi
    done
    if [[ "$tv_ok" == 1 ]]; then pass "test vector: both tools decrypt it with the key file and with the passphrase"; fi
else
    fail "could not extract the test vector from $format_doc"
fi

echo "$passed passed, $failed failed"
if [[ "$failed" != 0 ]]; then exit 1; fi
