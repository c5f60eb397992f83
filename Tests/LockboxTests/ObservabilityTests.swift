import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// An error whose description quotes a token, as a refresh callback's might when it passes a
/// server response on.
struct ServerSaidError: Error, CustomStringConvertible {
    var description: String { "the server answered {\"access_token\": \"at-NEW-12cd9e\"}" }
}

@Suite("swift-log and swift-metrics: what Lockbox records, and that no secret is in it")
struct ObservabilityTests {
    @Test("a whole scenario — set, get, PIN failures and a lockout, refreshes, wipe — logs records, none with a secret, PIN or token")
    func noSecretInAnyRecord() async throws {
        let vaultFixture = try KeyFileVault()
        let store = vaultFixture.store
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .trace
        let metrics = TestMetrics()

        let secrets = [
            "s3cret-Value-91f2", "4739", "8162", "at-OLD-77ab3e", "rt-OLD-5c3e1d", "at-NEW-12cd9e", "rt-NEW-0a9b8c", "$argon2id",
        ]

        let vault = Vault(store: store, logger: logger, metricsFactory: metrics)
        try await vault.set("s3cret-Value-91f2", service: "svc", account: "alice")
        #expect(try await vault.string(service: "svc", account: "alice") == "s3cret-Value-91f2")
        try await vault.set("s3cret-Value-91f2", service: "svc", account: "bob")
        #expect(try await vault.get(service: "svc", account: "bob") == SecretBytes(utf8: "s3cret-Value-91f2"))

        let clock = TestClock()
        let pins = PinGuard(store: store, hashParameters: .testing, clock: clock, logger: logger, metricsFactory: metrics)
        let profile = PinProfile(service: "svc", name: "alice")
        try await pins.set(profile, pin: pin("4739"))
        for _ in 1...5 { _ = outcome { try pins.verify(profile, pin: pin("8162")) } }  // the fifth starts a 60 s lockout
        #expect(outcome { try pins.verify(profile, pin: pin("4739")) } == "lockedOut(60)")
        await #expect(throws: LockboxError.self) { try await pins.verify(profile, pin: pin("4739")) }
        clock.advance(60)
        try await pins.verify(profile, pin: pin("4739"))

        let tokens = TokenRefresher(store: store, logger: logger, metricsFactory: metrics)
        let expired = TokenSet(
            accessToken: SecretBytes(utf8: "at-OLD-77ab3e"), refreshToken: SecretBytes(utf8: "rt-OLD-5c3e1d"),
            expiresAt: Date(timeIntervalSinceNow: -10))
        try await tokens.save(expired, service: "api", account: "alice")
        await #expect(throws: ServerSaidError.self) {
            _ = try await tokens.validAccessToken(service: "api", account: "alice") { _ in throw ServerSaidError() }
        }
        let fresh = try await tokens.validAccessToken(service: "api", account: "alice") { _ in
            TokenSet(
                accessToken: SecretBytes(utf8: "at-NEW-12cd9e"), refreshToken: SecretBytes(utf8: "rt-NEW-0a9b8c"),
                expiresAt: Date(timeIntervalSinceNow: 3600))
        }
        #expect(fresh == SecretBytes(utf8: "at-NEW-12cd9e"))
        #expect(try await vault.wipe(service: "svc") == 3)

        let entries = handler.entries
        #expect(entries.count >= 15, "the scenario leaves records")
        let texts = entries.map { "\($0.level) \($0.message) \($0.metadata) \($0.error.map { "\($0)" } ?? "")" }
        for secret in secrets {
            let leaking = texts.filter { $0.contains(secret) }
            #expect(leaking.isEmpty, "\(leaking.count) record(s) contain a secret")
        }
        // The records say what happened, to which store and item.
        #expect(entries.contains { $0.metadata[LogKey.operation] == "wipe" && $0.level == .notice })
        #expect(entries.contains { $0.metadata[LogKey.operation] == "get" && $0.metadata[LogKey.store] == "EncryptedFileStore" })
        #expect(entries.filter { $0.message == "wrong PIN" }.count == 4)
        #expect(entries.contains { $0.message == "wrong PIN; the profile is locked out" && $0.metadata[LogKey.failures] == "5" })
        #expect(entries.filter { $0.message == "PIN try refused: locked out" }.count == 2)
        #expect(entries.contains { $0.message == "tokens refreshed" && $0.metadata[LogKey.account] == "alice" })
        #expect(
            entries.contains {
                $0.message == "token refresh failed; the tokens were kept" && $0.metadata[LogKey.errorCode] == "ServerSaidError"
            })

        // Metrics.
        #expect(metrics.counterTotal(label: "lockbox_pin_failures") == 5)
        #expect(metrics.counterTotal(label: "lockbox_pin_lockouts") == 1)
        #expect(metrics.counterTotal(label: "lockbox_pin_verifications", dimensions: [("outcome", "locked-out")]) == 2)
        #expect(metrics.counterTotal(label: "lockbox_pin_verifications", dimensions: [("outcome", "success")]) == 1)
        #expect(metrics.counterTotal(label: "lockbox_token_refreshes", dimensions: [("outcome", "refreshed")]) == 1)
        #expect(metrics.counterTotal(label: "lockbox_token_refreshes", dimensions: [("outcome", "failed")]) == 1)
        #expect(try metrics.expectTimer("lockbox_pin_verify_duration").values.count == 8)
        let gets = try metrics.expectTimer("lockbox_store_call_duration", [("store", "EncryptedFileStore"), ("operation", "get")])
        #expect(gets.values.count >= 2 && gets.values.allSatisfy { $0 > 0 })
        #expect(
            try metrics.expectTimer("lockbox_store_call_duration", [("store", "EncryptedFileStore"), ("operation", "wipe")]).values.count
                == 1)
    }

    @Test("without a logger Lockbox is silent; the default logger is labelled lockbox")
    func defaultLoggerIsSilent() {
        #expect(Logger.lockboxDefault.label == "lockbox")
        #expect(Vault(store: MemoryStore()).logger.handler is SwiftLogNoOpLogHandler)
    }
}
