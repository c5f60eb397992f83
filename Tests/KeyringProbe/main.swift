// A real process that holds a SecretServiceStore open while its provider goes away (and, with
// `pin STEP`, the steps of the PIN durability test below).
// Run inside scripts/dev/keyring-session.sh, which exports LOCKBOX_TEST_KEYRING_PID. The test
// "the provider going away mid-session is a clear error" runs it and checks its output.
// Exit 0 only if every step behaved: the store worked, then failed with a typed error, quickly.

import CLibsecretFallback
import Foundation
import Lockbox
import LockboxSecretService

func fail(_ message: String) -> Never {
    print("probe failed: \(message)")
    exit(1)
}

/// A store on the session bus with `value` stored under service "probe" and `account`, and read
/// back through it (the probe fails if it differs).
func storedAndReadBack(_ value: String, account: String, timeout: Double) throws -> (SecretServiceStore, Vault) {
    let store = try SecretServiceStore(timeout: timeout)
    let vault = Vault(store: store)
    try vault.set(value, service: "probe", account: account)
    guard try vault.string(service: "probe", account: account) == value else { fail("read back differs") }
    return (store, vault)
}

// `KeyringProbe pin set|verify-wrong-then-hang|failures`: the steps of the test "a PIN failure
// counted in gnome-keyring survives killing the verifier and restarting the daemon"
// (SecretServiceFailureTests.pinFailureSurvivesKillAndRestart), on a PIN record kept in the
// Secret Service with the risk accepted.
if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "pin" {
    pinStep(CommandLine.arguments[2])
}

func pinStep(_ step: String) -> Never {
    do {
        let store = try SecretServiceStore(timeout: 5)
        let profile = PinProfile(service: "probe", name: "kid")
        let cheap = try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024)
        // PinGuard compares only after the failure is counted and saved: this hasher says so on
        // standard output when the comparison starts, then waits to be killed there.
        let hangingAtComparison = PinHasher(
            hash: PinHasher.argon2id.hash,
            verify: { _, _ in
                print("counted")
                fflush(nil)
                while true { pause() }
            })
        let guardian = PinGuard(
            store: store, hashParameters: cheap, acceptingStoreOpenToOtherProcesses: true,
            hasher: step == "verify-wrong-then-hang" ? hangingAtComparison : .argon2id)
        switch step {
        case "set":
            try guardian.set(profile, pin: SecretBytes(utf8: "4739"))
            print("set")
        case "verify-wrong-then-hang":
            try guardian.verify(profile, pin: SecretBytes(utf8: "0000"))
            fail("the comparison returned")
        case "failures":
            print("failures=\(try guardian.status(profile).failures)")
        default:
            fail("unknown pin step \(step)")
        }
        exit(0)
    } catch {
        fail("\(error)")
    }
}

// `KeyringProbe restart-read`: stores and reads an item (which opens the encrypted session),
// prints "ready", waits for a line on standard input (the test restarts gnome-keyring meanwhile),
// then reads it again on the same store: the provider no longer knows the session
// (org.freedesktop.Secret.Error.NoSession), so the client must open another and the read succeed
// on the same connection. Checked by SecretServiceFailureTests.sessionSurvivesProviderRestart.
if CommandLine.arguments.count == 2, CommandLine.arguments[1] == "restart-read" {
    restartReadStep()
}

func restartReadStep() -> Never {
    do {
        let (store, vault) = try storedAndReadBack("survives-restart", account: "restart", timeout: 5)
        print("ready")
        fflush(nil)
        _ = readLine()
        let again = try vault.string(service: "probe", account: "restart")
        print("second read: \(again == "survives-restart" ? "same secret" : "different"), connections: \(store.connectionCount)")
        exit(0)
    } catch {
        print("second read failed: \(error)")
        exit(1)
    }
}

// `KeyringProbe lean-proxy`: makes the lean SecretService proxy (lockbox_secret_service_open) on
// the session bus and prints what happened: "lean-proxy: made" with a provider; with none, the
// D-Bus error name it failed with (it must be NameHasNoOwner, which the store maps to
// secret-service-unavailable like every other call's), checked by
// SecretServiceFailureTests.leanProxyWithoutProvider.
if CommandLine.arguments.count == 2, CommandLine.arguments[1] == "lean-proxy" {
    leanProxyStep()
}

func leanProxyStep() -> Never {
    var message = [CChar](repeating: 0, count: 512)
    guard lockbox_libsecret_load(&message, message.count) != 0 else { fail("libsecret could not be loaded") }
    var error: UnsafeMutablePointer<GError>?
    guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else { fail("no session bus") }
    defer { g_object_unref(UnsafeMutableRawPointer(bus)) }
    if let service = lockbox_secret_service_open(nil, &error) {
        g_object_unref(UnsafeMutableRawPointer(service))
        print("lean-proxy: made")
        exit(0)
    }
    guard let error else { fail("lockbox_secret_service_open returned nothing and no error") }
    let name = g_dbus_error_get_remote_error(error).map { name in
        defer { g_free(name) }
        return String(cString: name)
    }
    g_error_free(error)
    print("lean-proxy: failed with \(name ?? "a local error")")
    exit(0)
}

guard let pidText = ProcessInfo.processInfo.environment["LOCKBOX_TEST_KEYRING_PID"], let pid = Int32(pidText) else {
    fail("LOCKBOX_TEST_KEYRING_PID is not set; run me inside scripts/dev/keyring-session.sh")
}
do {
    let (_, vault) = try storedAndReadBack("before", account: "a", timeout: 3)
    print("connected: stored and read an item")

    // SIGKILL: a daemon that merely releases its bus name (as gnome-keyring does on SIGTERM)
    // keeps answering on its unique name for a while, which is not "gone". The killed process
    // stays a zombie until the session script reaps it, so give the bus a moment instead of
    // polling the PID.
    kill(pid, SIGKILL)
    usleep(300_000)
    for attempt in 1...2 {
        let start = Date()
        do {
            _ = try vault.get(service: "probe", account: "a")
            fail("attempt \(attempt): a read succeeded after the provider went away")
        } catch let error as LockboxError {
            let seconds = Date().timeIntervalSince(start)
            switch error {
            case .secretServiceUnavailable, .secretServiceFailed, .secretServiceTimeout:
                print("went-away attempt \(attempt): \(String(describing: error).prefix(60))… after \(String(format: "%.2f", seconds)) s")
                if seconds > 4 { fail("attempt \(attempt) took \(seconds) s") }
            default:
                fail("attempt \(attempt): unexpected error \(error)")
            }
        }
    }
    print("ok")
} catch {
    fail("\(error)")
}
