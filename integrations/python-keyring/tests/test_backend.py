"""keyring's own backend tests, plus what Lockbox promises on top: interop with the lockbox CLI
(list, wipe), secrets never in arguments, and the backend's place among keyring's backends.

The store is whatever ``lockbox`` picks in the environment the test runs in:
scripts/ci/test-integrations.sh runs this file once against a key-file vault and once against
gnome-keyring (inside scripts/dev/keyring-session.sh; LOCKBOX_INTEGRATION_STORE says which).
"""

import json
import os
import subprocess

import keyring
import keyring.backend
import pytest
from keyring import errors
from keyring.testing.backend import BackendBasicTests

from keyrings.lockbox import LockboxKeyring


def lockbox(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["lockbox", *arguments], capture_output=True, check=False)


class TestLockboxKeyring(BackendBasicTests):
    def init_keyring(self):
        return LockboxKeyring()

    @pytest.mark.xfail(
        strict=True,
        raises=errors.PasswordSetError,
        reason="deliberate: Lockbox items need an account, and keyring deprecates empty user names (#668)",
    )
    def test_empty_username(self):
        super().test_empty_username()


def test_stored_item_is_listed_and_wiped_by_the_cli():
    backend = LockboxKeyring()
    backend.set_password("interop.example.org", "alice", " pass word\n")
    try:
        listed = lockbox("list", "--json", "--service=interop.example.org")
        assert listed.returncode == 0, listed.stderr
        items = json.loads(listed.stdout)
        assert [(item["service"], item["account"], item["kind"]) for item in items] == [
            ("interop.example.org", "alice", "password")
        ]
        assert b"pass word" not in listed.stdout
        got = lockbox("get", "interop.example.org", "alice")
        assert got.returncode == 0 and got.stdout == b" pass word\n"
    finally:
        wiped = lockbox("wipe", "--service=interop.example.org", "--yes")
    assert wiped.returncode == 0, wiped.stderr
    assert backend.get_password("interop.example.org", "alice") is None
    assert backend.get_credential("interop.example.org", None) is None


def test_item_set_by_the_cli_is_read_by_the_backend():
    result = subprocess.run(
        ["lockbox", "set", "--raw", "cli.example.org", "bob"], input=b"from-cli", capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr
    try:
        credential = LockboxKeyring().get_credential("cli.example.org", None)
        assert (credential.username, credential.password) == ("bob", "from-cli")
    finally:
        lockbox("wipe", "--service=cli.example.org", "--yes")


def test_binary_item_is_a_keyring_error_not_a_crash():
    result = subprocess.run(
        ["lockbox", "set", "--raw", "binary.example.org", "dan"], input=b"\xff\xfe", capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr
    try:
        with pytest.raises(errors.KeyringError):
            LockboxKeyring().get_password("binary.example.org", "dan")
    finally:
        lockbox("wipe", "--service=binary.example.org", "--yes")


def test_secrets_never_in_arguments_or_environment(monkeypatch):
    calls = []
    real_run = subprocess.run

    def recording_run(arguments, **options):
        calls.append((list(arguments), options.get("env")))
        return real_run(arguments, **options)

    monkeypatch.setattr(subprocess, "run", recording_run)
    backend = LockboxKeyring()
    backend.set_password("argv.example.org", "carol", "s3cret-in-stdin")
    assert backend.get_password("argv.example.org", "carol") == "s3cret-in-stdin"
    backend.delete_password("argv.example.org", "carol")
    assert calls, "the backend ran lockbox"
    for arguments, environment in calls:
        assert not any("s3cret" in argument for argument in arguments)
        assert environment is None, "lockbox inherits the environment; nothing is added to it"


def test_priority_between_secret_service_and_files(monkeypatch):
    assert 2.5 < LockboxKeyring.priority < 4.8
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("KEYRING_PROPERTY_EXECUTABLE", raising=False)
    assert not LockboxKeyring.viable, "without lockbox the backend is not viable"


def test_installed_backend_is_found_by_keyring():
    names = [type(backend).__name__ for backend in keyring.backend.get_all_keyring()]
    assert "LockboxKeyring" in names, names


def test_locked_store_is_keyring_locked(tmp_path, monkeypatch):
    # A vault that needs a key nobody gives, and no terminal to ask on: KeyringLocked, not a hang.
    # (Made under another profile, so the key file init records is not this profile's.)
    require_no_terminal()
    vault = tmp_path / "other.lockbox"
    key = tmp_path / "other.key"
    created = lockbox("init", f"--vault={vault}", f"--generate-key-file={key}", "--profile=made-elsewhere")
    assert created.returncode == 0, created.stderr
    monkeypatch.setenv("LOCKBOX_BACKEND", "file")
    monkeypatch.setenv("LOCKBOX_VAULT", str(vault))
    monkeypatch.delenv("LOCKBOX_KEY_FILE", raising=False)
    with pytest.raises(errors.KeyringLocked):
        LockboxKeyring().get_password("s", "a")


def require_no_terminal():
    """lockbox would ask for the passphrase on a controlling terminal; the test script runs
    pytest under setsid so there is none. Fail clearly rather than wait for typing."""
    try:
        with open("/dev/tty"):
            pytest.fail("run without a controlling terminal (scripts/ci/test-integrations.sh uses setsid)")
    except OSError:
        pass


@pytest.mark.skipif(
    os.environ.get("LOCKBOX_INTEGRATION_STORE") != "secret-service",
    reason="needs lockbox on the Secret Service (the gnome-keyring run of scripts/ci/test-integrations.sh)",
)
def test_same_items_as_keyrings_own_secret_service_backend():
    from keyring.backends.SecretService import Keyring as SecretServiceKeyring

    theirs, ours = SecretServiceKeyring(), LockboxKeyring()
    assert SecretServiceKeyring.priority > LockboxKeyring.priority, "the Secret Service comes first when it works"
    ours.set_password("shared.example.org", "alice", "from-lockbox")
    theirs.set_password("shared.example.org", "bob", "from-keyring")
    try:
        assert theirs.get_password("shared.example.org", "alice") == "from-lockbox"
        assert ours.get_password("shared.example.org", "bob") == "from-keyring"
    finally:
        lockbox("wipe", "--service=shared.example.org", "--yes")
    assert theirs.get_password("shared.example.org", "bob") is None
