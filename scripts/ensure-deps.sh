#!/usr/bin/env bash
# Installs the system packages Lockbox builds and tests with, if any is missing.
# Debian/Ubuntu; run as root, or as a user who may sudo.
set -euo pipefail

# libsodium, libsecret, libkeyutils, SQLite (vault format 2), tpm2-tss (LockboxTPM and the lockbox CLI) and OpenSSL's
# headers (libssl-dev; its libcrypto.so.3, in libssl3, is the Secret Service session's crypto) to build; with
# --test also gnome-keyring, secret-tool, dbus-daemon and keyctl, so the tests can run a real
# Secret Service on a private session bus, faketime (the PIN lockout tests set one process's wall
# clock ahead), swtpm + tpm2-tools for a software TPM, strace (which counts the vault reads
# of `lockbox get`), and dbus-monitor + GNU time for scripts/bench/bench-cli.sh's D-Bus counts and peak RSS, and
# PostgreSQL (the server binaries scripts/dev/postgres-session.sh runs for the LockboxPostgres tests)
# and iproute2 (`ip netns`: the cross-host tests' hosts in their own network namespaces), and
# valgrind (scripts/ci/check-constant-time.sh: the session's PKCS#7 check as compiled).
packages=(libsodium-dev libsecret-1-dev libkeyutils-dev libtss2-dev libsqlite3-dev libssl-dev pkg-config)
if [ "${1:-}" = "--test" ]; then
    packages+=(gnome-keyring libsecret-tools dbus-daemon keyutils faketime swtpm swtpm-tools tpm2-tools strace dbus-bin time postgresql iproute2 valgrind)
fi
# With --test, PyNaCl for python3 too: the suite runs the independent decryptor
# (scripts/format/vault-decrypt.py), whichever script starts the suite (test.sh, sanitizers.sh); and the
# cryptography package, with which scripts/ci/check-session-vectors.py recomputes the AES-CBC vectors.
# --pynacl: only PyNaCl (scripts/ci/check-format.sh, which needs nothing else).
pip_install() {
    local module="$1" package="$2"
    python3 -c "import $module" 2>/dev/null && return 0
    echo "ensure-deps: installing $package with pip" >&2
    python3 -m pip install --quiet "$package" >&2 || python3 -m pip install --quiet --break-system-packages "$package" >&2 || {
        echo "ensure-deps: could not install $package (pip install $package)" >&2
        exit 1
    }
}
ensure_python_packages() {
    case "${1:-}" in --test | --pynacl) ;; *) return 0 ;; esac
    pip_install nacl.bindings pynacl
    if [ "${1:-}" = "--test" ]; then pip_install cryptography.hazmat.primitives.ciphers cryptography; fi
}

if [ "${1:-}" = "--pynacl" ]; then
    ensure_python_packages --pynacl
    exit 0
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    ensure_python_packages "${1:-}"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    echo "ensure-deps: missing ${missing[*]}; install them as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "ensure-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ensure_python_packages "${1:-}"
