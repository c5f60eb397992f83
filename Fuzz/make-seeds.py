#!/usr/bin/env python3
"""Writes the seed corpus in Fuzz/corpus/<target>/ (small, valid-looking inputs for each harness;
libFuzzer mutates from there). Vault seeds come from Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json.

Usage: Fuzz/make-seeds.py     (rewrites the seed files; the fuzzer's own finds go to a work folder)
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")
sys.path.insert(0, os.path.join(ROOT, "scripts", "format"))
import lockbox_format  # noqa: E402  (scripts/format/lockbox_format.py)


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


vectors = json.load(open(os.path.join(ROOT, "Sources", "LockboxSelfTest", "Vectors", "lockbox-vault-v1.json"), encoding="utf-8"))["vectors"]
for v in vectors:
    e = v["expected"]
    file, plain, h = bytes.fromhex(e["file_hex"]), bytes.fromhex(e["plaintext_hex"]), e["header_length"]
    # Mode byte: 0 = as is, 1 = checksum recomputed, 2 = header + plaintext, resealed (see FuzzingEntryPoints.vaultFile).
    write("vault-file", f"{v['id']}-as-is", b"\x00" + file)
    write("vault-file", f"{v['id']}-checksum-fixed", b"\x01" + file)
    write("vault-file", f"{v['id']}-resealed", b"\x02" + file[:h] + plain)
    write("vault-file", f"{v['id']}-header-only", b"\x00" + file[:h])
    write("vault-payload", v["id"], plain)
write("vault-payload", "empty-vault", struct.pack("<I", 0) + b"\x80" + bytes(251))

# vault-row: one item's metadata plaintext (docs/FORMAT.md section 18.3): a section 7.1 item
# without its secret length and secret.
for v in vectors:
    for index, item in enumerate(v["inputs"]["items"]):
        full = lockbox_format.encode_payload([dict(item, secret=b"")])[4:]  # drop the item count
        write("vault-row", f"{v['id']}-item-{index}", full[:-4])  # drop the (zero) secret length
# vault-database: Fuzz/corpus/vault-database/small-vault is a format-2 vault made by the lockbox
# CLI with the key file whose key is bytes 0..31 (the harness opens it with that key), not here:
#   printf "$(printf '\\x%02x' $(seq 0 31))" > k.key && lockbox init --format 2 --vault v --key-file k.key
#   printf a | lockbox set --vault v --key-file k.key svc alice --attribute env=prod  (and a few more)
# Its tampered copies are made here: schema objects a vault never holds (a trigger, a view named
# items over an endless query, an index, a table, a CHECK written into the schema text), each of
# which Lockbox must refuse as corrupt before it reads a row.
import shutil
import sqlite3
import tempfile

SCHEMA_PLANTINGS = {
    "trigger": "CREATE TRIGGER t AFTER INSERT ON items BEGIN DELETE FROM items WHERE address = NEW.address; END;",
    "endless-view": "ALTER TABLE items RENAME TO r; CREATE VIEW items AS WITH RECURSIVE f(n) AS (SELECT 1 UNION ALL "
                    "SELECT n + 1 FROM f) SELECT address, metadata, secret FROM r, f;",
    "index": "CREATE INDEX i ON items(metadata);",
    "table": "CREATE TABLE notes (body TEXT);",
    "check-in-schema-text": "PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql = replace(sql, 'secret BLOB NOT NULL)', "
                            "'secret BLOB NOT NULL CHECK (length(secret) < 60))') WHERE name = 'items';",
}
small_vault = os.path.join(CORPUS, "vault-database", "small-vault")
for name, sql in SCHEMA_PLANTINGS.items():
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "v")
        shutil.copyfile(small_vault, copy)
        db = sqlite3.connect(copy)
        db.executescript(sql)
        db.execute("PRAGMA journal_mode=DELETE")
        db.close()
        write("vault-database", "small-vault-" + name, open(copy, "rb").read())

settings = {
    "profiles": {
        "default": {"backend": "file", "reason": "chosen automatically: no D-Bus session bus", "recorded": "2026-11-21T05:57:03Z"},
        "desktop": {"backend": "secret-service", "reason": "requested explicitly", "recorded": "2026-01-02T03:04:05Z"},
    }
}
write("settings", "two-profiles.json", json.dumps(settings, indent=2, sort_keys=True))
write("settings", "empty.json", '{\n  "profiles" : {\n\n  }\n}')

HASH = "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
default_lockout = {"delays": [0, 0, 0, 0, 60, 300, 900, 900, 3600], "disableAfter": 100}
# Dates in Foundation's default Codable form: seconds since 2001-01-01.
records = {
    "fresh": {"hash": HASH, "lockout": default_lockout, "wipeItems": [], "failures": 0, "disabled": False},
    "five-failures-same-boot": {"hash": "not-an-argon2-hash", "lockout": default_lockout, "wipeItems": [], "failures": 5,
                                "lastAttempt": {"wall": 821692700.0, "bootID": "fuzz-boot", "sinceBoot": 900.5}, "disabled": False},
    "wipe-after-3-other-boot": {"hash": "x", "lockout": {"delays": [1.5], "wipeAfter": 3, "disableAfter": 10},
                                "wipeItems": [{"service": "fuzz", "account": "token"}], "failures": 2,
                                "lastAttempt": {"wall": 821692000.0, "bootID": "earlier-boot", "sinceBoot": 5.0}, "disabled": False},
    "disabled": {"hash": HASH, "lockout": default_lockout, "wipeItems": [], "failures": 100,
                 "lastAttempt": {"wall": 821692799.0, "bootID": "fuzz-boot", "sinceBoot": 999.0}, "disabled": True},
}
for name, record in records.items():
    write("pin-record", name + ".json", json.dumps(record, separators=(",", ":")))


def window(expires, fields, key):
    out = b"LBW1" + struct.pack("<d", expires)
    for f in fields:
        b = f.encode()
        out += struct.pack("<H", len(b)) + b
    return out + bytes([len(key)]) + key


fp = "bec9bd1d513ac38bd88c9205a090abe0274ed2872e2dff2f62d02c85e916a85e"
write("session-window", "passphrase-with-key", window(1e12, ["passphrase", fp, "", "", ""], bytes(range(32))))
write("session-window", "pin-no-key", window(1e12, ["pin:max", "", "kids", "max", fp], b""))
write("session-window", "expired", window(1.0, ["passphrase", fp, "", "", ""], bytes(range(32))))

write("key-file", "raw-32", bytes(range(32)))
write("key-file", "hex-lf", bytes(range(32)).hex() + "\n")
write("key-file", "hex-crlf-upper", bytes(range(32)).hex().upper() + "\r\n")
# OAuth 2.0 token responses (RFC 6749 §5.1, §5.2), as servers send them.
responses = {
    "full": {"access_token": "2YotnFZFEjr1zCsicMWpAA", "token_type": "Bearer", "expires_in": 3600,
             "refresh_token": "tGzv3JOkF0XG5Qx2TlKWIA", "scope": "read write"},
    "no-refresh": {"access_token": "eyJhbGciOiJIUzI1NiJ9.e30.sig", "token_type": "bearer", "expires_in": "120"},
    "no-expiry": {"access_token": "abc", "token_type": "mac"},
    "fractional-expiry": {"access_token": "a.b.c", "token_type": "Bearer", "expires_in": 59.5, "scope": None},
    "invalid-grant": {"error": "invalid_grant", "error_description": "refresh token revoked"},
    "other-error": {"error": "invalid_client"},
}
for name, body in responses.items():
    write("token-response", name + ".json", json.dumps(body))
write("token-response", "not-an-object.json", "[1, 2, 3]")
# Stored token records (TokenSet's JSON inside the store), milliseconds since 1970.
token_records = {
    "full": {"access_token": "2YotnFZFEjr1zCsicMWpAA", "refresh_token": "tGzv3JOkF0XG5Qx2TlKWIA", "token_type": "Bearer",
             "expires_at_ms": 1800003600000, "scope": "read write", "subject": "alice"},
    "minimal": {"access_token": "x", "token_type": "Bearer"},
    "far-expiry": {"access_token": "x", "token_type": "Bearer", "expires_at_ms": 281474976710655},
}
for name, record in token_records.items():
    write("token-record", name + ".json", json.dumps(record, separators=(",", ":")))

print("make-seeds: wrote", CORPUS)
