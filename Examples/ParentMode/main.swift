// Parent mode, as in a screen-time app: parent mode needs the parent's PIN and then stays open for
// a 30-minute re-authentication window (shortened here through the injectable clock); child mode
// needs nothing and only reads; leaving parent mode or restarting the app requires the PIN again.
//
// Run: swift run ParentMode

import ExampleSupport
import Foundation
import Lockbox
import Synchronization

let app = "com.example.screentime"
let run = ExampleRun("Parent mode")
let pins = PinGuard(store: run.pinStore)
let parent = PinProfile(service: app, name: "parent")

/// The app's clock, which the example moves forward instead of waiting 30 minutes.
final class AppClock: Sendable {
    let seconds = Mutex<Double>(0)
    var read: ReauthGate.Clock { { [self] in seconds.withLock { $0 } } }
    func advance(minutes: Double) { seconds.withLock { $0 += minutes * 60 } }
}
let clock = AppClock()

run.step("Setup: the parent's PIN, the screen-time rules (protected) and the child's schedule (readable always)")
try pins.set(parent, pin: SecretBytes(utf8: "5094"))
try Vault(store: run.store).set(#"{"weekday":"1h","weekend":"2h"}"#, service: app, account: "rules", access: .freshAuthentication)
try Vault(store: run.store).set(#"{"bedtime":"20:00"}"#, service: app, account: "schedule")

func launch() -> (ReauthGate, Vault) {
    let gate = ReauthGate(absoluteTimeout: .seconds(30 * 60), clock: clock.read)
    return (gate, Vault(store: run.store, freshness: gate))
}
var (gate, vault) = launch()

run.step("Child mode needs nothing, and can read only what is not protected")
run.expect(try vault.string(service: app, account: "schedule") != nil, "the schedule is readable in child mode")
run.expectError("the rules need parent mode", matching: { if case .reauthenticationRequired = $0 { true } else { false } }) {
    _ = try vault.string(service: app, account: "rules")
}
run.say("rules: locked (parent mode required)")

run.step("The parent enters parent mode with the PIN")
try gate.open(verifying: SecretBytes(utf8: "5094"), for: parent, with: pins)
run.say("parent mode open for \(gate.remaining.map { "\($0.components.seconds / 60) minutes" } ?? "?")")
run.expect(try vault.string(service: app, account: "rules") != nil, "the rules open in parent mode")
try vault.set(#"{"weekday":"90m","weekend":"2h"}"#, service: app, account: "rules", access: .freshAuthentication)
run.say("rules changed: weekdays 90 minutes")

run.step("29 minutes later the window is still open; 31 minutes later it is not")
clock.advance(minutes: 29)
run.expect(try vault.string(service: app, account: "rules")?.contains("90m") == true, "still open at 29 minutes")
clock.advance(minutes: 2)
run.expectError("closed after 30 minutes", matching: { if case .reauthenticationRequired = $0 { true } else { false } }) {
    _ = try vault.string(service: app, account: "rules")
}
run.say("parent mode closed: the PIN is needed again")

run.step("Leaving parent mode closes it at once")
try gate.open(verifying: SecretBytes(utf8: "5094"), for: parent, with: pins)
gate.lock()
run.expect(!gate.isOpen, "leaving parent mode closes the window")

run.step("Restarting the app asks again, even within 30 minutes")
try gate.open(verifying: SecretBytes(utf8: "5094"), for: parent, with: pins)
(gate, vault) = launch()
run.expectError("a restarted app starts in child mode", matching: { if case .reauthenticationRequired = $0 { true } else { false } }) {
    _ = try vault.string(service: app, account: "rules")
}
run.finish(services: [app])
