#!/usr/bin/env bash
# Generates the CLI reference, the man page and the shell completions from the `lockbox`
# binary's own command definitions, so they cannot drift from the code:
#   docs/CLI.md              every command: abstract, discussion, usage, arguments, options,
#                            defaults; exit codes, environment, files
#   docs/man/lockbox.1       the same as a man page (man -l docs/man/lockbox.1)
#   completions/lockbox.bash, completions/_lockbox (zsh), completions/lockbox.fish
#
#   scripts/dev/gen-cli-docs.sh                 build lockbox (debug, in .build-clidocs) and rewrite the files
#   scripts/dev/gen-cli-docs.sh --check         regenerate into a temporary folder and compare: exit 1,
#                                           naming each stale file, if a committed one differs
#   scripts/dev/gen-cli-docs.sh --binary PATH   use this lockbox instead of building one (e.g. the
#                                           one `swift build` made: "$(swift build --show-bin-path)/lockbox")
#
# The two options combine. The rendering, and what it reads from the binary and Sources/, is
# scripts/dev/gen-cli-docs.py; its output has no dates or paths, so it is the same on every machine.
# When groff is installed, the man page must also pass `groff -man -ww -z` silently.
# To change the documentation, change the help texts in Sources/LockboxCLI and rerun this script.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

check=0
binary=""
while (($#)); do
    case "$1" in
        --check) check=1 ;;
        --binary)
            [[ $# -ge 2 ]] || { echo "gen-cli-docs: --binary needs a path" >&2; exit 64; }
            binary="$2"; shift ;;
        --binary=*) binary="${1#--binary=}" ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "gen-cli-docs: unknown argument '$1' (see --help)" >&2; exit 64 ;;
    esac
    shift
done

# The generated files, relative to the repository root.
outputs=(docs/CLI.md docs/man/lockbox.1 completions/lockbox.bash completions/_lockbox completions/lockbox.fish)

if [[ -z "$binary" ]]; then
    if ! command -v swift >/dev/null 2>&1 && [[ -x /opt/swift/usr/bin/swift ]]; then
        PATH="/opt/swift/usr/bin:$PATH"
    fi
    # Its own scratch path, so it never waits for (or invalidates) another build's .build.
    build=(swift build --scratch-path "$root/.build-clidocs" --product lockbox)
    log="$(mktemp "${TMPDIR:-/tmp}/gen-cli-docs-build.XXXXXX")"
    if ! "${build[@]}" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "gen-cli-docs: the build failed: ${build[*]}" >&2
        exit 1
    fi
    rm -f "$log"
    binary="$("${build[@]}" --show-bin-path)/lockbox"
fi
if [[ ! -x "$binary" ]]; then
    echo "gen-cli-docs: no lockbox executable at $binary" >&2
    exit 1
fi

out="$root"
if ((check)); then
    out="$(mktemp -d "${TMPDIR:-/tmp}/gen-cli-docs.XXXXXX")"
    trap 'rm -rf "$out"' EXIT
fi

python3 "$root/scripts/dev/gen-cli-docs.py" --binary "$binary" --root "$root" --out "$out"

# The man page must render without a single warning.
if command -v groff >/dev/null 2>&1; then
    warnings="$(groff -man -Tutf8 -ww -z "$out/docs/man/lockbox.1" 2>&1)" || true
    if [[ -n "$warnings" ]]; then
        echo "$warnings" >&2
        echo "gen-cli-docs: groff warns about the generated docs/man/lockbox.1 (above): fix scripts/dev/gen-cli-docs.py" >&2
        exit 1
    fi
fi

if ((check)); then
    stale=0
    for file in "${outputs[@]}"; do
        if [[ ! -f "$root/$file" ]]; then
            echo "$file is missing: run scripts/dev/gen-cli-docs.sh" >&2
            stale=1
        elif ! cmp -s "$out/$file" "$root/$file"; then
            echo "$file is out of date: run scripts/dev/gen-cli-docs.sh" >&2
            diff -u --label "$file (committed)" --label "$file (generated)" "$root/$file" "$out/$file" | head -n 40 >&2 || true
            stale=1
        fi
    done
    if ((stale)); then
        exit 1
    fi
    echo "gen-cli-docs: ${outputs[*]} are up to date" >&2
else
    echo "gen-cli-docs: wrote ${outputs[*]}" >&2
fi
