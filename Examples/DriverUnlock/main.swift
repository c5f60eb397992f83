// Driver unlock, as in a delivery driver's app: sign-in with an emailed one-time code stores the
// refresh token; the driver sets a 4-digit PIN; later launches try the re-authentication window,
// then the PIN, then the one-time code; logout clears tokens, PIN and cached data.
//
// Run: swift run DriverUnlock

import ExampleSupport
import Foundation
import Lockbox

let app = "com.example.driver"
let run = ExampleRun("Driver unlock")
let pins = PinGuard(store: run.pinStore)
let driver = PinProfile(service: app, name: "driver")
let tokens = TokenRefresher(store: run.store)

/// The server side of the one-time code: the code "emailed" to the driver.
let emailedCode = String(format: "%06d", Int.random(in: 0..<1_000_000))
func signInWithCode(_ code: String) throws {
    guard code == emailedCode else { throw LockboxError.invalidArgument("wrong code") }
    try tokens.save(
        oauthResponse: Data(
            #"{"access_token":"route-access","token_type":"Bearer","expires_in":3600,"refresh_token":"route-refresh"}"#.utf8),
        service: app, account: "driver")
}

/// How each launch unlocks: window, else PIN (subject to lockout), else the one-time code.
func unlock(gate: ReauthGate, typedPin: String?, code: () -> String) throws -> String {
    if gate.isOpen { return "window" }
    if let typedPin {
        do {
            try gate.open(verifying: SecretBytes(utf8: typedPin), for: driver, with: pins)
            return "PIN"
        } catch let error as LockboxError {
            switch error {
            case .pinLockedOut, .pinDisabled, .pinNotSet: break  // fall through to the code
            default: throw error
            }
        }
    }
    try signInWithCode(code())
    try gate.open { try tokens.load(service: app, account: "driver").map { _ in "code" } }
    return "one-time code"
}

run.step("First launch: sign in with the emailed one-time code; the refresh token is stored")
try signInWithCode(emailedCode)
run.expect(try tokens.load(service: app, account: "driver")?.refreshToken != nil, "a refresh token is stored")
run.say("signed in (code sent by email, not shown here)")

run.step("The driver sets a 4-digit quick-unlock PIN")
try pins.set(driver, pin: SecretBytes(utf8: "6047"))
try Vault(store: run.store).set(#"{"stops":14}"#, service: app, account: "route-cache")

run.step("Next launch: no window yet, so the PIN unlocks, and opens a window")
let gate = ReauthGate(absoluteTimeout: .seconds(300))
run.expect(try unlock(gate: gate, typedPin: "6047", code: { "unused" }) == "PIN", "the PIN unlocks")
run.say("unlocked by PIN")

run.step("Within the window, nothing is asked")
run.expect(try unlock(gate: gate, typedPin: nil, code: { "unused" }) == "window", "the window unlocks")
run.say("unlocked by the open window")

run.step("Too many wrong PINs lock the PIN out; the one-time code still works")
gate.lock()
for _ in 1...5 { _ = try? pins.verify(driver, pin: SecretBytes(utf8: "0000")) }
run.expect(try unlock(gate: gate, typedPin: "6047", code: { emailedCode }) == "one-time code", "the code is the fallback")
run.say("PIN locked out; unlocked by one-time code")

run.step("Logout clears tokens, PIN and cached data")
let report = try SignOut.run(service: app, store: run.store)
run.say("removed: " + report.removed.map(\.account).sorted().joined(separator: ", "))
run.expect(try run.store.list(service: app).isEmpty, "nothing of the driver's is left")
run.finish(services: [app])
