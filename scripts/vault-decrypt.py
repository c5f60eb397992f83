#!/usr/bin/env python3
"""Decrypt a Lockbox vault (format version 1) without Lockbox.

An independent implementation of docs/FORMAT.md, written from that document and
using only PyNaCl (`pip install pynacl`). It reads the vault, checks the header
in the order the format prescribes, opens a key slot with a key file or a
passphrase, decrypts the body and prints the items as JSON on standard output,
secrets base64-encoded.

    scripts/vault-decrypt.py VAULT --key-file PATH
    scripts/vault-decrypt.py VAULT --passphrase-fd 3 3<passphrase.txt
    scripts/vault-decrypt.py VAULT --header-only

Exit codes follow the lockbox CLI's where they overlap: 0 ok, 1 unexpected
failure, 3 no vault file, 5 no key slot opened (wrong passphrase or key file),
6 corrupt or tampered vault, 7 unsupported format version, 11 unusable key
file, 64 usage error, 74 I/O error. Every failure prints one line
"vault-decrypt: error: ..." on standard error and nothing on standard output.

The output decrypts secrets: it is as sensitive as the vault's key. Pipe it
somewhere safe.
"""

import argparse
import base64
import datetime
import json
import os
import stat
import struct
import sys
import unicodedata

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
MAX_SEALED_BYTES = 4096
SALT_BYTES = 16
NONCE_BYTES = 24
KEY_BYTES = 32
TAG_BYTES = 16
WRAPPED_KEY_BYTES = KEY_BYTES + TAG_BYTES
OPSLIMIT_RANGE = (1, 64)
MEMLIMIT_RANGE = (8 * 1024, 4 * 1024 * 1024 * 1024)
KEY_FILE_CONTEXT = b"lockbox.v1.keyfile-slot"
PAD_BLOCK = 256
MAX_FILE_BYTES = 1 << 30
MAX_PASSPHRASE_BYTES = 4096
MAX_KEY_FILE_BYTES = 4096


class Failure(Exception):
    """A failure with the exit code that reports it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def corrupt(reason):
    return Failure(EXIT_CORRUPT, f"the vault is corrupt or was tampered with ({reason})")


def load_nacl():
    try:
        import nacl.bindings
        import nacl.encoding
        import nacl.exceptions
        import nacl.hash
        import nacl.pwhash.argon2id
    except ImportError:
        raise Failure(EXIT_FAILURE, "PyNaCl is not installed; install it with `python3 -m pip install pynacl`")
    return nacl


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


# ---------------------------------------------------------------------------
# Header (docs/FORMAT.md, "The header" and "Reading order and errors")


def parse_header(nacl, file):
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
    computed = nacl.hash.blake2b(checked, digest_size=CHECKSUM_BYTES, encoder=nacl.encoding.RawEncoder)
    if not nacl.bindings.sodium_memcmp(computed, stored):
        raise corrupt("the header checksum does not match")
    # 6. Version, 7. flags.
    if version != FORMAT_VERSION:
        raise Failure(EXIT_UNSUPPORTED_VERSION,
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


def parse_slot(reader, index):
    kind = reader.u8(f"key slot {index} type")
    length = reader.u16(f"key slot {index} length")
    body = Reader(reader.bytes(length, f"key slot {index}"))
    if kind not in (SLOT_PASSPHRASE, SLOT_KEY_FILE, SLOT_TPM2):
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
    if body.remaining != 0:
        raise corrupt(f"key slot {index} has {body.remaining} unexpected bytes")
    return slot


# ---------------------------------------------------------------------------
# Key slots (docs/FORMAT.md, "Key slots")


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


def derive_kek(nacl, slot, secret):
    if slot["kind"] == SLOT_KEY_FILE:
        return nacl.hash.blake2b(KEY_FILE_CONTEXT + slot["salt"], digest_size=KEY_BYTES, key=secret,
                                 encoder=nacl.encoding.RawEncoder)
    try:
        return nacl.pwhash.argon2id.kdf(KEY_BYTES, secret, slot["salt"],
                                        opslimit=slot["opslimit"], memlimit=slot["memlimit"])
    except (nacl.exceptions.RuntimeError, MemoryError, ValueError, nacl.exceptions.ValueError) as error:
        raise Failure(EXIT_FAILURE, f"Argon2id could not run for key slot {slot['index']} "
                                    f"(t={slot['opslimit']}, m={slot['memlimit']} bytes): {error}")


def unwrap(nacl, header, slot, kek):
    """The data key, or None if `kek` does not open `slot`."""
    ad = header["vault_id"] + slot_parameter_bytes(slot)
    try:
        key = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(slot["wrapped_key"], ad, slot["nonce"], kek)
    except nacl.exceptions.CryptoError:
        return None
    return key if len(key) == KEY_BYTES else None


def open_data_key(nacl, header, credentials):
    """Tries each credential (key files first) on each slot of its kind, in slot order."""
    for kind, secret in sorted(credentials, key=lambda c: 0 if c[0] == SLOT_KEY_FILE else 1):
        for slot in header["slots"]:
            if slot["kind"] != kind:
                continue
            key = unwrap(nacl, header, slot, derive_kek(nacl, slot, secret))
            if key is not None:
                return key, slot["index"]
    kinds = sorted({"passphrase" if k == SLOT_PASSPHRASE else "key file" for k, _ in credentials})
    raise Failure(EXIT_WRONG_CREDENTIAL,
                  f"no key slot opened with the {' or '.join(kinds)} given (wrong credential, or a damaged key slot); "
                  f"the vault has {describe_slots(header)}")


def describe_slots(header):
    names = [{SLOT_PASSPHRASE: "passphrase", SLOT_KEY_FILE: "key-file", SLOT_TPM2: "tpm2 (needs the TPM; not opened here)"}[s["kind"]]
             for s in header["slots"]]
    return f"{len(names)} key slot(s): " + ", ".join(names)


# ---------------------------------------------------------------------------
# Body and payload (docs/FORMAT.md, "The body" and "The payload")


def iso7816_unpad(padded):
    """libsodium sodium_unpad with a 256-byte block: the 0x80 marker must lie within the last
    256 bytes, followed only by zero bytes; the buffer must be at least 256 bytes long."""
    if len(padded) < PAD_BLOCK:
        return None
    for back in range(PAD_BLOCK):
        byte = padded[len(padded) - 1 - back]
        if byte == 0x80:
            return padded[:len(padded) - 1 - back]
        if byte != 0x00:
            return None
    return None


def parse_payload(plaintext):
    unpadded = iso7816_unpad(plaintext)
    if unpadded is None:
        raise corrupt("bad padding in the decrypted body")
    reader = Reader(unpadded)
    count = reader.u32("item count")
    items = []
    seen = set()
    for index in range(count):
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
            for existing in [n for n in attributes if nfc(n) == nfc(name)]:
                del attributes[existing]
            attributes[name] = value
        secret_length = reader.u32(f"item {index} secret length")
        secret = reader.bytes(secret_length, f"item {index} secret")
        # FORMAT.md 7.1: lockbox.access is absent or fresh-authentication; anything else is corrupt.
        if attributes.get("lockbox.access", "fresh-authentication") != "fresh-authentication":
            raise corrupt(f"item {index} has an unknown access policy")
        address = (nfc(service), nfc(account))
        if address in seen:
            raise corrupt(f"item {index} duplicates an earlier item's address")
        seen.add(address)
        items.append({
            "service": service,
            "account": account,
            "kind": kind,
            "label": label,
            "created_ms": created,
            "modified_ms": modified,
            "created": iso_ms(created),
            "modified": iso_ms(modified),
            "attributes": dict(sorted(attributes.items())),
            "secret_base64": base64.b64encode(secret).decode("ascii"),
        })
    if reader.remaining != 0:
        raise corrupt(f"{reader.remaining} unexpected bytes after the items")
    return items


def nfc(text):
    return unicodedata.normalize("NFC", text)


def iso_ms(milliseconds):
    """Milliseconds since the Unix epoch as 2026-01-02T03:04:05.678Z (None if out of range)."""
    try:
        moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) \
            + datetime.timedelta(milliseconds=milliseconds)
    except OverflowError:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------------------
# Credentials and the file (docs/FORMAT.md, "Key files", "Passphrases", "Files")


def read_key_file(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Failure(EXIT_INVALID_KEY_FILE, f"cannot use key file {path}: no such file")
    except OSError as error:
        raise Failure(EXIT_IO, f"reading the key file {path} failed: {error.strerror}")
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_IMODE(mode) & 0o077:
            warn(f"key file {path} is accessible by group or others (mode {stat.S_IMODE(mode):04o}); "
                 "Lockbox itself refuses such a key file")
        raw = b""
        while len(raw) <= MAX_KEY_FILE_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            raw += chunk
    except OSError as error:
        raise Failure(EXIT_IO, f"reading the key file {path} failed: {error.strerror}")
    finally:
        os.close(fd)
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise Failure(EXIT_INVALID_KEY_FILE, f"cannot use key file {path}: larger than a key file can be")
    key = decode_key_file(raw)
    if key is None:
        raise Failure(EXIT_INVALID_KEY_FILE,
                      f"cannot use key file {path}: expected 32 raw bytes or 64 hexadecimal digits, "
                      f"found {len(raw)} bytes of something else")
    return key


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


def read_passphrase(fd):
    """Up to and including the first newline (at most 4096 bytes), minus one "\\n" or "\\r\\n"."""
    data = bytearray()
    try:
        while len(data) <= MAX_PASSPHRASE_BYTES:
            byte = os.read(fd, 1)
            if not byte:
                break
            data += byte
            if byte == b"\n":
                break
    except OSError as error:
        raise Failure(EXIT_USAGE, f"cannot read the passphrase from file descriptor {fd}: {error.strerror}")
    if len(data) > MAX_PASSPHRASE_BYTES:
        raise Failure(EXIT_USAGE, f"the passphrase is longer than {MAX_PASSPHRASE_BYTES} bytes")
    if data.endswith(b"\n"):
        del data[-1]
        if data.endswith(b"\r"):
            del data[-1]
    if not data:
        raise Failure(EXIT_USAGE, f"file descriptor {fd} gave an empty passphrase")
    return bytes(data)


def read_vault(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Failure(EXIT_VAULT_NOT_FOUND, f"no vault at {path}")
    except OSError as error:
        raise Failure(EXIT_IO, f"opening the vault {path} failed: {error.strerror}")
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise Failure(EXIT_USAGE, f"{path} is not a regular file, so it cannot be a vault")
        if stat.S_IMODE(status.st_mode) & 0o077:
            warn(f"the vault {path} is accessible by group or others (mode {stat.S_IMODE(status.st_mode):04o}); "
                 "Lockbox itself refuses to open it")
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_FILE_BYTES:
                raise corrupt("larger than the 1 GiB a vault can be")
            chunks.append(chunk)
    except OSError as error:
        raise Failure(EXIT_IO, f"reading the vault {path} failed: {error.strerror}")
    finally:
        os.close(fd)
    return b"".join(chunks)


def warn(message):
    print(f"vault-decrypt: warning: {message}", file=sys.stderr)


def slot_summary(slot):
    if slot["kind"] == SLOT_PASSPHRASE:
        return {"index": slot["index"], "kind": "passphrase",
                "opslimit": slot["opslimit"], "memlimit": slot["memlimit"]}
    return {"index": slot["index"], "kind": "key-file"}


def run(arguments):
    nacl = load_nacl()
    file = read_vault(arguments.vault)
    header, header_length = parse_header(nacl, file)
    result = {
        "format_version": header["version"],
        "vault_id": header["vault_id"].hex(),
        "generation": header["generation"],
        "header_length": header_length,
        "body_length": header["body_length"],
        "key_slots": [slot_summary(slot) for slot in header["slots"]],
    }
    if arguments.header_only:
        return result

    credentials = []
    if arguments.key_file is not None:
        credentials.append((SLOT_KEY_FILE, read_key_file(arguments.key_file)))
    if arguments.passphrase_fd is not None:
        credentials.append((SLOT_PASSPHRASE, read_passphrase(arguments.passphrase_fd)))
    data_key, opened = open_data_key(nacl, header, credentials)

    try:
        plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            bytes(file[header_length:]), bytes(file[:header_length]), header["body_nonce"], data_key)
    except nacl.exceptions.CryptoError:
        raise corrupt("the encrypted contents failed authentication")
    result["opened_slot"] = opened
    result["items"] = parse_payload(plaintext)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="vault-decrypt.py",
        description="Decrypt a Lockbox vault (format version 1) and print its items as JSON, secrets base64-encoded.")
    parser.add_argument("vault", help="the vault file")
    parser.add_argument("--key-file", metavar="PATH", help="a key file (32 raw bytes, or 64 hex digits)")
    parser.add_argument("--passphrase-fd", metavar="N", type=int,
                        help="read the passphrase from this open file descriptor, up to the first newline")
    parser.add_argument("--header-only", action="store_true",
                        help="check and print the header only; needs no credential")

    class UsageExit(Exception):
        pass

    def usage_error(message):
        parser.print_usage(sys.stderr)
        print(f"vault-decrypt: error: {message}", file=sys.stderr)
        raise UsageExit()

    parser.error = usage_error
    try:
        arguments = parser.parse_args(argv)
        if not arguments.header_only and arguments.key_file is None and arguments.passphrase_fd is None:
            usage_error("give --key-file PATH or --passphrase-fd N (or --header-only)")
    except UsageExit:
        return EXIT_USAGE

    try:
        result = run(arguments)
    except Failure as failure:
        print(f"vault-decrypt: error: {arguments.vault}: {failure.message}", file=sys.stderr)
        return failure.code
    except Exception as error:  # a bug here, not in the vault: say so plainly
        print(f"vault-decrypt: error: unexpected {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    sys.stdout.buffer.write((json.dumps(result, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
