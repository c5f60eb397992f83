#!/usr/bin/env bash
# Builds the README's library quick start as a consumer package would — a package of its own
# that depends on this checkout by path and on the `Lockbox` product alone — and runs it against
# a vault made by `lockbox init --generate-key-file` holding an item `lockbox set` stored.
#
#   scripts/check-readme-sample.sh [LOCKBOX]   LOCKBOX: the lockbox binary (default: swift build's)
#
# The sample is the README's first Swift block that calls `FileVault.open`; its two example
# paths become the program's arguments, and one line is added that prints the item the CLI
# stored. The consumer's build folder is .build-readme-sample (kept between runs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lockbox="${1:-$(cd "$root" && swift build --show-bin-path)/lockbox}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/package/Sources/Consumer"
cat > "$work/package/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "Consumer",
    dependencies: [.package(path: "$root")],
    targets: [.executableTarget(name: "Consumer", dependencies: [.product(name: "Lockbox", package: "$(basename "$root")")])]
)
SWIFT
python3 - "$root/README.md" "$work/package/Sources/Consumer/main.swift" <<'PY'
import re, sys
readme = open(sys.argv[1], encoding="utf-8").read()
samples = [b for b in re.findall(r"```swift\n(.*?)```", readme, re.S) if "FileVault.open(" in b]
if not samples:
    sys.exit("check-readme-sample: the README has no Swift sample that calls FileVault.open")
sample = samples[0]
paths = re.findall(r'"(/[^"]+)"', sample)
if len(paths) < 2:
    sys.exit("check-readme-sample: the sample names fewer than two paths (vault, key file)")
sample = sample.replace(f'"{paths[0]}"', "FilePath(CommandLine.arguments[1])").replace(f'"{paths[1]}"', "FilePath(CommandLine.arguments[2])")
sample += 'print("cli item:", try vault.string(service: "readme-sample", account: "cli") ?? "missing")\n'
open(sys.argv[2], "w", encoding="utf-8").write("import SystemPackage\n" + sample)
PY

(cd "$work/package" && swift build --scratch-path "$root/.build-readme-sample" 2>&1 | tail -n 3)
"$lockbox" init --vault "$work/vault.lockbox" --generate-key-file "$work/vault.key" >/dev/null
printf 'stored by lockbox set' | "$lockbox" set readme-sample cli --vault "$work/vault.lockbox" --key-file "$work/vault.key"
output=$("$root/.build-readme-sample/debug/Consumer" "$work/vault.lockbox" "$work/vault.key")
echo "$output"
grep -qx 'cli item: stored by lockbox set' <<<"$output" || { echo "check-readme-sample: the sample did not read the CLI's item" >&2; exit 1; }
resolved=$(grep -c '"identity"' "$work/package/Package.resolved" || true)
echo "check-readme-sample: passed (the consumer package resolved $resolved packages)"
