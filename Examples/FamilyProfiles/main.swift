// Family profiles, as in a kids' puzzle app: a guest plays with a persistent guest ID; a parent
// signs up and the session token is stored; children are added, each with a 4-digit PIN entered
// twice; a wrong PIN says "Wrong PIN. Try again!" and counts toward the lockout; removing a child
// wipes their PIN; logout clears the session.
//
// Run: swift run FamilyProfiles

import ExampleSupport
import Foundation
import Lockbox

let app = "com.example.puzzles"
let run = ExampleRun("Family profiles")
let identity = DeviceIdentity(store: run.store)
let tokens = TokenRefresher(store: run.store)
let pins = PinGuard(store: run.pinStore)

run.step("A guest plays without an account: the guest gets a persistent ID")
let guest = try identity.guestID(service: app, name: "guest")
run.say("guest ID \(guest)")
run.expect(try DeviceIdentity(store: run.reopen()).guestID(service: app, name: "guest") == guest, "the same guest ID after a restart")

run.step("A parent signs up; the server's session token is stored")
let signUpResponse = Data(
    #"{"access_token":"parent-session-7f3a","token_type":"Bearer","expires_in":86400,"refresh_token":"parent-refresh-91c2"}"#.utf8)
try tokens.save(oauthResponse: signUpResponse, service: app, account: "parent", subject: "parent@example.com")
run.expect(try tokens.load(service: app, account: "parent")?.subject == "parent@example.com", "the session is stored")
run.say("session stored (\(try tokens.load(service: app, account: "parent").map { "\($0)" } ?? "none"))")

run.step("The parent adds two children, each with a 4-digit PIN entered twice")
let children = ["max": ("4739", "4739"), "mia": ("8316", "8316")]
for (child, entries) in children.sorted(by: { $0.key < $1.key }) {
    guard let pin = enterTwice(entries.0, entries.1) else { run.fail("the two entries for \(child) differ") }
    try pins.set(PinProfile(service: app, name: child), pin: pin)
    run.say("PIN set for \(child)")
}
run.expect(enterTwice("5826", "5862") == nil, "two different entries are refused")
run.expectError("a common PIN is refused", matching: { if case .pinRejected = $0 { true } else { false } }) {
    try pins.set(PinProfile(service: app, name: "leo"), pin: SecretBytes(utf8: "1234"))
}
run.say("1234 refused: too common")

run.step("Max types a wrong PIN, then the right one")
let max = PinProfile(service: app, name: "max")
do {
    try pins.verify(max, pin: SecretBytes(utf8: "4793"))
    run.fail("a wrong PIN was accepted")
} catch LockboxError.wrongPin(_, let failures, _) {
    run.say("Wrong PIN. Try again!  (\(failures) wrong so far; 5 in a row lock the profile for a minute)")
    run.expect(failures == 1, "the wrong try is counted")
}
try pins.verify(max, pin: SecretBytes(utf8: "4739"))
run.say("Welcome back, Max!")
run.expect(try pins.status(max).failures == 0, "a success resets the count")

run.step("Five wrong PINs in a row lock Max's profile")
for _ in 1...5 { _ = try? pins.verify(max, pin: SecretBytes(utf8: "0000")) }
run.expectError("the profile is locked", matching: { if case .pinLockedOut = $0 { true } else { false } }) {
    try pins.verify(max, pin: SecretBytes(utf8: "4739"))
}
run.say("locked: \(try pins.status(max).lockedUntil.map { "until \($0.formatted(.iso8601))" } ?? "?")")

run.step("The parent removes Mia: her PIN is wiped")
try pins.remove(PinProfile(service: app, name: "mia"))
run.expectError("Mia has no PIN any more", matching: { if case .pinNotSet = $0 { true } else { false } }) {
    try pins.verify(PinProfile(service: app, name: "mia"), pin: SecretBytes(utf8: "8316"))
}

run.step("The parent logs out: the session is cleared")
run.expect(try tokens.clear(service: app, account: "parent"), "the session existed")
run.expect(try tokens.load(service: app, account: "parent") == nil, "no session after logout")
run.expect(try identity.guestID(service: app, name: "guest") == guest, "the guest ID stays")
run.finish(services: [app])
