"""The Lockbox vault format (docs/FORMAT.md) in Python: the one implementation the project's
scripts share (scripts/format/vault-decrypt.py reads with it, scripts/format/make-vault-vectors.py writes
with it).

Written from docs/FORMAT.md, not from the Swift code, with PyNaCl only (its own bundled
libsodium): an independent second implementation that the Swift reader and writer are checked
against. Errors are FormatFailure with the lockbox CLI's exit code for the class of failure.
"""

import re
import struct

from nacl import bindings, encoding, exceptions, hash as nacl_hash, pwhash

# Exit codes (a subset of the lockbox CLI's).
EXIT_FAILURE = 1
EXIT_VAULT_NOT_FOUND = 3
EXIT_WRONG_CREDENTIAL = 5
EXIT_CORRUPT = 6
EXIT_UNSUPPORTED_VERSION = 7
EXIT_INVALID_KEY_FILE = 11
EXIT_USAGE = 64
EXIT_IO = 74

# Constants of format version 1 (docs/FORMAT.md, "Constants").
MAGIC = b"LOCKBOX\x00"
FORMAT_VERSION = 1
PREFIX_BYTES = 16
CHECKSUM_BYTES = 32
MAX_HEADER_BYTES = 64 * 1024
VAULT_ID_BYTES = 16
MAX_SLOTS = 16
SLOT_PASSPHRASE = 1
SLOT_KEY_FILE = 2
SLOT_TPM2 = 3  # parsed and kept, never opened here: its secret is in a TPM
SLOT_KIND_NAMES = {SLOT_PASSPHRASE: "passphrase", SLOT_KEY_FILE: "key-file", SLOT_TPM2: "tpm2"}
MAX_SEALED_BYTES = 4096
SALT_BYTES = 16
NONCE_BYTES = 24
KEY_BYTES = 32
TAG_BYTES = 16
WRAPPED_KEY_BYTES = KEY_BYTES + TAG_BYTES
OPSLIMIT_RANGE = (1, 64)
MEMLIMIT_RANGE = (8 * 1024, 4 * 1024 * 1024 * 1024)
KEY_FILE_CONTEXT = b"lockbox.v1.keyfile-slot"
KEY_FILE_FINGERPRINT_CONTEXT = b"lockbox.v2.keyfile-fingerprint"  # docs/FORMAT.md section 18.1.1
FINGERPRINT_BYTES = 16
PAD_BLOCK = 256
MAX_FILE_BYTES = 1 << 30
ACCESS_ATTRIBUTE = "lockbox.access"
# FORMAT.md 7.1: an item's expiry and the bookkeeping of previous versions and companions.
EXPIRES_ATTRIBUTE = "lockbox.expires"
PREVIOUS_ATTRIBUTE = "lockbox.previous"
COMPANION_ATTRIBUTE = "lockbox.companion"
COMPANION_ID_ATTRIBUTE = "lockbox.companion-id"
TIMESTAMP_LIMIT_MS = 1 << 48


class FormatFailure(Exception):
    """A failure with the exit code that reports it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def corrupt(reason):
    return FormatFailure(EXIT_CORRUPT, f"the vault is corrupt or was tampered with ({reason})")


def blake2b(data, size, key=b""):
    return nacl_hash.blake2b(data, digest_size=size, key=key, encoder=encoding.RawEncoder)


def seal(plaintext, additional_data, nonce, key):
    return bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, additional_data, nonce, key)


def open_sealed(ciphertext, additional_data, nonce, key):
    """The plaintext, or None if it fails authentication."""
    try:
        return bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, additional_data, nonce, key)
    except exceptions.CryptoError:
        return None


class Reader:
    """Bounds-checked little-endian reads; running off the end is a format error."""

    def __init__(self, data, offset=0):
        self.data = data
        self.offset = offset

    @property
    def remaining(self):
        return len(self.data) - self.offset

    def bytes(self, count, what):
        if count < 0 or self.remaining < count:
            raise corrupt(f"truncated at {what}")
        chunk = self.data[self.offset:self.offset + count]
        self.offset += count
        return bytes(chunk)

    def _unpack(self, fmt, what):
        return struct.unpack(fmt, self.bytes(struct.calcsize(fmt), what))[0]

    def u8(self, what):
        return self._unpack("<B", what)

    def u16(self, what):
        return self._unpack("<H", what)

    def u32(self, what):
        return self._unpack("<I", what)

    def u64(self, what):
        return self._unpack("<Q", what)

    def i64(self, what):
        return self._unpack("<q", what)

    def string(self, what):
        length = self.u16(f"{what} length")
        raw = self.bytes(length, what)
        try:
            return raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise corrupt(f"{what} is not valid UTF-8")


def str16(text):
    raw = text.encode("utf-8")
    return struct.pack("<H", len(raw)) + raw


# ---------------------------------------------------------------------------
# Key slots (docs/FORMAT.md, "Key slots"). A slot is a dict: kind (SLOT_*), opslimit and
# memlimit (passphrase slots, else None), salt, sealed (TPM2 slots, else b""), nonce, wrapped_key.


def slot_parameter_bytes(slot):
    """kind || [opslimit || memlimit] || salt || [u16 length || sealed]: what the wrap
    authenticates besides the vault ID."""
    out = bytes([slot["kind"]])
    if slot["kind"] == SLOT_PASSPHRASE:
        out += struct.pack("<QQ", slot["opslimit"], slot["memlimit"])
    out += slot["salt"]
    if slot["kind"] == SLOT_TPM2:
        out += struct.pack("<H", len(slot["sealed"])) + slot["sealed"]
    return out


def key_file_fingerprint(key):
    """docs/FORMAT.md section 18.1.1: 16 bytes of BLAKE2b keyed with the 32-byte key file key."""
    return blake2b(KEY_FILE_FINGERPRINT_CONTEXT, FINGERPRINT_BYTES, key=key)


def encode_slot(slot):
    """type || u16 length || body, as the header stores a slot (a format-2 key-file slot with a
    "fingerprint" also records it, section 18.1.1)."""
    body = b""
    if slot["kind"] == SLOT_PASSPHRASE:
        body += struct.pack("<QQ", slot["opslimit"], slot["memlimit"])
    body += slot["salt"]
    if slot["kind"] == SLOT_TPM2:
        body += struct.pack("<H", len(slot["sealed"])) + slot["sealed"]
    body += slot["nonce"] + slot["wrapped_key"]
    if slot["kind"] == SLOT_KEY_FILE and slot.get("fingerprint"):
        body += slot["fingerprint"]
    return bytes([slot["kind"]]) + struct.pack("<H", len(body)) + body


def parse_slot(reader, index, fingerprints=False):
    """One slot; with `fingerprints` (a format-2 slot row), a key-file slot may end with its key
    file's fingerprint (section 18.1.1), kept as "fingerprint" (None when not recorded)."""
    kind = reader.u8(f"key slot {index} type")
    length = reader.u16(f"key slot {index} length")
    body = Reader(reader.bytes(length, f"key slot {index}"))
    if kind not in SLOT_KIND_NAMES:
        raise corrupt(f"key slot {index} has unknown type {kind}")
    slot = {"index": index, "kind": kind, "opslimit": None, "memlimit": None}
    if kind == SLOT_PASSPHRASE:
        opslimit = body.u64(f"key slot {index} Argon2id passes")
        memlimit = body.u64(f"key slot {index} Argon2id memory")
        if not (OPSLIMIT_RANGE[0] <= opslimit <= OPSLIMIT_RANGE[1]
                and MEMLIMIT_RANGE[0] <= memlimit <= MEMLIMIT_RANGE[1]):
            raise corrupt(f"key slot {index} asks for Argon2id parameters outside the accepted range")
        slot["opslimit"] = opslimit
        slot["memlimit"] = memlimit
    slot["salt"] = body.bytes(SALT_BYTES, f"key slot {index} salt")
    slot["sealed"] = b""
    if kind == SLOT_TPM2:
        sealed_length = body.u16(f"key slot {index} sealed length")
        if not (1 <= sealed_length <= MAX_SEALED_BYTES):
            raise corrupt(f"key slot {index} has an implausible sealed length {sealed_length}")
        slot["sealed"] = body.bytes(sealed_length, f"key slot {index} sealed data")
    slot["nonce"] = body.bytes(NONCE_BYTES, f"key slot {index} nonce")
    slot["wrapped_key"] = body.bytes(WRAPPED_KEY_BYTES, f"key slot {index} wrapped key")
    slot["fingerprint"] = None
    if fingerprints and kind == SLOT_KEY_FILE and body.remaining > 0:
        if body.remaining != FINGERPRINT_BYTES:
            raise corrupt(f"key slot {index} has a key-file fingerprint of {body.remaining} bytes, not {FINGERPRINT_BYTES}")
        slot["fingerprint"] = body.bytes(FINGERPRINT_BYTES, f"key slot {index} key-file fingerprint")
    if body.remaining != 0:
        raise corrupt(f"key slot {index} has {body.remaining} unexpected bytes")
    return slot


def derive_kek(slot, secret):
    """The slot's key-encryption key from a key file's 32 bytes or a passphrase's bytes."""
    if slot["kind"] == SLOT_KEY_FILE:
        return blake2b(KEY_FILE_CONTEXT + slot["salt"], KEY_BYTES, key=secret)
    if slot["kind"] != SLOT_PASSPHRASE:
        raise FormatFailure(EXIT_FAILURE, f"key slot {slot.get('index')} is a TPM2 slot; its secret is in a TPM")
    try:
        return pwhash.argon2id.kdf(KEY_BYTES, secret, slot["salt"], opslimit=slot["opslimit"], memlimit=slot["memlimit"])
    except (exceptions.RuntimeError, MemoryError, ValueError, exceptions.ValueError) as error:
        raise FormatFailure(EXIT_FAILURE, f"Argon2id could not run for key slot {slot.get('index')} "
                                          f"(t={slot['opslimit']}, m={slot['memlimit']} bytes): {error}")


def wrap(vault_id, slot, kek, data_key):
    """The slot's wrapped_key: the data key sealed under the KEK, vault ID and parameters as AD."""
    return seal(data_key, vault_id + slot_parameter_bytes(slot), slot["nonce"], kek)


def unwrap(vault_id, slot, kek):
    """The data key, or None if `kek` does not open `slot`."""
    key = open_sealed(slot["wrapped_key"], vault_id + slot_parameter_bytes(slot), slot["nonce"], kek)
    return key if key is not None and len(key) == KEY_BYTES else None


def open_data_key(vault_id, slots, credentials):
    """Tries each (kind, secret) credential, key files first, on each slot of its kind in slot
    order; returns (data key, slot index) or raises EXIT_WRONG_CREDENTIAL."""
    for kind, secret in sorted(credentials, key=lambda c: 0 if c[0] == SLOT_KEY_FILE else 1):
        for index, slot in enumerate(slots):
            if slot["kind"] != kind:
                continue
            key = unwrap(vault_id, slot, derive_kek(slot, secret))
            if key is not None:
                return key, index
    kinds = sorted({"passphrase" if k == SLOT_PASSPHRASE else "key file" for k, _ in credentials})
    raise FormatFailure(EXIT_WRONG_CREDENTIAL,
                        f"no key slot opened with the {' or '.join(kinds)} given (wrong credential, or a damaged key slot); "
                        f"the vault has {describe_slots(slots)}")


def describe_slots(slots):
    names = [{SLOT_PASSPHRASE: "passphrase", SLOT_KEY_FILE: "key-file", SLOT_TPM2: "tpm2 (needs the TPM; not opened here)"}[s["kind"]]
             for s in slots]
    return f"{len(names)} key slot(s): " + ", ".join(names)


def decode_key_file(raw):
    """Exactly 32 bytes: the key as is. Else 64 hex digits, optionally followed by "\\n", "\\r" or "\\r\\n"."""
    if len(raw) == KEY_BYTES:
        return raw
    text = raw
    if text.endswith(b"\n"):
        text = text[:-1]
    if text.endswith(b"\r"):
        text = text[:-1]
    if len(text) != 2 * KEY_BYTES or any(c not in b"0123456789abcdefABCDEF" for c in text):
        return None
    return bytes.fromhex(text.decode("ascii"))


# ---------------------------------------------------------------------------
# The header (docs/FORMAT.md, "The header" and "Reading order and errors")


def encode_header(vault_id, generation, slots, body_nonce, body_length):
    """The header bytes, checksum included."""
    fields = vault_id + struct.pack("<QB", generation, len(slots)) + b"".join(encode_slot(s) for s in slots)
    fields += body_nonce + struct.pack("<Q", body_length)
    header_length = PREFIX_BYTES + len(fields) + CHECKSUM_BYTES
    prefix = MAGIC + struct.pack("<HHI", FORMAT_VERSION, 0, header_length) + fields
    return prefix + blake2b(prefix, CHECKSUM_BYTES)


def parse_header(file):
    """Checks and parses the header at the start of `file`; returns (header dict, H)."""
    # 1. Magic.
    if len(file) < len(MAGIC) or file[:len(MAGIC)] != MAGIC:
        raise corrupt("the file is empty" if len(file) == 0 else "not a Lockbox vault (wrong magic bytes)")
    # 2. The stable prefix.
    prefix = Reader(file, len(MAGIC))
    version = prefix.u16("format version")
    flags = prefix.u16("flags")
    header_length = prefix.u32("header length")
    # 3. Header length bounds, then 4. truncation.
    if not (PREFIX_BYTES + CHECKSUM_BYTES <= header_length <= MAX_HEADER_BYTES):
        raise corrupt(f"implausible header length {header_length}")
    if len(file) < header_length:
        raise corrupt(f"truncated: the header needs {header_length} bytes, the file has {len(file)}")
    # 5. Checksum: unkeyed BLAKE2b-256 over the header up to the checksum.
    checked = bytes(file[:header_length - CHECKSUM_BYTES])
    stored = bytes(file[header_length - CHECKSUM_BYTES:header_length])
    if not bindings.sodium_memcmp(blake2b(checked, CHECKSUM_BYTES), stored):
        raise corrupt("the header checksum does not match")
    # 6. Version, 7. flags.
    if version != FORMAT_VERSION:
        raise FormatFailure(EXIT_UNSUPPORTED_VERSION,
                            f"the vault uses format version {version}; this decryptor reads only version {FORMAT_VERSION}")
    if flags != 0:
        raise corrupt(f"unknown header flags {flags}")
    # 8. The version-1 fields, read from the checksummed part only.
    fields = Reader(checked, PREFIX_BYTES)
    vault_id = fields.bytes(VAULT_ID_BYTES, "vault ID")
    generation = fields.u64("generation")
    slot_count = fields.u8("slot count")
    if not (1 <= slot_count <= MAX_SLOTS):
        raise corrupt(f"implausible slot count {slot_count}")
    slots = [parse_slot(fields, index) for index in range(slot_count)]
    body_nonce = fields.bytes(NONCE_BYTES, "body nonce")
    body_length = fields.u64("body length")
    if fields.remaining != 0:
        raise corrupt(f"{fields.remaining} unexpected bytes in the header")
    if body_length < TAG_BYTES:
        raise corrupt(f"implausible body length {body_length}")
    expected = header_length + body_length  # Python integers do not overflow
    if len(file) < expected:
        raise corrupt(f"truncated: expected {expected} bytes, the file has {len(file)}")
    if len(file) > expected:
        raise corrupt(f"{len(file) - expected} unexpected bytes after the encrypted body")
    header = {
        "version": version,
        "vault_id": vault_id,
        "generation": generation,
        "slots": slots,
        "body_nonce": body_nonce,
        "body_length": body_length,
    }
    return header, header_length


def open_body(file, header, header_length, data_key):
    """The decrypted (still padded) body, or EXIT_CORRUPT."""
    plaintext = open_sealed(bytes(file[header_length:]), bytes(file[:header_length]), header["body_nonce"], data_key)
    if plaintext is None:
        raise corrupt("the encrypted contents failed authentication")
    return plaintext


# ---------------------------------------------------------------------------
# The payload (docs/FORMAT.md, "The payload"). An item is a dict: service, account, kind, label,
# created_ms, modified_ms, attributes (the caller's), access ("always" or
# "fresh-authentication"), secret (bytes).


def pad(data, block=PAD_BLOCK):
    """sodium_pad: 0x80 then zeros up to a multiple of the block size; always adds at least one byte."""
    padded_len = (len(data) // block + 1) * block
    return data + b"\x80" + b"\x00" * (padded_len - len(data) - 1)


def unpad(padded, block=PAD_BLOCK):
    """sodium_unpad: the 0x80 marker must lie within the last block, followed only by zero
    bytes; the buffer must be at least one block long. None if not."""
    if len(padded) < block:
        return None
    for back in range(block):
        byte = padded[len(padded) - 1 - back]
        if byte == 0x80:
            return padded[:len(padded) - 1 - back]
        if byte != 0x00:
            return None
    return None


def encode_payload(items):
    """The unpadded payload. Writers sort by (service, account) and attributes by name; for NFC
    strings, Swift's String order is UTF-8 byte order."""
    out = struct.pack("<I", len(items))
    for it in sorted(items, key=lambda i: (i["service"].encode(), i["account"].encode())):
        out += encode_metadata(it) + struct.pack("<I", len(it["secret"])) + it["secret"]
    return out


def encode_metadata(it):
    """One item of section 7.1 up to (not including) its secret length; format 2's M (section 18.3)."""
    attrs = dict(it["attributes"])
    if it["access"] != "always":
        attrs[ACCESS_ATTRIBUTE] = it["access"]
    if it.get("expires_ms") is not None:
        attrs[EXPIRES_ATTRIBUTE] = str(it["expires_ms"])
    for name, field in ((PREVIOUS_ATTRIBUTE, "previous_id"), (COMPANION_ATTRIBUTE, "companion"),
                        (COMPANION_ID_ATTRIBUTE, "companion_id")):
        if it.get(field) is not None:
            attrs[name] = it[field]
    out = str16(it["service"]) + str16(it["account"]) + str16(it["kind"]) + str16(it["label"])
    out += struct.pack("<qq", it["created_ms"], it["modified_ms"])
    out += struct.pack("<H", len(attrs))
    for name in sorted(attrs, key=lambda n: n.encode()):
        out += str16(name) + str16(attrs[name])
    return out


def parse_payload(plaintext, normalize):
    """The items of a decrypted body. `normalize` maps a name to the form addresses and
    attribute names are compared in (NFC)."""
    unpadded = unpad(plaintext)
    if unpadded is None:
        raise corrupt("bad padding in the decrypted body")
    reader = Reader(unpadded)
    count = reader.u32("item count")
    items = []
    seen = set()
    for index in range(count):
        item = parse_metadata(reader, index, normalize)
        secret_length = reader.u32(f"item {index} secret length")
        item["secret"] = reader.bytes(secret_length, f"item {index} secret")
        address = (normalize(item["service"]), normalize(item["account"]))
        if address in seen:
            raise corrupt(f"item {index} duplicates an earlier item's address")
        seen.add(address)
        items.append(item)
    if reader.remaining != 0:
        raise corrupt(f"{reader.remaining} unexpected bytes after the items")
    return items


def parse_metadata(reader, index, normalize):
    """One item of section 7.1 up to (not including) its secret length: a dict without "secret"."""
    service = reader.string(f"item {index} service")
    account = reader.string(f"item {index} account")
    kind = reader.string(f"item {index} kind")
    label = reader.string(f"item {index} label")
    created = reader.i64(f"item {index} creation time")
    modified = reader.i64(f"item {index} modification time")
    attribute_count = reader.u16(f"item {index} attribute count")
    attributes = {}
    for _ in range(attribute_count):
        name = reader.string(f"item {index} attribute name")
        value = reader.string(f"item {index} attribute value")
        # Lockbox keeps the last of repeated (canonically equivalent) names; so do we.
        for existing in [n for n in attributes if normalize(n) == normalize(name)]:
            del attributes[existing]
        attributes[name] = value
    # FORMAT.md 7.1: lockbox.access is absent or fresh-authentication; anything else is corrupt.
    if attributes.get(ACCESS_ATTRIBUTE, "fresh-authentication") != "fresh-authentication":
        raise corrupt(f"item {index} has an unknown access policy")
    item = {"service": service, "account": account, "kind": kind, "label": label,
            "created_ms": created, "modified_ms": modified, "attributes": attributes}
    # lockbox.expires: a decimal integer of milliseconds within +-2^48; the IDs 1-64 lower-case
    # hex digits; the companion role not empty. Anything else is corrupt, as Lockbox reads it.
    expires = attributes.get(EXPIRES_ATTRIBUTE)
    if expires is not None:
        if not re.fullmatch(r"-?[0-9]{1,19}", expires) or abs(int(expires)) > TIMESTAMP_LIMIT_MS:
            raise corrupt(f"item {index} has a malformed {EXPIRES_ATTRIBUTE}")
        item["expires_ms"] = int(expires)
    for name, field in ((PREVIOUS_ATTRIBUTE, "previous_id"), (COMPANION_ID_ATTRIBUTE, "companion_id")):
        value = attributes.get(name)
        if value is not None:
            if not re.fullmatch(r"[0-9a-f]{1,64}", value):
                raise corrupt(f"item {index} has a malformed {name}")
            item[field] = value
    companion = attributes.get(COMPANION_ATTRIBUTE)
    if companion is not None:
        if companion == "":
            raise corrupt(f"item {index} has a malformed {COMPANION_ATTRIBUTE}")
        item["companion"] = companion
    return item


def previous_version(items, item, now_ms):
    """The companion holding `item`'s previous version (FORMAT.md 7.1) if it is still readable at
    `now_ms`, else None: same service, account "lockbox.previous:" + account, companion role
    "previous", companion ID equal to the item's lockbox.previous, expiry after now."""
    wanted = item.get("previous_id")
    if wanted is None:
        return None
    for other in items:
        if (other["service"] == item["service"] and other["account"] == "lockbox.previous:" + item["account"]
                and other.get("companion") == "previous" and other.get("companion_id") == wanted
                and other.get("expires_ms") is not None and other["expires_ms"] > now_ms):
            return other
    return None


def encode_file(vault_id, generation, slots, body_nonce, data_key, items):
    """A whole format-1 vault file: (header, body ciphertext, padded plaintext)."""
    plain = pad(encode_payload(items))
    header = encode_header(vault_id, generation, slots, body_nonce, len(plain) + TAG_BYTES)
    return header, seal(plain, header, body_nonce, data_key), plain


# ---------------------------------------------------------------------------
# Format 2: sealed rows in SQLite (docs/FORMAT.md section 18)

SQLITE_MAGIC = b"SQLite format 3\x00"
V2_APPLICATION_ID = 0x4C4B4258
V2_FORMAT_VERSION = 2


def is_sqlite(file_start):
    return file_start[:len(SQLITE_MAGIC)] == SQLITE_MAGIC


def v2_keys(data_key):
    """(K_addr, K_row, key_check) of section 18.2."""
    return tuple(blake2b(context, KEY_BYTES, key=data_key)
                 for context in (b"lockbox.v2.address-key", b"lockbox.v2.row-key", b"lockbox.v2.key-check"))


def v2_address(address_key, service, account, normalize):
    message = b""
    for name in (service, account):
        raw = normalize(name).encode("utf-8")
        message += struct.pack("<H", len(raw)) + raw
    return blake2b(message, KEY_BYTES, key=address_key)


def v2_additional_data(context, vault_id, address, extra=b""):
    return context + vault_id + struct.pack("<H", V2_FORMAT_VERSION) + address + extra


def v2_seal_row(keys, vault_id, item, metadata_nonce, secret_nonce, normalize):
    """The row of one item (section 18.3) with the nonces given: a dict of the address, both columns
    and what went into them (plaintext M, AD_m, AD_s)."""
    address_key, row_key, _ = keys
    address = v2_address(address_key, item["service"], item["account"], normalize)
    plain = encode_metadata(item)
    ad_m = v2_additional_data(b"lockbox.v2.metadata", vault_id, address)
    metadata = metadata_nonce + seal(plain, ad_m, metadata_nonce, row_key)
    ad_s = v2_additional_data(b"lockbox.v2.secret", vault_id, address, metadata_nonce)
    secret = secret_nonce + seal(item["secret"], ad_s, secret_nonce, row_key)
    return {"address": address, "metadata_plaintext": plain, "metadata_additional_data": ad_m, "metadata": metadata,
            "secret_additional_data": ad_s, "secret": secret}


def v2_open_column(row_key, column, additional_data, what):
    if len(column) < NONCE_BYTES + TAG_BYTES:
        raise corrupt(f"an item's {what} failed authentication")
    plaintext = open_sealed(column[NONCE_BYTES:], additional_data, column[:NONCE_BYTES], row_key)
    if plaintext is None:
        raise corrupt(f"an item's {what} failed authentication")
    return plaintext


def v2_open_item(keys, vault_id, address, metadata, secret, normalize):
    """The item of one row (section 18.3), secret included."""
    address_key, row_key, _ = keys
    plain = v2_open_column(row_key, metadata, v2_additional_data(b"lockbox.v2.metadata", vault_id, address), "metadata")
    reader = Reader(plain)
    item = parse_metadata(reader, 0, normalize)
    if reader.remaining != 0:
        raise corrupt(f"{reader.remaining} unexpected bytes after an item's metadata")
    if not bindings.sodium_memcmp(v2_address(address_key, item["service"], item["account"], normalize), address):
        raise corrupt("an item's names do not match its address")
    item["secret"] = v2_open_column(
        row_key, secret, v2_additional_data(b"lockbox.v2.secret", vault_id, address, metadata[:NONCE_BYTES]), "secret")
    return item


def v2_read(path):
    """The vault row, the key slots and the item rows of a format-2 vault, read with Python's sqlite3
    (read-only): (vault_id, key_check, slots, rows of (address, metadata, secret))."""
    import sqlite3
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise corrupt(f"SQLite cannot open it: {error}")
    try:
        if db.execute("PRAGMA application_id").fetchone()[0] != V2_APPLICATION_ID:
            raise corrupt("a SQLite database that is not a Lockbox vault")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != V2_FORMAT_VERSION:
            raise FormatFailure(EXIT_UNSUPPORTED_VERSION, f"the vault uses format version {version}; this decryptor reads versions 1 and 2")
        row = db.execute("SELECT format_version, vault_id, key_check FROM vault WHERE singleton = 1").fetchone()
        if row is None or row[0] != V2_FORMAT_VERSION or len(row[1]) != VAULT_ID_BYTES or len(row[2]) != KEY_BYTES:
            raise corrupt("the vault row is missing or malformed")
        slots = []
        for (blob,) in db.execute("SELECT slot FROM key_slots ORDER BY slot_id"):
            reader = Reader(bytes(blob))
            slot = parse_slot(reader, len(slots), fingerprints=True)
            if reader.remaining != 0:
                raise corrupt(f"key slot {len(slots)} has unexpected bytes after it")
            slots.append(slot)
        if not (1 <= len(slots) <= MAX_SLOTS):
            raise corrupt(f"implausible slot count {len(slots)}")
        rows = [(bytes(a), bytes(m), bytes(s)) for a, m, s in db.execute("SELECT address, metadata, secret FROM items")]
        return bytes(row[1]), bytes(row[2]), slots, rows
    except sqlite3.DatabaseError as error:
        raise corrupt(f"the database is damaged (SQLite: {error})")
    finally:
        db.close()
