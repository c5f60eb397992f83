// Session restore, as in a trading-game app: signing in stores the session, a restart restores
// it, signing out clears it, and the app follows the session state on an AsyncStream.
//
// Run: swift run SessionRestore

import ExampleSupport
import Foundation
import Lockbox

let app = "com.example.tradinggame"
let run = ExampleRun("Session restore")

/// The app's view of the session, fed by the token store's events.
func follow(_ tokens: TokenRefresher, into log: EventLog) -> Task<Void, Never> {
    let events = tokens.events()
    return Task {
        for await event in events { await log.append(event) }
    }
}

actor EventLog {
    private(set) var events: [SessionEvent] = []
    func append(_ event: SessionEvent) { events.append(event) }
    func waitFor(count: Int) async -> [SessionEvent] {
        for _ in 0..<200 where events.count < count { try? await Task.sleep(for: .milliseconds(10)) }
        return events
    }
}

/// The token store's async overloads, called from async functions as a service calls them
/// (top-level code would pick the blocking overloads, which are unavailable from async code).
func save(_ tokens: TokenRefresher, _ response: String, service: String) async throws {
    try await tokens.save(oauthResponse: Data(response.utf8), service: service, account: "player", subject: "trader-17")
}
func load(_ tokens: TokenRefresher, service: String) async throws -> TokenSet? {
    try await tokens.load(service: service, account: "player")
}

let key = ItemKey(service: app, account: "player")
let log = EventLog()

run.step("Launch 1: the player signs in; the session is stored")
var tokens = TokenRefresher(store: run.store)
var watcher = follow(tokens, into: log)
try await save(tokens, #"{"access_token":"a1","token_type":"Bearer","expires_in":3600,"refresh_token":"r1"}"#, service: app)
let firstEvents = await log.waitFor(count: 1)
run.expect(firstEvents == [.signedIn(key)], "a signed-in event")
run.say("event: signed in")

run.step("The access token expires; the next call refreshes it once and the app hears about it")
try await save(tokens, #"{"access_token":"a1","token_type":"Bearer","expires_in":0,"refresh_token":"r1"}"#, service: app)
let fresh = try await tokens.validAccessToken(service: app, account: "player") { current in
    TokenSet(
        accessToken: SecretBytes(utf8: "a2"), refreshToken: SecretBytes(utf8: "r2"), expiresAt: Date().addingTimeInterval(3600),
        subject: current.subject)
}
run.expect(fresh == SecretBytes(utf8: "a2"), "the refreshed token")
let refreshEvents = await log.waitFor(count: 3)
run.expect(refreshEvents.last == .refreshed(key), "a refreshed event")
run.say("event: refreshed")
watcher.cancel()

run.step("Launch 2: the app restarts and restores the session from the store")
tokens = TokenRefresher(store: try run.reopen())
let restored = try await load(tokens, service: app)
run.expect(restored?.subject == "trader-17", "the session survives a restart")
run.expect(restored?.accessToken == SecretBytes(utf8: "a2"), "with the refreshed token")
run.say("restored the session of \(restored?.subject ?? "?") (token \(restored.map { "\($0.accessToken)" } ?? "none"))")

run.step("The player signs out; the session is gone and the app hears it")
watcher = follow(tokens, into: log)
try await Task.sleep(for: .milliseconds(20))
run.expect(try tokens.clear(service: app, account: "player"), "there was a session")
let lastEvents = await log.waitFor(count: 4)
run.expect(lastEvents.last == .signedOut(key), "a signed-out event")
run.say("event: signed out")
run.expect(try TokenRefresher(store: try run.reopen()).load(service: app, account: "player") == nil, "nothing to restore after sign-out")
watcher.cancel()
run.finish(services: [app])
