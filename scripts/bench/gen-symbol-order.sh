#!/usr/bin/env bash
# Writes scripts/bench/lockbox.order: the functions of the `lockbox` binary that the everyday commands run,
# in the order the linker should lay them out (`make release` passes it to lld as
# --symbol-ordering-file). Placed first, the functions a command runs (about 0.9 MiB of them) fill
# fewer pages than spread over the binary's code, where each page fault maps 64 KiB around the
# function: a smaller peak RSS for every command. A stale list costs memory, never correctness.
#
# Usage: scripts/bench/gen-symbol-order.sh [--binary PATH]
#
#   --binary PATH  the lockbox to profile (default: `make release`'s build, built first)
#
# Runs under valgrind's callgrind (which records every function executed): `--version`, and `get`,
# `set`, `list`, `delete` on a 10-item file vault with a key file, then the same four on the Secret
# Service inside scripts/dev/keyring-session.sh. Functions every run uses come first, then the others
# by how many runs use them, each group in the order callgrind first lists them (roughly the order
# they first ran; it varies a little between runs, two of which measured within 0.3 MiB of each
# other, while sorting by name measured 0.6 MiB more peak RSS). A stale file is harmless (names the
# binary no longer has are ignored, new functions are laid out as without the file); re-run after
# large changes to the commands' code paths, check peak RSS, and commit the result.
# SwiftPM does not relink for a new order alone: remove the release binary before `make release`.
# Requires valgrind.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
binary=""
while (($#)); do
    case "$1" in
        --binary) [[ $# -ge 2 ]] || { echo "gen-symbol-order: --binary needs a path" >&2; exit 64; }; binary="$(realpath "$2")"; shift 2 ;;
        -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gen-symbol-order: unknown argument: $1" >&2; exit 64 ;;
    esac
done
command -v valgrind >/dev/null || { echo "gen-symbol-order: valgrind is missing (apt-get install valgrind)" >&2; exit 69; }
if [[ -z $binary ]]; then
    make --no-print-directory release >&2
    binary="$root/$(make --no-print-directory -s release-path)"
fi
[[ -x $binary ]] || { echo "gen-symbol-order: no executable at $binary" >&2; exit 66; }

work="$(mktemp -d "${TMPDIR:-/tmp}/lockbox-order.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# valgrind 3.19 cannot read Swift 6's DWARF 5: profile a copy without debug info (symbols stay).
cp "$binary" "$work/lockbox.full"
objcopy --strip-debug "$work/lockbox.full" "$work/lockbox"
cat >"$work/profile.sh" <<'EOF'
#!/usr/bin/env bash
# profile.sh WORK NAME ARGS...: one callgrind run of WORK/lockbox, standard input from WORK/secret.
set -euo pipefail
work="$1" name="$2"; shift 2
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/$name.callgrind" "$work/lockbox" "$@" \
    <"$work/secret" >/dev/null 2>"$work/$name.log" || { cat "$work/$name.log" >&2; exit 70; }
EOF
cat >"$work/secret-service.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
work="$1"; ss=(--store secret-service)
"$work/lockbox" "${ss[@]}" set lockbox-order alice <"$work/secret"
"$work/profile.sh" "$work" ss-set "${ss[@]}" set lockbox-order bob
"$work/profile.sh" "$work" ss-get "${ss[@]}" get lockbox-order alice
"$work/profile.sh" "$work" ss-list "${ss[@]}" list --service lockbox-order
"$work/profile.sh" "$work" ss-delete "${ss[@]}" delete lockbox-order bob
"$work/lockbox" "${ss[@]}" delete lockbox-order alice 2>/dev/null
EOF
chmod +x "$work/profile.sh" "$work/secret-service.sh"
printf 'order-token-0123456789\n' >"$work/secret"

# The file vault: a private HOME and XDG folders, no LOCKBOX_* from the caller.
for name in $(env | sed -n 's/^\(LOCKBOX_[A-Z_]*\)=.*/\1/p'); do unset "$name"; done
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share"
mkdir -p "$HOME"
vault=(--store file --vault "$work/vault.lockbox" --key-file "$work/vault.key")
"$work/lockbox" init --vault "$work/vault.lockbox" --generate-key-file "$work/vault.key" >/dev/null 2>&1
for i in 0 1 2 3 4 5 6 7 8 9; do "$work/lockbox" "${vault[@]}" set lockbox-order "user$i" <"$work/secret"; done
"$work/profile.sh" "$work" version --version
"$work/profile.sh" "$work" file-get "${vault[@]}" get lockbox-order user3
"$work/profile.sh" "$work" file-set "${vault[@]}" set lockbox-order user10
"$work/profile.sh" "$work" file-list "${vault[@]}" list
"$work/profile.sh" "$work" file-delete "${vault[@]}" delete lockbox-order user10
scripts/dev/keyring-session.sh -- "$work/secret-service.sh" "$work" >/dev/null

python3 - "$work" >"$root/scripts/bench/lockbox.order" <<'EOF'
import collections, glob, os, re, sys
work = sys.argv[1]
runs = sorted(glob.glob(os.path.join(work, "*.callgrind")))
uses, first, position = collections.Counter(), {}, 0
for run in runs:
    objects, functions, current, seen = {}, {}, None, set()
    for line in open(run, errors="replace"):
        line = line.rstrip("\n")
        match = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line)
        if match:
            if match.group(3):
                objects[match.group(2)] = match.group(3)
            if match.group(1) == "ob":
                current = objects.get(match.group(2))
            continue
        match = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if not match:
            continue
        if match.group(3):
            functions[match.group(2)] = match.group(3)
        # Callgrind marks recursion levels as NAME'2, NAME'3: one symbol.
        name = re.sub(r"'\d+$", "", functions.get(match.group(2)) or "")
        # Functions of the binary itself (not of the shared libraries), by their symbol names.
        if match.group(1) != "fn" or current != os.path.join(work, "lockbox") or not name or name.startswith("0x"):
            continue
        if name not in seen:
            seen.add(name)
            uses[name] += 1
            if name not in first:
                first[name] = position
                position += 1
for name in sorted(uses, key=lambda name: (-uses[name], first[name])):
    print(name)
print(f"gen-symbol-order: {len(uses)} functions from {len(runs)} runs", file=sys.stderr)
EOF
echo "gen-symbol-order: wrote scripts/bench/lockbox.order (to use it: rm $binary; make release)" >&2
