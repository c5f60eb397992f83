#!/usr/bin/env bash
# Where a lockbox process spends its instructions, and which shared libraries it loads.
#
# Usage: scripts/bench/profile-startup.sh [--binary PATH] [--keep DIR] [-- ARGS...]
#
#   --binary PATH  the lockbox to profile (default: the release build, .build/release/lockbox)
#   --keep DIR     keep the callgrind output file in DIR (for callgrind_annotate / kcachegrind)
#   ARGS           the command line to profile (default: --version)
#
# Runs the command once under valgrind's callgrind (instruction counts: the same on every run and
# under any machine load, unlike times) and prints the total and the count per phase:
#   load+relocate  the dynamic loader before any of our code (_dl_start: mapping and relocating
#                  every shared library the binary links)
#   initializers   the libraries' and the binary's constructors (_dl_init)
#   main           our program (main: the Swift runtime's lazy set-up, argument parsing, the
#                  command's run, exit), with these parts of it shown apart:
#     parse        parsing the command line: LockboxCommand.parseDirectly (get/set/delete with vault
#                  options only), then swift-argument-parser (parseAsRoot) for anything else
#     run          the command's run(): opening the store, then the operation itself
#     open store   of run: resolving the store (settings file) and opening it (unlock; for the
#                  Secret Service, loading libsecret with dlopen and connecting to the bus)
#   exit           exit handlers and destructors (exit)
# then the shared libraries the process loaded, at start-up and later with dlopen (LD_DEBUG=files),
# and `ldd` of the binary. Environment as given (set LOCKBOX_KEY_FILE etc. for a vault command).
# Requires valgrind (apt-get install valgrind).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
binary="$root/.build/release/lockbox"
keep=""
while (($#)); do
    case "$1" in
        --binary) [[ $# -ge 2 ]] || { echo "profile-startup: --binary needs a path" >&2; exit 64; }; binary="$2"; shift 2 ;;
        --keep) [[ $# -ge 2 ]] || { echo "profile-startup: --keep needs a folder" >&2; exit 64; }; keep="$2"; shift 2 ;;
        --) shift; break ;;
        -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "profile-startup: unknown argument: $1" >&2; exit 64 ;;
    esac
done
(($#)) || set -- --version
[[ -x $binary ]] || { echo "profile-startup: no executable at $binary (build it: swift build -c release --product lockbox)" >&2; exit 66; }
command -v valgrind >/dev/null || { echo "profile-startup: valgrind is missing (apt-get install valgrind)" >&2; exit 69; }

work="$(mktemp -d "${TMPDIR:-/tmp}/lockbox-profile.XXXXXX")"
trap 'rm -rf "$work"' EXIT
out="$work/callgrind.out"
# valgrind 3.19 (Debian 12) cannot read the DWARF 5 debug info Swift 6 writes ("unhandled dwarf2
# abbrev form"): profile a copy without debug info (the symbol table stays, so functions are named).
profiled="$work/$(basename "$binary")"
objcopy --strip-debug "$binary" "$profiled"
valgrind --tool=callgrind --callgrind-out-file="$out" "$profiled" "$@" >/dev/null 2>"$work/valgrind.log" || true
grep -q "Collected" "$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 70; }

echo "command: $binary $* (profiled without its debug info)"
# Inclusive counts of the phase entry points (the first row of each name: the outermost call).
callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null | awk '
    function count(s) { gsub(/,/, "", s); return s + 0 }
    /PROGRAM TOTALS/ { total = count($1) }
    / [^ ]*:_dl_start \[/ && !dl { dl = count($1) }
    / [^ ]*:_dl_init \[/ && !init { init = count($1) }
    / [^ ]*:(main|lockbox_main|LockboxMain_main) \[/ && !main { main = count($1) }
    / [^ ]*:[^ ]*parseAsRoot[^ ]* \[/ && !parse { parse = count($1) }
    / [^ ]*:[^ ]*LockboxCommandV13parseDirectly[^ ]* \[/ && !direct { direct = count($1) }
    / [^ ]*:\$s10LockboxCLI[^ ]*V3runyyKF \[/ && !run { run = count($1) }
    / [^ ]*:[^ ]*VaultOptionsV17openResolvedStore[^ ]* \[/ && !open { open = count($1) }
    / [^ ]*:exit \[/ && !ex { ex = count($1) }
    END {
        printf "instructions (callgrind Ir): %d\n", total
        printf "  %-15s %12.1f M\n", "load+relocate", dl / 1e6
        printf "  %-15s %12.1f M\n", "initializers", init / 1e6
        printf "  %-15s %12.1f M   (with the exit below and any library loaded later with dlopen)\n", "main", main / 1e6
        printf "  %-15s %12.1f M   (of main: parsing the command line: lockbox'"'"'s direct parse, then swift-argument-parser'"'"'s if needed)\n", "  parse", (parse + direct) / 1e6
        printf "  %-15s %12.1f M   (of main: the command'"'"'s run)\n", "  run", run / 1e6
        printf "  %-15s %12.1f M   (of run: resolving and opening the store)\n", "    open store", open / 1e6
        printf "  %-15s %12.1f M   (of run: the operation, e.g. the D-Bus calls)\n", "    operation", (run - open) / 1e6
        printf "  %-15s %12.1f M\n", "exit", ex / 1e6
    }'
# The objects whose own (exclusive) instructions are the most.
echo "instructions by shared object (exclusive, top 8):"
callgrind_annotate --inclusive=no --threshold=100 "$out" 2>/dev/null \
    | awk 'match($0, /\[([^]]+)\]$/) { o = substr($0, RSTART + 1, RLENGTH - 2); v = $1; gsub(/,/, "", v); s[o] += v }
           END { for (o in s) printf "%14.1f M  %s\n", s[o] / 1e6, o }' | sort -rn | head -8
if [[ -n $keep ]]; then mkdir -p "$keep"; cp "$out" "$keep/"; echo "callgrind output: $keep/callgrind.out"; fi

LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld" "$binary" "$@" >/dev/null 2>&1 || true
loaded="$(cat "$work"/ld.* | grep -o 'file=[^ ]*' | grep -v 'file=$' | sort -u | sed 's/^file=//')"
echo "shared libraries loaded at run time: $(grep -c . <<<"$loaded")"
sed 's/^/  /' <<<"$loaded"
echo "ldd $binary: $(ldd "$binary" | grep -c '=>') libraries"
