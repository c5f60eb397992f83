#!/usr/bin/env python3
"""Decrypt a Lockbox vault (format version 1, or 2: docs/FORMAT.md section 18) without Lockbox.

Built on scripts/format/lockbox_format.py, the project's independent implementation of
docs/FORMAT.md, written from that document and using only PyNaCl
(`pip install pynacl`). It reads the vault, checks the header
in the order the format prescribes, opens a key slot with a key file or a
passphrase, decrypts the body and prints the items as JSON on standard output,
secrets base64-encoded.

    scripts/format/vault-decrypt.py VAULT --key-file PATH
    scripts/format/vault-decrypt.py VAULT --passphrase-fd 3 3<passphrase.txt
    scripts/format/vault-decrypt.py VAULT --header-only

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
import sys
import unicodedata

try:
    import lockbox_format as fmt  # scripts/format/lockbox_format.py: the format itself
    from lockbox_format import (EXIT_FAILURE, EXIT_INVALID_KEY_FILE, EXIT_IO, EXIT_USAGE, EXIT_VAULT_NOT_FOUND,
                                FormatFailure as Failure, corrupt)
except ImportError as missing:
    print(f"vault-decrypt: error: {missing}; PyNaCl is needed: `python3 -m pip install pynacl`", file=sys.stderr)
    sys.exit(1)

MAX_PASSPHRASE_BYTES = 4096
MAX_KEY_FILE_BYTES = 4096


def item_json(item):
    """An item as this script prints it."""
    shown = {
        "service": item["service"],
        "account": item["account"],
        "kind": item["kind"],
        "label": item["label"],
        "created_ms": item["created_ms"],
        "modified_ms": item["modified_ms"],
        "created": iso_ms(item["created_ms"]),
        "modified": iso_ms(item["modified_ms"]),
        "attributes": dict(sorted(item["attributes"].items())),
        "secret_base64": base64.b64encode(item["secret"]).decode("ascii"),
    }
    # FORMAT.md 7.1: the expiry, and what a companion item (a previous version, a refresh
    # token) is to the item it belongs to.
    if "expires_ms" in item:
        shown["expires_ms"] = item["expires_ms"]
        shown["expires"] = iso_ms(item["expires_ms"])
    for field in ("previous_id", "companion", "companion_id"):
        if field in item:
            shown[field] = item[field]
    return shown


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
    key = fmt.decode_key_file(raw)
    if key is None:
        raise Failure(EXIT_INVALID_KEY_FILE,
                      f"cannot use key file {path}: expected 32 raw bytes or 64 hexadecimal digits, "
                      f"found {len(raw)} bytes of something else")
    return key


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
            if total > fmt.MAX_FILE_BYTES:
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
    if slot["kind"] == fmt.SLOT_PASSPHRASE:
        return {"index": slot["index"], "kind": "passphrase",
                "opslimit": slot["opslimit"], "memlimit": slot["memlimit"]}
    summary = {"index": slot["index"], "kind": fmt.SLOT_KIND_NAMES[slot["kind"]]}
    if slot["kind"] == fmt.SLOT_KEY_FILE:
        # Format 2 may record the key file's fingerprint (docs/FORMAT.md 18.1.1): a label, not authenticated.
        summary["key_file_fingerprint"] = slot["fingerprint"].hex() if slot.get("fingerprint") else None
    return summary


def check_fingerprint(result, slots, opened, credentials):
    """When a key file opened the vault: its fingerprint (docs/FORMAT.md 18.1.1) as
    "opened_key_file_fingerprint", and a warning if the slot that opened records another one."""
    if slots[opened]["kind"] != fmt.SLOT_KEY_FILE:
        return
    key = next(secret for kind, secret in credentials if kind == fmt.SLOT_KEY_FILE)
    fingerprint = fmt.key_file_fingerprint(key)
    result["opened_key_file_fingerprint"] = fingerprint.hex()
    recorded = slots[opened].get("fingerprint")
    if recorded and recorded != fingerprint:
        warn(f"key slot {opened} records a fingerprint that is not its key file's: {recorded.hex()}, "
             f"the key file's is {fingerprint.hex()}")


def read_credentials(arguments):
    credentials = []
    if arguments.key_file is not None:
        credentials.append((fmt.SLOT_KEY_FILE, read_key_file(arguments.key_file)))
    if arguments.passphrase_fd is not None:
        credentials.append((fmt.SLOT_PASSPHRASE, read_passphrase(arguments.passphrase_fd)))
    return credentials


def run(arguments):
    file = read_vault(arguments.vault)
    if fmt.is_sqlite(file):
        return run_format2(arguments)
    header, header_length = fmt.parse_header(file)
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
    credentials = read_credentials(arguments)
    data_key, opened = fmt.open_data_key(header["vault_id"], header["slots"], credentials)
    plaintext = fmt.open_body(file, header, header_length, data_key)
    result["opened_slot"] = opened
    check_fingerprint(result, header["slots"], opened, credentials)
    result["items"] = [item_json(item) for item in fmt.parse_payload(plaintext, nfc)]
    return result


def run_format2(arguments):
    """docs/FORMAT.md section 18: the vault row, the slot rows, then each item row."""
    vault_id, key_check, slots, rows = fmt.v2_read(arguments.vault)
    for index, slot in enumerate(slots):
        slot["index"] = index
    result = {
        "format_version": fmt.V2_FORMAT_VERSION,
        "vault_id": vault_id.hex(),
        "item_count": len(rows),
        "key_slots": [slot_summary(slot) for slot in slots],
    }
    if arguments.header_only:
        return result
    credentials = read_credentials(arguments)
    data_key, opened = fmt.open_data_key(vault_id, slots, credentials)
    keys = fmt.v2_keys(data_key)
    if not fmt.bindings.sodium_memcmp(keys[2], key_check):
        raise corrupt("the key check does not match the data key the key slots hold")
    items = [fmt.v2_open_item(keys, vault_id, address, metadata, secret, nfc) for address, metadata, secret in rows]
    items.sort(key=lambda i: (nfc(i["service"]).encode(), nfc(i["account"]).encode()))
    result["opened_slot"] = opened
    check_fingerprint(result, slots, opened, credentials)
    result["items"] = [item_json(item) for item in items]
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="vault-decrypt.py",
        description="Decrypt a Lockbox vault (format version 1 or 2) and print its items as JSON, secrets base64-encoded.")
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
