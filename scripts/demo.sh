#!/usr/bin/env bash
# The main job on the embedded default: an encrypted file vault in a temporary folder, unlocked
# by a generated key file. Installs what it needs, builds `lockbox`, then init, set, get, list, wipe.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-deps.sh
source scripts/traits.sh
swift build "${lockbox_traits[@]}" --product lockbox >&2
lockbox() { "$(swift build --show-bin-path)/lockbox" "$@"; }

workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
export LOCKBOX_VAULT="$workdir/vault.lockbox" LOCKBOX_KEY_FILE="$workdir/vault.key"
# Keep the demo's store choice out of your real ~/.config/lockbox/settings.json.
export XDG_CONFIG_HOME="$workdir/config"

run() { printf '\n$ %s\n' "$*"; }

run lockbox init --generate-key-file '$LOCKBOX_KEY_FILE'
lockbox init --generate-key-file "$LOCKBOX_KEY_FILE"

# A random stand-in for a refresh token, written to a private file: secrets go in through stdin.
umask 077
head -c 24 /dev/urandom | base64 > "$workdir/token"
run lockbox set com.example.api alice --kind token '< token'
lockbox set com.example.api alice --kind token < "$workdir/token"
printf 'device-%s' "$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')" | lockbox set com.example.api device --kind device-id

run lockbox get com.example.api alice
lockbox get com.example.api alice > "$workdir/read-back"
cat "$workdir/read-back"; echo
if cmp -s "$workdir/token" <(cat "$workdir/read-back"; echo); then
    echo "(the token read back matches what was stored: $(wc -c < "$workdir/read-back") bytes)"
else
    echo "demo: the token read back differs from what was stored" >&2
    exit 1
fi

run lockbox list
lockbox list

run lockbox wipe --all --yes
lockbox wipe --all --yes

run lockbox list
lockbox list
echo
echo "Vault file was $LOCKBOX_VAULT (mode $(stat -c %a "$LOCKBOX_VAULT")); removed with its folder on exit."
