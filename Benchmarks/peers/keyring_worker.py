"""Python keyring in-process worker for scripts/bench/bench-peers.sh.

Creates one keyring backend object once (untimed), then serves operations read from stdin,
one per line, timing each backend call alone with time.perf_counter_ns():

    set<TAB>SERVICE<TAB>ACCOUNT<TAB>SECRET     (the secret arrives on the pipe, never in argv)
    get<TAB>SERVICE<TAB>ACCOUNT
    delete<TAB>SERVICE<TAB>ACCOUNT

Each gets one line back: ``ok<TAB>NANOSECONDS<TAB>VALUE`` (VALUE: the secret for get, empty
otherwise) or ``err<TAB>MESSAGE``. Same protocol as LockboxWorker/main.swift.

Usage: python keyring_worker.py secretservice
       python keyring_worker.py cryptfile      (first stdin line: the keyring's password,
                                                set in-process as keyring_key: one Argon2id
                                                unlock, untimed)

Setup helpers for keyrings.cryptfile (password on the first stdin line, file under
$XDG_DATA_HOME/python_keyring/ as the library places it):
       python keyring_worker.py fsync-baseline FOLDER
                                               (no keyring: each set/delete atomically replaces
                                                one small file, with an fsync of the file and of
                                                the folder, as a durable store must; get reads it.
                                                The floor under any store that survives a crash.)
       python keyring_worker.py init-cryptfile             create the keyring file
       python keyring_worker.py fill-cryptfile SERVICE N   add N items user-00000... to SERVICE
"""

import sys
import time


def random_token(n: int = 40) -> str:
    import secrets
    import string

    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


def init_cryptfile() -> int:
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    kr = CryptFileKeyring()
    kr.keyring_key = sys.stdin.readline().rstrip("\n")  # no file yet: creates it
    return 0


def fill_cryptfile(service: str, count: int) -> int:
    """Adds `count` items quickly, in the library's own format.

    keyrings.cryptfile runs Argon2id (t=15, 64 MiB) with a fresh random salt for every item it
    encrypts, so 1,000 set_password calls take many minutes. Here its own `encrypt` runs with
    one salt for all the new items, so Argon2id runs once; each item still gets its own nonce,
    its associated data and the exact layout set_password writes, and reading any of them
    later costs a full Argon2id run as usual. The file is written once at the end.
    """
    import configparser
    import functools
    import types

    import argon2.low_level
    import keyrings.cryptfile.cryptfile as cryptfile_module
    from keyrings.cryptfile.cryptfile import CryptFileKeyring
    from keyrings.cryptfile.escape import escape as escape_for_ini
    from keyrings.cryptfile.file_base import encodebytes

    password = sys.stdin.readline().rstrip("\n")
    kr = CryptFileKeyring()
    kr.keyring_key = password  # existing file: checks the password (one Argon2id run)

    real_hash = argon2.low_level.hash_secret_raw
    real_os = cryptfile_module.os
    salt = real_os.urandom(16)
    argon2.low_level.hash_secret_raw = functools.lru_cache(maxsize=4)(real_hash)
    cryptfile_module.os = types.SimpleNamespace(urandom=lambda n: salt[:n])
    expected = {}
    try:
        config = configparser.RawConfigParser()
        config.read(kr.file_path)
        kr._check_version(config)
        section = escape_for_ini(service)
        if not config.has_section(section):
            config.add_section(section)
        for i in range(count):
            account = f"user-{i:05d}"
            secret = random_token()
            if i in (0, count - 1):
                expected[account] = secret
            encrypted = kr.encrypt(secret.encode("utf-8"), kr._generate_assoc(service, account))
            # exactly what FileBacked.set_password stores
            config.set(section, escape_for_ini(account), "\n" + encodebytes(encrypted).decode())
        with open(kr.file_path, "w") as handle:
            config.write(handle)
    finally:
        argon2.low_level.hash_secret_raw = real_hash
        cryptfile_module.os = real_os

    # Read two items back through an unpatched keyring object (one Argon2id run each).
    check = CryptFileKeyring()
    check._keyring_key = password
    for account, secret in expected.items():
        if check.get_password(service, account) != secret:
            print(f"fill-cryptfile: {account} does not read back", file=sys.stderr)
            return 1
    return 0


class AtomicFileBaseline:
    """The disk's share of a durable write: write a temporary file, fsync, rename, fsync the folder."""

    def __init__(self, folder: str):
        import os

        self.os = os
        self.folder = folder
        self.path = os.path.join(folder, "baseline.bin")
        self.temporary = self.path + ".tmp"

    def _replace(self, data: bytes) -> None:
        os = self.os
        fd = os.open(self.temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(self.temporary, self.path)
        folder = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    def set_password(self, service, account, secret):
        self._replace(secret.encode())

    def get_password(self, service, account):
        with open(self.path, "rb") as handle:
            return handle.read().decode()

    def delete_password(self, service, account):
        self._replace(b"")


def main() -> int:
    backend = sys.argv[1] if len(sys.argv) > 1 else ""
    if backend == "init-cryptfile":
        return init_cryptfile()
    if backend == "fill-cryptfile":
        return fill_cryptfile(sys.argv[2], int(sys.argv[3]))
    if backend == "secretservice":
        from keyring.backends.SecretService import Keyring

        kr = Keyring()
    elif backend == "cryptfile":
        from keyrings.cryptfile.cryptfile import CryptFileKeyring

        kr = CryptFileKeyring()
        password = sys.stdin.readline().rstrip("\n")
        kr.keyring_key = password  # unlocks: checks the reference entry (one Argon2id run)
        del password
    elif backend == "fsync-baseline":
        kr = AtomicFileBaseline(sys.argv[2])
    else:
        print("usage: keyring_worker.py secretservice|cryptfile|fsync-baseline FOLDER", file=sys.stderr)
        return 64
    print("ready", flush=True)

    clock = time.perf_counter_ns
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        if fields == ["quit"]:
            break
        op, service, account = fields[0], fields[1], fields[2]
        try:
            value = ""
            if op == "set":
                secret = fields[3]
                start = clock()
                kr.set_password(service, account, secret)
                elapsed = clock() - start
            elif op == "get":
                start = clock()
                got = kr.get_password(service, account)
                elapsed = clock() - start
                value = got or ""
            elif op == "delete":
                start = clock()
                kr.delete_password(service, account)
                elapsed = clock() - start
            else:
                raise ValueError(f"bad request: {op}")
            print(f"ok\t{elapsed}\t{value}", flush=True)
        except Exception as error:  # report and keep serving; the harness counts it as a failure
            message = f"{type(error).__name__}: {error}".replace("\n", " ").replace("\t", " ")
            print(f"err\t{message}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
