#!/usr/bin/env python3
"""Builds Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json: Lockbox vault files made from fixed inputs.

Built on scripts/lockbox_format.py, written from docs/FORMAT.md alone with PyNaCl (its own bundled
libsodium), not from the Swift code, so the Swift writer and reader are checked against an independent
implementation of the document. Vector 1 uses the inputs behind the docs/FORMAT.md section 16
test vector; this script checks that it reproduces those 575 bytes exactly.

Usage: scripts/make-vault-vectors.py [--check]
  (no option)  write Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json
  --check      exit 1 if the file on disk differs from what this script produces
"""
import json
import os
import re
import struct
import sys

import lockbox_format as fmt  # scripts/lockbox_format.py: the format itself

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "Sources", "LockboxSelfTest", "Vectors", "lockbox-vault-v1.json")


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
    for slot in v["slots"]:
        encoded = format_slot(slot)
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


def render(v):
    slots = []
    for s in v["slots"]:
        out = {"kind": s["kind"]}
        if s["kind"] == "key-file":
            out["key_file_key_hex"] = s["key_file_key"].hex()
        else:
            out["passphrase_utf8"] = s["passphrase"]
            out["opslimit"] = s["opslimit"]
            out["memlimit"] = s["memlimit"]
        out["salt_hex"] = s["salt"].hex()
        out["nonce_hex"] = s["nonce"].hex()
        slots.append(out)
    items = [{
        "service": i["service"], "account": i["account"], "kind": i["kind"], "label": i["label"],
        "created_ms": i["created_ms"], "modified_ms": i["modified_ms"], "attributes": i["attributes"],
        "access": i["access"], "secret_hex": i["secret"].hex(),
    } for i in v["items"]]
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


def format_md_vector():
    text = open(os.path.join(ROOT, "docs", "FORMAT.md"), encoding="utf-8").read()
    m = re.search(r"<!-- test-vector: vault -->\s*```hex\n(.*?)```", text, re.S)
    return "".join(m.group(1).split()) if m else None


def main():
    vectors = [render(V1), render(V2)]
    documented = format_md_vector()
    if documented != vectors[0]["expected"]["file_hex"]:
        sys.exit("make-vault-vectors: vector 1 does not reproduce the docs/FORMAT.md section 16 bytes")
    document = {
        "format": "lockbox-known-answer-vectors/1",
        "algorithm": "lockbox-vault-v1",
        "title": "Lockbox vault files (format version 1) built from fixed inputs",
        "source": {
            "name": "Lockbox docs/FORMAT.md (vector 1 is its section 16 test vector)",
            "generator": "scripts/make-vault-vectors.py with scripts/lockbox_format.py: an independent writer from docs/FORMAT.md using PyNaCl, not the Swift code",
        },
        "checks": "Writer: the inputs must give file_hex byte for byte (with each intermediate value). Reader: file_hex must open with every slot's credential and give exactly the items. must_fail: each damaged copy must be refused with the error class docs/FORMAT.md section 8 names.",
        "vectors": vectors,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit(f"make-vault-vectors: {OUT} differs from what this script produces")
        print("make-vault-vectors: up to date")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"make-vault-vectors: wrote {OUT} ({len(vectors)} vectors)")


if __name__ == "__main__":
    main()
