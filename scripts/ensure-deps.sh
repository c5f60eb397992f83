#!/usr/bin/env bash
# Installs the system packages Lockbox builds and tests with, if any is missing.
# Debian/Ubuntu; run as root, or as a user who may sudo.
set -euo pipefail

# libsodium, libsecret and libkeyutils to build; with --test also gnome-keyring, secret-tool,
# dbus-daemon, keyctl and strace (which counts the vault reads of `lockbox get`),
# so the tests can run a real Secret Service on a private session bus.
packages=(libsodium-dev libsecret-1-dev libkeyutils-dev pkg-config)
if [ "${1:-}" = "--test" ]; then
    packages+=(gnome-keyring libsecret-tools dbus-daemon keyutils strace)
fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
