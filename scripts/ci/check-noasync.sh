#!/usr/bin/env bash
# Checks that blocking calls a service can reach from async code say so at compile time: a
# consumer file (a package depending on `Lockbox` alone, as an app would) calls the blocking API
# from an async function, and the compiler must answer each call as listed below —
#   - an error, "expression is 'async' but is not marked with 'await'", where an async overload
#     of the same name exists (Vault, PinGuard, TokenRefresher, DeviceIdentity, Transfer, SignOut,
#     and the openers: FileVault, LockboxConfiguration, StoreSelection, StoreResolution) and the
#     call is in an async function: the async overload wins;
#   - the `@available(*, noasync)` diagnostic where the blocking overload is the one chosen: in
#     an async closure (a Hummingbird or Vapor route), in top-level code that awaits (a
#     service's main.swift), and where there is no async twin
#     (ReauthGate's PIN and passphrase checks, which hash on the calling thread): an error in
#     Swift 6 language mode (a warning in Swift 5 mode);
# and the same calls in synchronous code compile without a diagnostic.
#
#   scripts/ci/check-noasync.sh        (about 1 minute; build folder .build-samples, shared with
#                                    scripts/ci/check-samples.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/link" "$work/probe/Sources/Probe"
ln -s "$root" "$work/link/lockbox"
cat >"$work/probe/Package.swift" <<SWIFT
// swift-tools-version:6.1
import PackageDescription
let package = Package(
    name: "Probe",
    dependencies: [.package(path: "$work/link/lockbox")],
    targets: [.executableTarget(name: "Probe", dependencies: [.product(name: "Lockbox", package: "lockbox")])],
    swiftLanguageModes: [.v6]
)
SWIFT
# Each probed line ends in a comment naming what the compiler must say there: ERROR-AWAIT,
# ERROR-NOASYNC (Swift 6 mode), or NONE.
cat >"$work/probe/Sources/Probe/main.swift" <<'SWIFT'
import Lockbox

let key = SecretBytes(utf8: "1")
let profile = PinProfile(service: "s", name: "n")

let configuration = LockboxConfiguration(vaultPath: "/v", keyFile: "/k")

func handler(
    vault: Vault, pins: PinGuard, tokens: TokenRefresher, ids: DeviceIdentity, gate: ReauthGate, store: any SecretStore,
    selection: StoreSelection, resolution: StoreResolution
) async throws {
    _ = try vault.get(service: "s", account: "a")  // ERROR-AWAIT
    try vault.set(key, service: "s", account: "a")  // ERROR-AWAIT
    _ = try vault.list()  // ERROR-AWAIT
    try pins.verify(profile, pin: key)  // ERROR-AWAIT
    try pins.set(profile, pin: key)  // ERROR-AWAIT
    _ = try pins.remove(profile)  // ERROR-AWAIT
    _ = try tokens.load(service: "s", account: "a")  // ERROR-AWAIT
    _ = try tokens.clear(service: "s", account: "a")  // ERROR-AWAIT
    _ = try ids.deviceID(service: "s")  // ERROR-AWAIT
    _ = try SignOut.run(service: "s", store: store)  // ERROR-AWAIT
    _ = try Transfer.run(from: store, to: store)  // ERROR-AWAIT
    try gate.open(verifying: key, for: profile, with: pins)  // ERROR-NOASYNC
    _ = try vault.previous(service: "s", account: "a")  // ERROR-AWAIT
    _ = try vault.wipeExpired()  // ERROR-AWAIT
    _ = try vault.restorePrevious(service: "s", account: "a")  // ERROR-AWAIT
    _ = try vault.set(key, service: "s", account: "a", changes: ItemChanges(), keepingPreviousFor: .seconds(60))  // ERROR-AWAIT
    _ = try vault.get(service: "s", account: "a", allowExpired: true)  // ERROR-AWAIT
    _ = try FileVault.open(at: "/v", credential: .keyFile("/k"))  // ERROR-AWAIT
    _ = try FileVault.open(at: "/v", credentials: [.keyFile("/k")])  // ERROR-AWAIT
    _ = try FileVault.open(at: "/v", window: nil, credentials: { [.keyFile("/k")] })  // ERROR-AWAIT
    _ = try FileVault.create(at: "/v", credentials: [.keyFile("/k")])  // ERROR-AWAIT
    _ = try configuration.openFileVault()  // ERROR-AWAIT
    _ = try configuration.openStore()  // ERROR-AWAIT
    _ = try selection.resolve()  // ERROR-AWAIT
    _ = try resolution.open(credentials: [.keyFile("/k")])  // ERROR-AWAIT
    _ = try resolution.open(StoreOpenRequest(configuration: configuration))  // ERROR-AWAIT
    _ = try resolution.openSecretService()  // ERROR-AWAIT
}

// A Hummingbird-style route, an async closure: there the blocking overload is the one chosen (it
// compiled without `await` and blocked a thread of the pool); noasync refuses it.
func route(vault: Vault, pins: PinGuard) -> @Sendable () async throws -> Void {
    return {
        _ = try vault.get(service: "s", account: "a")  // ERROR-NOASYNC
        try pins.verify(profile, pin: key)  // ERROR-NOASYNC
        _ = try vault.previous(service: "s", account: "a")  // ERROR-NOASYNC
        _ = try FileVault.open(at: "/v", credential: .keyFile("/k"))  // ERROR-NOASYNC
        _ = try configuration.openFileVault()  // ERROR-NOASYNC
    }
}

func tool(
    vault: Vault, pins: PinGuard, tokens: TokenRefresher, ids: DeviceIdentity, gate: ReauthGate, selection: StoreSelection,
    resolution: StoreResolution
) throws {
    _ = try vault.get(service: "s", account: "a")  // NONE
    try pins.verify(profile, pin: key)  // NONE
    _ = try tokens.load(service: "s", account: "a")  // NONE
    _ = try ids.deviceID(service: "s")  // NONE
    try gate.open(verifying: key, for: profile, with: pins)  // NONE
    _ = try vault.previous(service: "s", account: "a")  // NONE
    _ = try vault.restorePrevious(service: "s", account: "a")  // NONE
    _ = try FileVault.open(at: "/v", credential: .keyFile("/k"))  // NONE
    _ = try FileVault.create(at: "/v", credentials: [.keyFile("/k")])  // NONE
    _ = try configuration.openFileVault()  // NONE
    _ = try configuration.openStore()  // NONE
    _ = try selection.resolve().open(credentials: [.keyFile("/k")])  // NONE
    _ = try resolution.open(StoreOpenRequest(configuration: configuration))  // NONE
}

// Top-level code that awaits is async code too; there the blocking overload is the one chosen,
// so noasync is what refuses it.
let vault = Vault(store: MemoryStore())
try await Task.sleep(for: .milliseconds(1))
_ = try vault.get(service: "s", account: "a")  // ERROR-NOASYNC
try PinGuard(store: MemoryStore()).verify(profile, pin: key)  // ERROR-NOASYNC
_ = try TokenRefresher(store: MemoryStore()).load(service: "s", account: "a")  // ERROR-NOASYNC
_ = try DeviceIdentity(store: MemoryStore()).deviceID(service: "s")  // ERROR-NOASYNC
// Top-level code picks the blocking openers too, even with `await`, so a main.swift that awaits
// opens its vault in a function: an async one (there `try await` picks the async opener) or, at
// start-up, a synchronous one.
_ = try FileVault.open(at: "/v", credential: .keyFile("/k"))  // ERROR-NOASYNC
_ = try configuration.openFileVault()  // ERROR-NOASYNC
func openVault() async throws -> any KeySlotManaging {
    try await FileVault.open(at: "/v", credential: .keyFile("/k"))  // NONE
}
func openVaultAtStartUp() throws -> any KeySlotManaging {
    try configuration.openFileVault()  // NONE
}
_ = try await openVault()  // NONE
_ = try openVaultAtStartUp()  // NONE
SWIFT
log=$work/build.log
# The same options as scripts/ci/check-samples.sh, whose build folder this shares.
source "$root/scripts/traits.sh"
(cd "$work/probe" && swift build "${lockbox_line_tables[@]}" --scratch-path "$root/.build-samples" >"$log" 2>&1) || true
python3 - "$work/probe/Sources/Probe/main.swift" "$log" <<'PY'
import re, sys
source, log = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
said = {}
for m in re.finditer(r"^\S*main\.swift:(\d+):\d+: (error|warning): (.*)$", log, re.M):
    said.setdefault(int(m.group(1)), set()).add((m.group(2), m.group(3)))
failures, checked = [], 0
for number, line in enumerate(open(source, encoding="utf-8"), 1):
    expected = re.search(r"// (ERROR-AWAIT|ERROR-NOASYNC|NONE)$", line)
    if not expected:
        continue
    checked += 1
    got = said.pop(number, set())
    kind = expected.group(1)
    if kind == "ERROR-AWAIT":
        ok = any(s == "error" and "is 'async' but is not marked with 'await'" in t for s, t in got)
    elif kind == "ERROR-NOASYNC":
        ok = any(s == "error" and "unavailable from asynchronous contexts" in t for s, t in got)
    else:
        ok = not got
    if not ok:
        failures.append(f"line {number} ({kind}): {line.strip()}\n    the compiler said: {sorted(got) or 'nothing'}")
for number, got in said.items():
    failures.append(f"line {number}: unexpected {sorted(got)}")
if failures:
    print(log[-3000:], file=sys.stderr)
    sys.exit("check-noasync:\n  " + "\n  ".join(failures))
print(f"check-noasync: passed ({checked} calls: every blocking call from async code is refused, none in sync code)")
PY
