#!/usr/bin/env bash
# Source coverage of the fuzzing corpora: which lines of the parsers the inputs scripts/ci/fuzz.sh
# kept (Fuzz/work/TARGET/corpus) and the seeds (Fuzz/corpus/TARGET) actually execute.
#
# Usage: scripts/dev/fuzz-coverage.sh [TARGET...]     (default: every target with a corpus)
#
# Builds the harnesses a second time, unoptimised (no inlining, so every line is attributed to its
# own function) with LLVM source-based coverage and without AddressSanitizer, into
# .build-fuzz-cov; replays each corpus once (libFuzzer -runs=0); prints llvm-cov's report for the
# files that target is about. HTML per target: .build-fuzz-cov/coverage/TARGET/index.html.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

declare -A files=(
    [vault-file]="Lockbox/Sealing/VaultFormat.swift Lockbox/Sealing/ByteCoding.swift Lockbox/Sealing/KeySlotCrypto.swift"
    [vault-payload]="Lockbox/Sealing/VaultFormat.swift Lockbox/Sealing/ByteCoding.swift"
    [vault-row]="Lockbox/Sealing/VaultRecords.swift Lockbox/Sealing/VaultFormat.swift"
    [vault-database]="Lockbox/Stores/FileVault/SQLiteVaultStore.swift Lockbox/Stores/FileVault/SQLiteConnection.swift Lockbox/Sealing/VaultRecords.swift"
    [settings]="Lockbox/Selection/StoreSettings.swift"
    [pin-record]="Lockbox/PIN/PinGuard.swift Lockbox/PIN/LockoutPolicy.swift Lockbox/PIN/PinClock.swift"
    [session-window]="LockboxSessionWindows/SessionWindow.swift LockboxSessionWindows/KernelKeyring.swift"
    [key-file]="Lockbox/Sealing/VaultCredential.swift"
    [token-response]="Lockbox/Credentials/TokenSet.swift"
    [token-record]="Lockbox/Credentials/TokenSet.swift"
)
if (($#)); then targets=("$@"); else targets=(vault-file vault-payload vault-row vault-database settings pin-record session-window key-file token-response token-record); fi
for target in "${targets[@]}"; do
    [[ -n ${files[$target]:-} ]] || { echo "fuzz-coverage: unknown target '$target'" >&2; exit 64; }
done

scratch=$repo/.build-fuzz-cov
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "fuzz-coverage: building the harnesses with coverage in $scratch" >&2
# A release build with the optimiser off (-Onone after SwiftPM's -O wins), as in scripts/ci/fuzz.sh:
# a debug build renames the executable's main for testability, so libFuzzer's own main is linked
# and finds no LLVMFuzzerTestOneInput.
if ! swift build --product LockboxFuzzer --scratch-path "$scratch" -c release \
    -Xswiftc -sanitize=fuzzer -Xswiftc -DLOCKBOX_FUZZ -Xswiftc -use-ld=lld -Xswiftc -Onone \
    -Xswiftc -profile-generate -Xswiftc -profile-coverage-mapping >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
toolchain_bin=$(dirname "$(readlink -f "$(command -v swift)")")
llvm_cov=$toolchain_bin/llvm-cov
llvm_profdata=$toolchain_bin/llvm-profdata

for target in "${targets[@]}"; do
    out=$scratch/coverage/$target
    rm -rf "$out" && mkdir -p "$out/tmp" "$out/profiles"
    corpora=("$repo/Fuzz/corpus/$target")
    [[ -d $repo/Fuzz/work/$target/corpus ]] && corpora=("$repo/Fuzz/work/$target/corpus" "${corpora[@]}")
    inputs=$(cat "${corpora[@]/%//*}" 2>/dev/null | wc -c; true)
    run=(env TMPDIR="$out/tmp" SWIFT_BACKTRACE=enable=no LLVM_PROFILE_FILE="$out/profiles/%p.profraw"
        "$scratch/release/LockboxFuzzer" "$target" -runs=0 "${corpora[@]}")
    [[ $target == session-window ]] && run=(keyctl session - "${run[@]}")
    "${run[@]}" >"$out/replay.log" 2>&1 || { echo "fuzz-coverage: replaying $target failed (see $out/replay.log)" >&2; exit 1; }
    "$llvm_profdata" merge -sparse "$out"/profiles/*.profraw -o "$out/merged.profdata"
    sources=()
    for f in ${files[$target]}; do sources+=("$repo/Sources/$f"); done
    count=$(find "${corpora[@]}" -type f | wc -l)
    echo "== $target: $count inputs replayed"
    "$llvm_cov" report "$scratch/release/LockboxFuzzer" -instr-profile="$out/merged.profdata" "${sources[@]}" |
        sed "s|$repo/Sources/||"
    "$llvm_cov" show "$scratch/release/LockboxFuzzer" -instr-profile="$out/merged.profdata" -format=html \
        -output-dir="$out" "${sources[@]}" >/dev/null
    rm -rf "$out/tmp" "$out/profiles"
done
