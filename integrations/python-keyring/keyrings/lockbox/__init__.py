"""A keyring backend that keeps passwords in Lockbox through the ``lockbox`` command.

Passwords go to ``lockbox set`` on its standard input and come back from ``lockbox get`` on its
standard output: never in arguments (other processes can read those) nor in the environment.
keyring's service and username are Lockbox's service and account, so ``lockbox list`` and
``lockbox wipe`` see and remove what this backend stores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.credentials import SimpleCredential
from keyring.errors import KeyringError, KeyringLocked, PasswordDeleteError, PasswordSetError

__all__ = ["LockboxKeyring"]

# lockbox's documented exit codes (lockbox --help) that this backend tells apart.
_NOT_FOUND = 2
_LOCKED = {22, 40}  # keyring locked; re-authentication required (no window, no key, no terminal)


class LockboxKeyring(KeyringBackend):
    """Passwords in Lockbox: the file vault on a server, the Secret Service on a desktop,
    whichever the ``lockbox`` command picks (``--store``, ``LOCKBOX_STORE``, its settings)."""

    #: The ``lockbox`` executable; ``KEYRING_PROPERTY_EXECUTABLE`` or ``with_properties`` override it.
    executable: str | None = None

    @properties.classproperty
    def priority(cls) -> float:
        """3: after the Secret Service backends (4.8 to 5.1), before encrypted and plain-text
        files (keyrings.cryptfile 2.5, keyrings.alt 0.6 and 0.5). Not viable without ``lockbox``."""
        if cls._find_executable(os.environ.get("KEYRING_PROPERTY_EXECUTABLE")) is None:
            raise RuntimeError("no lockbox executable on PATH")
        return 3

    @staticmethod
    def _find_executable(configured: str | None) -> str | None:
        if configured:
            return configured if os.access(configured, os.X_OK) else None
        return shutil.which("lockbox")

    def _run(self, arguments: list[str], secret: bytes | None = None) -> subprocess.CompletedProcess:
        executable = self._find_executable(self.executable)
        if executable is None:
            raise KeyringError("lockbox: no lockbox executable (PATH, or the 'executable' property)")
        return subprocess.run(
            [executable, *arguments],
            input=secret if secret is not None else b"",
            capture_output=True,
            check=False,
        )

    @staticmethod
    def _failure(result: subprocess.CompletedProcess, error: type[KeyringError] = KeyringError) -> KeyringError:
        message = result.stderr.decode("utf-8", "replace").strip() or f"lockbox exited with {result.returncode}"
        if result.returncode in _LOCKED:
            return KeyringLocked(message)
        return error(message)

    def get_password(self, service: str, username: str) -> str | None:
        result = self._run(["get", "--", service, username])
        if result.returncode == _NOT_FOUND:
            return None
        if result.returncode != 0:
            raise self._failure(result)
        try:
            return result.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyringError(f"the item for {username!r} on {service!r} holds binary data, not UTF-8 text") from None

    def set_password(self, service: str, username: str, password: str) -> None:
        if not username:
            raise PasswordSetError("Lockbox items need an account: empty user names are not stored (keyring deprecates them)")
        arguments = ["set", "--raw", "--allow-empty", "--kind", "password", "--", service, username]
        result = self._run(arguments, secret=password.encode("utf-8"))
        if result.returncode != 0:
            raise self._failure(result, PasswordSetError)

    def delete_password(self, service: str, username: str) -> None:
        result = self._run(["delete", "--", service, username])
        if result.returncode == _NOT_FOUND:
            raise PasswordDeleteError(f"no password for {username!r} on {service!r}")
        if result.returncode != 0:
            raise self._failure(result, PasswordDeleteError)

    def get_credential(self, service: str, username: str | None) -> SimpleCredential | None:
        if username is not None:
            return super().get_credential(service, username)
        result = self._run(["list", "--json", f"--service={service}"])
        if result.returncode != 0:
            raise self._failure(result)
        items = sorted(json.loads(result.stdout), key=lambda item: item["modified"], reverse=True)
        for item in items:
            password = self.get_password(service, item["account"])
            if password is not None:
                return SimpleCredential(item["account"], password)
        return None
