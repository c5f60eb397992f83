#!/usr/bin/env python3
"""Builds Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json and lockbox-vault-v2.json: Lockbox vaults
(format 1 files, format 2 rows) made from fixed inputs.

Built on scripts/format/lockbox_format.py, written from docs/FORMAT.md alone with PyNaCl (its own bundled
libsodium), not from the Swift code, so the Swift writer and reader are checked against an independent
implementation of the document. Vector 1 uses the inputs behind the docs/FORMAT.md section 16
test vector; this script checks that it reproduces those 575 bytes exactly.

Format 2 (docs/FORMAT.md section 18) has no byte-exact file (SQLite's page layout is SQLite's), so its
vectors are the rows: the derived keys, each slot row, each item's address, metadata plaintext,
associated data and both sealed columns. This script also proves them from the reading side: it
puts the rows into a database made with the schema printed in docs/FORMAT.md section 18.1 (Python's
sqlite3), decrypts it with the format-2 reader of lockbox_format.py with each slot's credential, and
checks that every must-fail case is refused by that reader with the error class the vector names.

Usage: scripts/format/make-vault-vectors.py [--check]
  (no option)  write Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json and lockbox-vault-v2.json
  --check      exit 1 if a file on disk differs from what this script produces
"""
import json
import os
import re
import sqlite3
import struct
import sys
import tempfile
import unicodedata

import lockbox_format as fmt  # scripts/format/lockbox_format.py: the format itself

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VECTORS = os.path.join(ROOT, "Sources", "LockboxSelfTest", "Vectors")
OUT = os.path.join(VECTORS, "lockbox-vault-v1.json")
OUT_V2 = os.path.join(VECTORS, "lockbox-vault-v2.json")


def seq(start, count):
    return bytes((start + i) & 0xFF for i in range(count))


def format_slot(slot):
    """A vector's slot as lockbox_format takes it."""
    passphrase = slot["kind"] == "passphrase"
    return {"kind": fmt.SLOT_PASSPHRASE if passphrase else fmt.SLOT_KEY_FILE,
            "opslimit": slot.get("opslimit"), "memlimit": slot.get("memlimit"),
            "salt": slot["salt"], "sealed": b"", "nonce": slot["nonce"]}


def slot_secret(slot):
    return slot["passphrase"].encode("utf-8") if slot["kind"] == "passphrase" else slot["key_file_key"]


def payload(items):
    return fmt.encode_payload(items)


def build(v):
    slots, keks, ads = [], [], []
    fingerprints = []
    for slot in v["slots"]:
        encoded = format_slot(slot)
        fingerprint = fmt.key_file_fingerprint(slot["key_file_key"]) if slot["kind"] == "key-file" else None
        fingerprints.append(fingerprint)
        if slot.get("record_fingerprint"):
            encoded["fingerprint"] = fingerprint
        k = fmt.derive_kek(encoded, slot_secret(slot))
        encoded["wrapped_key"] = fmt.wrap(v["vault_id"], encoded, k, v["data_key"])
        slots.append(encoded)
        keks.append(k)
        ads.append(v["vault_id"] + fmt.slot_parameter_bytes(encoded))
    header, body, plain = fmt.encode_file(v["vault_id"], v["generation"], slots, v["body_nonce"], v["data_key"], v["items"])
    return {
        "header_length": len(header),
        "body_length": len(body),
        "slot_keks_hex": [k.hex() for k in keks],
        "slot_additional_data_hex": [a.hex() for a in ads],
        "header_checksum_hex": header[-fmt.CHECKSUM_BYTES:].hex(),
        "payload_length": len(payload(v["items"])),
        "plaintext_hex": plain.hex(),
        "file_hex": (header + body).hex(),
    }


# ---------------------------------------------------------------------------------------------
# Vector 1: the inputs behind docs/FORMAT.md section 16 (made there by `lockbox` with random
# values; here every random value is an input).
V1 = {
    "id": "format-md-section-16",
    "description": "The docs/FORMAT.md section 16 vault: a key-file slot, a passphrase slot (libsodium INTERACTIVE), one item; made by lockbox init, slot add-passphrase, set",
    "vault_id": bytes.fromhex("d217454efd9c14b23bd45a4b0942480b"),
    "generation": 3,
    "data_key": bytes.fromhex("b2a472801dc7a43aa3ade4b05dabed5924358386b48eeb1040e34048b2ebfe70"),
    "body_nonce": bytes.fromhex("7bb74f8be676327ab416ba43984ce917d341370f0441f248"),
    "slots": [
        {"kind": "key-file", "key_file_key": seq(0, 32),
         "salt": bytes.fromhex("4774a9c8d12bf1fa9f1e064c0d163d81"),
         "nonce": bytes.fromhex("0363b576b0e56288403102c3cdb8f8a7a6ff859b9499965c")},
        {"kind": "passphrase", "passphrase": "correct horse battery staple", "opslimit": 2, "memlimit": 67108864,
         "salt": bytes.fromhex("352d33752c8c2b8b22003ea7fa1a19a8"),
         "nonce": bytes.fromhex("8f910acdde8192f0c0f85484c6abe53b8752a73207376019")},
    ],
    "items": [
        {"service": "com.example.api", "account": "alice", "kind": "token",
         "label": "Password for 'alice' on 'com.example.api'", "created_ms": 1795240623183,
         "modified_ms": 1795240623183, "attributes": {"env": "prod"}, "access": "always", "secret": b"hunter2"},
    ],
}

# Vector 2: edge cases of the payload and header. Every byte is a pattern, so it can be typed in.
V2 = {
    "id": "edge-cases",
    "description": "Two key-file slots and a passphrase slot at the smallest Argon2id cost (t=1, 8 KiB, non-ASCII passphrase); generation above 2^32; items with an empty label, non-ASCII names and attributes, an empty attribute value, a protected item (lockbox.access), timestamps before 1970 and at the +-2^48 ms clamp, a 300-byte binary secret, an empty secret; the unpadded payload is exactly 768 bytes, so padding adds a whole block (1024)",
    "vault_id": seq(0xF0, 16),
    "generation": (1 << 52) + 1,
    "data_key": seq(0x20, 32),
    "body_nonce": seq(0x80, 24),
    "slots": [
        {"kind": "key-file", "key_file_key": seq(0xA0, 32), "salt": seq(0x10, 16), "nonce": seq(0x30, 24)},
        {"kind": "passphrase", "passphrase": "pässwörd ✓", "opslimit": 1, "memlimit": 8192,
         "salt": seq(0x50, 16), "nonce": seq(0x60, 24)},
        {"kind": "key-file", "key_file_key": seq(0xC0, 32), "salt": seq(0xB0, 16), "nonce": seq(0xD0, 24)},
    ],
    "items": [
        {"service": "com.example.api", "account": "alice", "kind": "token", "label": "",
         "created_ms": -1, "modified_ms": 0,
         "attributes": {"env": "prod", "région": "Zürich", "empty": ""}, "access": "always",
         "secret": b"hunter2\n"},
        {"service": "com.example.api", "account": "bob", "kind": "password", "label": "Bob’s password ✓",
         "created_ms": 1700000000000, "modified_ms": 1795240623183, "attributes": {},
         "access": "fresh-authentication", "secret": b"correct horse"},
        {"service": "device", "account": "id", "kind": "device-id", "label": "Password for 'id' on 'device'",
         "created_ms": 1 << 48, "modified_ms": -(1 << 48), "attributes": {"a": "1", "b": "2"},
         "access": "always", "secret": bytes(range(256)) + bytes(range(44))},
        {"service": "zz", "account": "empty", "kind": "generic", "label": "nothing", "created_ms": 1,
         "modified_ms": 2, "attributes": {}, "access": "always", "secret": b""},
        {"service": "Ωmega", "account": "ü", "kind": "custom kind", "label": "Ω",
         "created_ms": 1795240623183, "modified_ms": 1795240623184, "attributes": {}, "access": "always",
         "secret": None},  # filled below so that the payload is exactly 512 bytes
    ],
}


def fill_to(v, target):
    v["items"][-1]["secret"] = b""
    missing = target - len(payload(v["items"]))
    assert missing >= 0, missing
    v["items"][-1]["secret"] = bytes((0x41 + i % 26) for i in range(missing))
    assert len(payload(v["items"])) == target


fill_to(V2, 768)


def must_fail(file_hex):
    """Damaged copies of a vector and what a reader must report (docs/FORMAT.md section 8)."""
    data = bytes.fromhex(file_hex)
    h = struct.unpack_from("<I", data, 12)[0]
    cases = []

    def case(cid, description, mutation, expect):
        cases.append({"id": cid, "description": description, "mutation": mutation, "expect": expect})

    case("wrong-magic", "first byte changed", {"xor": [{"offset": 0, "mask": 1}]},
         {"error": "corrupt", "reason": "not a Lockbox vault (wrong magic bytes)"})
    case("header-bit-flip", "one bit of the generation changed, checksum left as it was",
         {"xor": [{"offset": 32, "mask": 1}]},
         {"error": "corrupt", "reason": "the header checksum does not match"})
    case("generation-changed-checksum-recomputed",
         "the generation changed and the checksum recomputed, as a deliberate tamperer would: the header is the body's associated data",
         {"xor": [{"offset": 32, "mask": 1}], "recompute_checksum": True},
         {"error": "corrupt", "reason": "the encrypted contents failed authentication"})
    case("vault-id-changed-checksum-recomputed",
         "a vault ID byte changed and the checksum recomputed: no slot unwraps any more (the ID is in every slot's associated data)",
         {"xor": [{"offset": 16, "mask": 0x80}], "recompute_checksum": True},
         {"error": "wrong-credential"})
    case("version-2", "format version 2 with a valid checksum",
         {"xor": [{"offset": 8, "mask": 3}], "recompute_checksum": True},
         {"error": "unsupported-version", "found": 2})
    case("body-last-byte", "last byte of the body (the tag) changed", {"xor": [{"offset": len(data) - 1, "mask": 0x40}]},
         {"error": "corrupt", "reason": "the encrypted contents failed authentication"})
    case("body-first-byte", "first byte of the body changed", {"xor": [{"offset": h, "mask": 1}]},
         {"error": "corrupt", "reason": "the encrypted contents failed authentication"})
    case("truncated-by-one", "last byte removed", {"truncate_to": len(data) - 1},
         {"error": "corrupt", "reason": f"truncated: expected {len(data)} bytes, the file has {len(data) - 1}"})
    case("one-byte-appended", "a zero byte appended", {"append_hex": "00"},
         {"error": "corrupt", "reason": "1 unexpected bytes after the encrypted body"})
    case("header-only", "the body removed", {"truncate_to": h},
         {"error": "corrupt", "reason": f"truncated: expected {len(data)} bytes, the file has {h}"})
    return cases


def render_slots(slot_inputs):
    slots = []
    for s in slot_inputs:
        out = {"kind": s["kind"]}
        if s["kind"] == "key-file":
            out["key_file_key_hex"] = s["key_file_key"].hex()
        else:
            out["passphrase_utf8"] = s["passphrase"]
            out["opslimit"] = s["opslimit"]
            out["memlimit"] = s["memlimit"]
        if "record_fingerprint" in s:  # format 2 only (docs/FORMAT.md section 18.1.1)
            out["record_fingerprint"] = s["record_fingerprint"]
        out["salt_hex"] = s["salt"].hex()
        out["nonce_hex"] = s["nonce"].hex()
        slots.append(out)
    return slots


def render(v):
    slots = render_slots(v["slots"])
    items = render_items(v["items"], nonces=False)
    expected = build(v)
    return {
        "id": v["id"],
        "description": v["description"],
        "inputs": {
            "vault_id_hex": v["vault_id"].hex(),
            "generation": v["generation"],
            "data_key_hex": v["data_key"].hex(),
            "body_nonce_hex": v["body_nonce"].hex(),
            "slots": slots,
            "items": items,
        },
        "expected": expected,
        "must_fail": must_fail(expected["file_hex"]),
    }



# ---------------------------------------------------------------------------------------------
# Format 2 (docs/FORMAT.md section 18): rows built from fixed inputs, nonces included.


def nfc(text):
    return unicodedata.normalize("NFC", text)


def with_nonces(items, first):
    """The items with a metadata and a secret nonce each, patterns starting at byte `first`."""
    out = []
    for index, item in enumerate(items):
        item = dict(item)
        item["metadata_nonce"] = seq(first + 2 * index * 24, 24)
        item["secret_nonce"] = seq(first + (2 * index + 1) * 24, 24)
        out.append(item)
    return out


W1 = {
    "id": "one-item",
    "description": "Format 2: a key-file slot recording its key file's fingerprint and a passphrase slot (Argon2id t=1, 8 KiB), one item (the token of the format-1 vector format-md-section-16)",
    "vault_id": seq(0x40, 16),
    "data_key": seq(0x60, 32),
    "slots": [
        {"kind": "key-file", "key_file_key": seq(0, 32), "salt": seq(0x10, 16), "nonce": seq(0x20, 24),
         "record_fingerprint": True},
        {"kind": "passphrase", "passphrase": "correct horse battery staple", "opslimit": 1, "memlimit": 8192,
         "salt": seq(0x30, 16), "nonce": seq(0x48, 24)},
    ],
    "items": with_nonces(V1["items"], 0x90),
}

W2 = {
    "id": "edge-cases",
    "description": "Format 2: the slots and items of the format-1 vector edge-cases (empty label and secret, non-ASCII names and attributes, a protected item, extreme timestamps, a 300-byte binary secret; the first key-file slot records its key file's fingerprint, the second, as a slot made before fingerprints were recorded, does not) plus an item whose account is in NFD (its address is computed from NFC, its metadata keeps the name as written), and an item that expires and holds a previous version kept in its companion (lockbox.expires, lockbox.previous, lockbox.companion, lockbox.companion-id)",
    "vault_id": V2["vault_id"],
    "data_key": V2["data_key"],
    "slots": [dict(slot, record_fingerprint=index == 0) if slot["kind"] == "key-file" else slot
              for index, slot in enumerate(V2["slots"])],
    "items": with_nonces(V2["items"] + [
        {"service": "nfd", "account": "e\u0301t\u0065\u0301", "kind": "generic", "label": "decomposed",
         "created_ms": 5, "modified_ms": 6, "attributes": {}, "access": "always", "secret": b"\x00"},
        {"service": "db", "account": "app", "kind": "password", "label": "DB", "created_ms": 1795240623183,
         "modified_ms": 1795240700000, "attributes": {}, "access": "always", "secret": b"new password",
         "expires_ms": 1800000000000, "previous_id": "0123456789abcdef0123456789abcdef"},
        {"service": "db", "account": "lockbox.previous:app", "kind": "password", "label": "Previous version of 'app' on 'db'",
         "created_ms": 1795240700000, "modified_ms": 1795240700000, "attributes": {}, "access": "always",
         "secret": b"old password", "expires_ms": 1795327100000, "companion": "previous",
         "companion_id": "0123456789abcdef0123456789abcdef"},
    ], 0x01),
}


def build_v2(v):
    keys = fmt.v2_keys(v["data_key"])
    slot_rows, keks = [], []
    fingerprints = []
    for slot in v["slots"]:
        encoded = format_slot(slot)
        fingerprint = fmt.key_file_fingerprint(slot["key_file_key"]) if slot["kind"] == "key-file" else None
        fingerprints.append(fingerprint)
        if slot.get("record_fingerprint"):
            encoded["fingerprint"] = fingerprint
        k = fmt.derive_kek(encoded, slot_secret(slot))
        encoded["wrapped_key"] = fmt.wrap(v["vault_id"], encoded, k, v["data_key"])
        slot_rows.append(fmt.encode_slot(encoded))
        keks.append(k)
    rows = [fmt.v2_seal_row(keys, v["vault_id"], item, item["metadata_nonce"], item["secret_nonce"], nfc)
            for item in v["items"]]
    return {
        "address_key_hex": keys[0].hex(),
        "row_key_hex": keys[1].hex(),
        "key_check_hex": keys[2].hex(),
        "slot_keks_hex": [k.hex() for k in keks],
        "key_file_fingerprints_hex": [f.hex() if f is not None else None for f in fingerprints],
        "slot_rows_hex": [r.hex() for r in slot_rows],
        "items": [{name + "_hex": row[name].hex() for name in
                   ("address", "metadata_plaintext", "metadata_additional_data", "metadata", "secret_additional_data", "secret")}
                  for row in rows],
    }


def must_fail_v2(item_count, slot_rows):
    """Damaged copies of a format-2 vector's database, what is done to them, and the error the reader
    must give (docs/FORMAT.md sections 18.1-18.3). `operation`: open (with a key-file slot), list
    (open, then list every item's metadata) or get (open, then read item `item` with its secret).
    The cases on two items need two."""
    cases = []

    def case(cid, description, mutation, operation, expect):
        cases.append({"id": cid, "description": description, "mutation": mutation, "operation": operation, "expect": expect})

    metadata_failed = {"error": "corrupt", "reason": "an item's metadata failed authentication"}
    secret_failed = {"error": "corrupt", "reason": "an item's secret failed authentication"}
    case("metadata-bit-flip", "one bit of item 0's sealed metadata changed",
         {"xor_column": {"item": 0, "column": "metadata", "offset": 30, "mask": 1}}, {"list": {}}, metadata_failed)
    case("metadata-nonce-bit-flip", "one bit of item 0's metadata nonce changed",
         {"xor_column": {"item": 0, "column": "metadata", "offset": 0, "mask": 0x80}}, {"get": {"item": 0}}, metadata_failed)
    case("secret-tag-bit-flip", "the last byte (tag) of item 0's sealed secret changed",
         {"xor_column": {"item": 0, "column": "secret", "offset": -1, "mask": 0x40}}, {"get": {"item": 0}}, secret_failed)
    if item_count >= 2:
        case("rows-swapped", "items 0 and 1 swap both columns, each row left at the other's address",
             {"swap_columns": {"items": [0, 1], "columns": ["metadata", "secret"]}}, {"get": {"item": 0}}, metadata_failed)
        case("secrets-swapped", "items 0 and 1 swap only their secret columns (each metadata stays put)",
             {"swap_columns": {"items": [0, 1], "columns": ["secret"]}}, {"get": {"item": 1}}, secret_failed)
    case("address-bit-flip", "one bit of item 0's address changed: its metadata no longer authenticates where it is",
         {"xor_column": {"item": 0, "column": "address", "offset": 31, "mask": 1}}, {"list": {}}, metadata_failed)
    case("key-check-bit-flip", "one bit of the vault row's key_check changed",
         {"xor_vault": {"column": "key_check", "offset": 0, "mask": 1}}, {"open": {}},
         {"error": "corrupt", "reason": "the key check does not match the data key the key slots hold"})
    case("vault-id-bit-flip", "one bit of the vault ID changed: no slot unwraps (the ID is in every slot's associated data)",
         {"xor_vault": {"column": "vault_id", "offset": 15, "mask": 1}}, {"open": {}}, {"error": "wrong-credential"})
    first = bytes.fromhex(slot_rows[0])
    if first[0] == fmt.SLOT_KEY_FILE and len(first) == 3 + 88 + fmt.FINGERPRINT_BYTES:
        case("fingerprint-one-byte-short", "key slot 0's recorded fingerprint cut to 15 bytes (its length field changed to match)",
             {"resize_slot": {"slot": 0, "by": -1}}, {"open": {}},
             {"error": "corrupt", "reason": "key slot 0 has a key-file fingerprint of 15 bytes, not 16"})
    case("user-version-3", "PRAGMA user_version = 3", {"pragma": {"name": "user_version", "value": 3}}, {"open": {}},
         {"error": "unsupported-version", "found": 3})
    case("application-id-changed", "PRAGMA application_id of another application",
         {"pragma": {"name": "application_id", "value": 1}}, {"open": {}},
         {"error": "corrupt", "reason": "a SQLite database that is not a Lockbox vault"})
    return cases


def render_items(items, nonces):
    out = []
    for i in items:
        item = {
            "service": i["service"], "account": i["account"], "kind": i["kind"], "label": i["label"],
            "created_ms": i["created_ms"], "modified_ms": i["modified_ms"], "attributes": i["attributes"],
            "access": i["access"], "secret_hex": i["secret"].hex(),
        }
        # FORMAT.md 7.1's expiry and previous-version bookkeeping, only where an item has them.
        for field in ("expires_ms", "previous_id", "companion", "companion_id"):
            if i.get(field) is not None:
                item[field] = i[field]
        if nonces:
            item["metadata_nonce_hex"] = i["metadata_nonce"].hex()
            item["secret_nonce_hex"] = i["secret_nonce"].hex()
        out.append(item)
    return out


def render_v2(v):
    expected = build_v2(v)
    return {
        "id": v["id"],
        "description": v["description"],
        "inputs": {
            "vault_id_hex": v["vault_id"].hex(),
            "data_key_hex": v["data_key"].hex(),
            "slots": render_slots(v["slots"]),
            "items": render_items(v["items"], nonces=True),
        },
        "expected": expected,
        "must_fail": must_fail_v2(len(v["items"]), expected["slot_rows_hex"]),
    }


def documented_schema():
    """The CREATE TABLE statements of docs/FORMAT.md section 18.1, as printed there."""
    text = open(os.path.join(ROOT, "docs", "FORMAT.md"), encoding="utf-8").read()
    m = re.search(r"### 18\.1 .*?```sql\n(.*?)```", text, re.S)
    if not m:
        sys.exit("make-vault-vectors: no SQL schema in docs/FORMAT.md section 18.1")
    return m.group(1)


def write_v2_database(path, rendered, mutation=None):
    """A format-2 vault holding a vector's rows, made with Python's sqlite3 from the documented schema,
    with `mutation` (a must_fail case's) applied."""
    expected = rendered["expected"]
    vault_id = bytes.fromhex(rendered["inputs"]["vault_id_hex"])
    key_check = bytes.fromhex(expected["key_check_hex"])
    items = [{k: bytes.fromhex(item[k + "_hex"]) for k in ("address", "metadata", "secret")} for item in expected["items"]]
    pragmas = {"application_id": fmt.V2_APPLICATION_ID, "user_version": fmt.V2_FORMAT_VERSION}
    mutation = mutation or {}
    if "xor_column" in mutation:
        m = mutation["xor_column"]
        column = bytearray(items[m["item"]][m["column"]])
        column[m["offset"]] ^= m["mask"]
        items[m["item"]][m["column"]] = bytes(column)
    if "swap_columns" in mutation:
        a, b = mutation["swap_columns"]["items"]
        for column in mutation["swap_columns"]["columns"]:
            items[a][column], items[b][column] = items[b][column], items[a][column]
    if "xor_vault" in mutation:
        m = mutation["xor_vault"]
        value = bytearray({"vault_id": vault_id, "key_check": key_check}[m["column"]])
        value[m["offset"]] ^= m["mask"]
        if m["column"] == "vault_id":
            vault_id = bytes(value)
        else:
            key_check = bytes(value)
    if "pragma" in mutation:
        pragmas[mutation["pragma"]["name"]] = mutation["pragma"]["value"]
    slot_rows = [bytes.fromhex(slot) for slot in expected["slot_rows_hex"]]
    if "resize_slot" in mutation:
        # The slot's body shortened (or lengthened with zero bytes) and its length field changed to match.
        m = mutation["resize_slot"]
        row = slot_rows[m["slot"]]
        body = row[3:-(-m["by"])] if m["by"] < 0 else row[3:] + bytes(m["by"])
        slot_rows[m["slot"]] = row[:1] + struct.pack("<H", len(body)) + body
    db = sqlite3.connect(path)
    try:
        db.executescript(documented_schema())
        for name, value in pragmas.items():
            db.execute(f"PRAGMA {name}={int(value)}")
        db.execute("INSERT INTO vault VALUES (1, ?, ?, ?)", (fmt.V2_FORMAT_VERSION, vault_id, key_check))
        for index, slot in enumerate(slot_rows):
            db.execute("INSERT INTO key_slots VALUES (?, ?)", (index, slot))
        for item in items:
            db.execute("INSERT INTO items VALUES (?, ?, ?)", (item["address"], item["metadata"], item["secret"]))
        db.commit()
    finally:
        db.close()


def credentials_of(rendered):
    out = []
    for slot in rendered["inputs"]["slots"]:
        if slot["kind"] == "key-file":
            out.append((fmt.SLOT_KEY_FILE, bytes.fromhex(slot["key_file_key_hex"])))
        else:
            out.append((fmt.SLOT_PASSPHRASE, slot["passphrase_utf8"].encode("utf-8")))
    return out


def read_v2(path, credentials, operation):
    """What the format-2 reader of lockbox_format.py does with the vault at `path`: opens it, then lists
    or gets. Returns the items (list: without secrets) or raises fmt.FormatFailure."""
    vault_id, key_check, slots, rows = fmt.v2_read(path)
    data_key, index = fmt.open_data_key(vault_id, slots, credentials)
    keys = fmt.v2_keys(data_key)
    if keys[2] != key_check:
        raise fmt.corrupt("the key check does not match the data key the key slots hold")
    if "get" in operation:
        address = fmt.v2_address(keys[0], operation["get"]["service"], operation["get"]["account"], nfc)
        row = next((r for r in rows if r[0] == address), None)
        return index, [] if row is None else [fmt.v2_open_item(keys, vault_id, *row, nfc)]
    if "list" in operation:
        return index, [fmt.v2_open_item(keys, vault_id, *row, nfc) for row in rows]
    return index, []


def prove_v2(rendered):
    """The reading side of a format-2 vector, with lockbox_format.py: every slot opens the rows and gives
    exactly the items; every must-fail case is refused as it says."""
    inputs = rendered["inputs"]["items"]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vault")
        write_v2_database(path, rendered)
        for slot_index, credential in enumerate(credentials_of(rendered)):
            opened, items = read_v2(path, [credential], {"list": {}})
            if opened != slot_index:
                sys.exit(f"make-vault-vectors: {rendered['id']}: slot {slot_index}'s credential opened slot {opened}")
            got = sorted((i["service"], i["account"], i["kind"], i["label"], i["created_ms"], i["modified_ms"],
                          i["secret"].hex()) for i in items)
            want = sorted((i["service"], i["account"], i["kind"], i["label"], i["created_ms"], i["modified_ms"],
                           i["secret_hex"]) for i in inputs)
            if got != want:
                sys.exit(f"make-vault-vectors: {rendered['id']}: the rows do not read back as the items")
        key_files = [c for c in credentials_of(rendered) if c[0] == fmt.SLOT_KEY_FILE]
        for case in rendered["must_fail"]:
            damaged = os.path.join(folder, case["id"])
            write_v2_database(damaged, rendered, case["mutation"])
            operation = dict(case["operation"])
            if "get" in operation:
                item = inputs[operation["get"]["item"]]
                operation = {"get": {"service": item["service"], "account": item["account"]}}
            try:
                read_v2(damaged, key_files, operation)
            except fmt.FormatFailure as failure:
                wanted = {"corrupt": fmt.EXIT_CORRUPT, "wrong-credential": fmt.EXIT_WRONG_CREDENTIAL,
                          "unsupported-version": fmt.EXIT_UNSUPPORTED_VERSION}[case["expect"]["error"]]
                reason = case["expect"].get("reason")
                if failure.code != wanted or (reason is not None and reason not in str(failure)):
                    sys.exit(f"make-vault-vectors: {rendered['id']} must fail {case['id']}: refused with {failure.code} {failure}")
                continue
            sys.exit(f"make-vault-vectors: {rendered['id']} must fail {case['id']}: the damaged vault read")


def format_md_vector():
    text = open(os.path.join(ROOT, "docs", "FORMAT.md"), encoding="utf-8").read()
    m = re.search(r"<!-- test-vector: vault -->\s*```hex\n(.*?)```", text, re.S)
    return "".join(m.group(1).split()) if m else None


def main():
    vectors = [render(V1), render(V2)]
    documented = format_md_vector()
    if documented != vectors[0]["expected"]["file_hex"]:
        sys.exit("make-vault-vectors: vector 1 does not reproduce the docs/FORMAT.md section 16 bytes")
    vectors_v2 = [render_v2(W1), render_v2(W2)]
    for rendered in vectors_v2:
        prove_v2(rendered)
    documents = {
        OUT: {
            "format": "lockbox-known-answer-vectors/1",
            "algorithm": "lockbox-vault-v1",
            "title": "Lockbox vault files (format version 1) built from fixed inputs",
            "source": {
                "name": "Lockbox docs/FORMAT.md (vector 1 is its section 16 test vector)",
                "generator": "scripts/format/make-vault-vectors.py with scripts/format/lockbox_format.py: an independent writer from docs/FORMAT.md using PyNaCl, not the Swift code",
            },
            "checks": "Writer: the inputs must give file_hex byte for byte (with each intermediate value). Reader: file_hex must open with every slot's credential and give exactly the items. must_fail: each damaged copy must be refused with the error class docs/FORMAT.md section 8 names.",
            "vectors": vectors,
        },
        OUT_V2: {
            "format": "lockbox-known-answer-vectors/1",
            "algorithm": "lockbox-vault-v2",
            "title": "Lockbox format-2 vaults (sealed rows in SQLite) built from fixed inputs",
            "source": {
                "name": "Lockbox docs/FORMAT.md section 18",
                "generator": "scripts/format/make-vault-vectors.py with scripts/format/lockbox_format.py: an independent writer and reader from docs/FORMAT.md using PyNaCl and Python's sqlite3, not the Swift code",
            },
            "checks": "Writer: the inputs (nonces included) must give each derived key, slot row, address, metadata plaintext, associated data and sealed column byte for byte. Reader: a database holding the rows (schema of docs/FORMAT.md section 18.1) must open with every slot's credential and give exactly the items. must_fail: each damaged copy of that database must be refused, on the operation named, with the error class named.",
            "vectors": vectors_v2,
        },
    }
    check = "--check" in sys.argv[1:]
    for path, document in documents.items():
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if check:
            current = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
            if current != text:
                sys.exit(f"make-vault-vectors: {path} differs from what this script produces")
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"make-vault-vectors: wrote {path} ({len(document['vectors'])} vectors)")
    if check:
        print("make-vault-vectors: up to date (format-2 vectors proved with the lockbox_format.py reader)")


if __name__ == "__main__":
    main()
