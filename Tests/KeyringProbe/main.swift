// A real process that holds a SecretServiceStore open while its provider goes away.
// Run inside scripts/keyring-session.sh, which exports LOCKBOX_TEST_KEYRING_PID. The test
// "the provider going away mid-session is a clear error" runs it and checks its output.
// Exit 0 only if every step behaved: the store worked, then failed with a typed error, quickly.

import Foundation
import Lockbox
import LockboxSecretService

func fail(_ message: String) -> Never {
    print("probe failed: \(message)")
    exit(1)
}

guard let pidText = ProcessInfo.processInfo.environment["LOCKBOX_TEST_KEYRING_PID"], let pid = Int32(pidText) else {
    fail("LOCKBOX_TEST_KEYRING_PID is not set; run me inside scripts/keyring-session.sh")
}
do {
    let store = try SecretServiceStore(timeout: 3)
    let vault = Vault(store: store)
    try vault.set("before", service: "probe", account: "a")
    guard try vault.string(service: "probe", account: "a") == "before" else { fail("read back differs") }
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
