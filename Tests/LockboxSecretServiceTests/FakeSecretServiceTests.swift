import Foundation
import LockboxSecretService
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The Secret Service client's answers to a provider that misbehaves in ways gnome-keyring never
/// does: a fake provider on a fake bus (FakeBus, DBusConnectionTests.swift) that speaks the real
/// protocol, session encryption included, and answers one call wrongly.
@Suite("Secret Service client against a fake provider")
struct FakeSecretServiceTests {
    let key = ItemKey(service: "svc", account: "acct")

    @Test("a provider that answers CreateItem with neither an item nor a prompt: a protocol error, not 'locked'")
    func createsNothing() throws {
        let provider = try FakeSecretService(.createsNothing)
        defer { provider.stop() }
        let error = try #require(throws: LockboxError.self) {
            try provider.store().set(SecretBytes(copying: Array("s".utf8)), for: key, options: ItemOptions())
        }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("neither an item nor a prompt"))
        #expect(provider.calls.contains("CreateItem") && !provider.calls.contains("Dismiss"))
    }

    @Test("a prompt for CreateItem is dismissed, never shown, and reported as a locked keyring")
    func createPromptDismissed() throws {
        let provider = try FakeSecretService(.createPrompts)
        defer { provider.stop() }
        let error = try #require(throws: LockboxError.self) {
            try provider.store().set(SecretBytes(copying: Array("s".utf8)), for: key, options: ItemOptions())
        }
        guard case .keyringLocked = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(provider.calls.suffix(2) == ["CreateItem", "Dismiss"], "\(provider.calls)")
    }

    @Test("a prompt for Delete is dismissed and the deletion reported as refused, with what to do")
    func deletePromptDismissed() throws {
        let provider = try FakeSecretService(.deletePrompts)
        defer { provider.stop() }
        let error = try #require(throws: LockboxError.self) { try provider.store().delete(key) }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("prompt"))
        #expect(provider.calls.suffix(2) == ["Delete", "Dismiss"], "\(provider.calls)")
    }

    /// One exchange in 256 gives a shared value that starts with a zero byte, which Lockbox never
    /// uses (SessionCrypto): the session is closed and another opened.
    @Test("a zero-led key exchange is closed and another session opened; the secret still arrives intact")
    func zeroLedExchangeRetried() throws {
        let provider = try FakeSecretService(.zeroLedSessions(1))
        defer { provider.stop() }
        try provider.store().set(SecretBytes(copying: Array("retried".utf8)), for: key, options: ItemOptions())
        #expect(provider.calls.filter { $0 == "OpenSession" }.count == 2, "\(provider.calls)")
        #expect(provider.calls.filter { $0 == "Close" }.count == 1, "\(provider.calls)")
        #expect(provider.received == Array("retried".utf8))
    }

    @Test("four zero-led key exchanges in a row: an error, every session closed, nothing sent")
    func fourZeroLedExchanges() throws {
        let provider = try FakeSecretService(.zeroLedSessions(4))
        defer { provider.stop() }
        let error = try #require(throws: LockboxError.self) {
            try provider.store().set(SecretBytes(copying: Array("never".utf8)), for: key, options: ItemOptions())
        }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("no usable key in four exchanges"), "\(detail)")
        #expect(provider.calls.filter { $0 == "OpenSession" }.count == 4, "\(provider.calls)")
        #expect(provider.calls.filter { $0 == "Close" }.count == 4, "\(provider.calls)")
        #expect(!provider.calls.contains("CreateItem") && provider.received == nil)
    }

    @Test("a reply of the wrong type from the provider is a protocol error, and the next call reconnects")
    func wrongReplyType() throws {
        let provider = try FakeSecretService(.wrongSearchReply)
        defer { provider.stop() }
        let store = try provider.store()
        let error = try #require(throws: LockboxError.self) { try store.get(key) }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("'as'") && detail.contains("'aoao'"), "\(detail)")
        _ = try? store.get(key)
        #expect(provider.connections == 2)
    }

    @Test("a first call the provider answers UnknownMethod (gnome-keyring's start-up race) is made once more")
    func firstCallRepeated() throws {
        let provider = try FakeSecretService(.forgetsFirstCall)
        defer { provider.stop() }
        let store = try provider.store()
        #expect(try store.get(key) == nil)
        #expect(provider.calls.filter { $0 == "SearchItems" }.count == 2, "\(provider.calls)")
        try store.set(SecretBytes(copying: Array("after".utf8)), for: key, options: ItemOptions())
        #expect(provider.received == Array("after".utf8))
        #expect(provider.connections == 1)
    }

    @Test("a provider that lacks a method: UnknownMethod is the error, after one repeat on each connection")
    func missingMethodNotRepeatedForever() throws {
        let provider = try FakeSecretService(.lacksSearchItems)
        defer { provider.stop() }
        let store = try provider.store()
        let error = try #require(throws: LockboxError.self) { try store.get(key) }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("org.freedesktop.DBus.Error.UnknownMethod"), "\(detail)")
        #expect(provider.calls == ["SearchItems", "SearchItems"], "\(provider.calls)")
        // The failure dropped the connection; on the new one the first call is repeated again.
        _ = try? store.get(key)
        #expect(provider.calls.count == 4 && provider.connections == 2, "\(provider.calls)")
    }

    @Test("a provider's error name and text reach the error without their control characters")
    func providerErrorText() throws {
        let provider = try FakeSecretService(.weirdError)
        defer { provider.stop() }
        let error = try #require(throws: LockboxError.self) { try provider.store().get(key) }
        guard case .secretServiceFailed(_, let detail) = error else {
            Issue.record("wrong error \(error)")
            return
        }
        #expect(detail.contains("org.example.Error.Weird") && detail.contains("screen"), "\(detail)")
        #expect(!detail.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(detail)")
        let locked = try FakeSecretService(.isLocked)
        defer { locked.stop() }
        let lockedError = try #require(throws: LockboxError.self) { try locked.store().get(key) }
        guard case .keyringLocked = lockedError else {
            Issue.record("wrong error \(lockedError)")
            return
        }
    }
}

/// A Secret Service provider on a bus of its own: authentication, `Hello`, and the calls
/// `SecretServiceClient` makes, with real session encryption, one of them answered as
/// `behaviour` says.
final class FakeSecretService: @unchecked Sendable {
    enum Behaviour {
        case createsNothing, createPrompts, deletePrompts
        case zeroLedSessions(Int)
        case wrongSearchReply, weirdError, isLocked, refusesAlgorithm
        /// Answers each connection's first call `UnknownMethod`, as gnome-keyring does when that
        /// call runs before it has registered the caller.
        case forgetsFirstCall
        /// Implements no `SearchItems` at all.
        case lacksSearchItems
    }

    let behaviour: Behaviour
    let folder: TemporaryFolder
    private var server: FakeBus?
    private let state = NSLock()
    private var recorded: [String] = []
    private var connectionCount = 0
    private var zeroLedLeft = 0
    private var sessionKey: SecretBytes?
    private var stored: [UInt8]?

    /// The members called, in order, over every connection.
    var calls: [String] { state.withLock { recorded } }
    var connections: Int { state.withLock { connectionCount } }
    /// The secret the last CreateItem carried, decrypted.
    var received: [UInt8]? { state.withLock { stored } }

    init(_ behaviour: Behaviour) throws {
        self.behaviour = behaviour
        if case .zeroLedSessions(let count) = behaviour { zeroLedLeft = count }
        folder = try TemporaryFolder()
        server = try FakeBus(path: folder.file("bus").string) { [unowned self] client in serve(client) }
    }

    func stop() { server?.stop() }

    /// A store on this provider's bus. The timeout is long: making a zero-led exchange takes the
    /// provider about 256 exponentiations each, which a loaded or sanitized debug build does
    /// slowly, and no test here waits for it to pass.
    func store() throws -> SecretServiceStore {
        try SecretServiceStore(timeout: 120, sessions: .libcrypto, environment: FakeBus.environment(folder.file("bus").string))
    }

    private func serve(_ client: Int32) {
        guard FakeBus.handshake(client) else { return }
        state.withLock { connectionCount += 1 }
        var serial: UInt32 = 100
        func send(_ message: DBusMessage) {
            serial += 1
            var message = message
            message.serial = serial
            if let bytes = try? message.encoded() { FakeBus.write(client, bytes) }
        }
        send(DBusMessage(kind: .methodReturn, serial: 1, replySerial: 1, body: [.string(":1.42")]))
        var buffer: [UInt8] = []
        var answered = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            guard let length = try? DBusMessage.length(startingWith: buffer[...]), buffer.count >= length else {
                let count = read(client, &chunk, chunk.count)
                guard count > 0 else { return }
                buffer += chunk[0..<count]
                continue
            }
            let bytes = Array(buffer[0..<length])
            buffer.removeFirst(length)
            guard let call = try? DBusMessage.decode(bytes), call.kind == .methodCall, let member = call.member else { continue }
            state.withLock { recorded.append(member) }
            defer { answered = true }
            if case .forgetsFirstCall = behaviour, !answered {
                let text = "Method \(member) is not implemented on interface \(call.interface ?? "")"
                send(DBusMessage(kind: .error, serial: 1, errorName: Self.unknownMethod, replySerial: call.serial, body: [.string(text)]))
                continue
            }
            switch answer(member, call.body) {
            case .success(let values):
                send(DBusMessage(kind: .methodReturn, serial: 1, replySerial: call.serial, body: values))
            case .failure(let error):
                send(DBusMessage(kind: .error, serial: 1, errorName: error.name, replySerial: call.serial, body: [.string(error.text)]))
            }
        }
    }

    struct ProviderError: Error {
        var name: String
        var text: String
    }

    private static let item = "/org/freedesktop/secrets/collection/login/1"
    private static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"

    private func answer(_ member: String, _ body: [DBusValue]) -> Result<[DBusValue], ProviderError> {
        switch (member, behaviour) {
        case ("SearchItems", .lacksSearchItems): return .failure(ProviderError(name: Self.unknownMethod, text: "no SearchItems"))
        case ("SearchItems", .wrongSearchReply): return .success([.array(.string, [])])
        case ("SearchItems", .weirdError):
            return .failure(ProviderError(name: "org.example.Error.Weird", text: "\u{1B}[2Jclears the screen\u{7}"))
        case ("SearchItems", .isLocked): return .failure(ProviderError(name: "org.freedesktop.Secret.Error.IsLocked", text: "locked"))
        case ("SearchItems", .deletePrompts): return .success([.array(.objectPath, [.objectPath(Self.item)]), .array(.objectPath, [])])
        case ("SearchItems", _): return .success([.array(.objectPath, []), .array(.objectPath, [])])
        case ("Get", _): return .success([.variant(.boolean(false))])
        case ("OpenSession", .refusesAlgorithm):
            return .failure(ProviderError(name: "org.freedesktop.DBus.Error.NotSupported", text: "Algorithm is not supported"))
        case ("OpenSession", _):
            guard body.count == 2, case .variant(.bytes(let clientValue)) = body[1] else {
                return .failure(ProviderError(name: "org.freedesktop.DBus.Error.InvalidArgs", text: "no public value"))
            }
            let zeroLed = state.withLock { () -> Bool in
                defer { zeroLedLeft = max(0, zeroLedLeft - 1) }
                return zeroLedLeft > 0
            }
            // A key pair whose shared value starts with a zero byte (nil key) when asked for one.
            while true {
                guard let pair = try? SessionCrypto.makeKeyPair() else {
                    return .failure(ProviderError(name: "org.freedesktop.DBus.Error.Failed", text: "no key pair"))
                }
                guard let key = try? SessionCrypto.sessionKey(exponent: pair.exponent, providerValue: clientValue) else {
                    if zeroLed { return .success([.variant(.bytes(pair.publicValue)), .objectPath("/org/freedesktop/secrets/session/z")]) }
                    continue
                }
                if zeroLed { continue }
                state.withLock { sessionKey = key }
                return .success([.variant(.bytes(pair.publicValue)), .objectPath("/org/freedesktop/secrets/session/s")])
            }
        case ("CreateItem", .createsNothing): return .success([.objectPath("/"), .objectPath("/")])
        case ("CreateItem", .createPrompts): return .success([.objectPath("/"), .objectPath("/org/freedesktop/secrets/prompt/p1")])
        case ("CreateItem", _):
            guard body.count == 3, case .structure(let secret) = body[1], secret.count == 4, case .bytes(let iv) = secret[1],
                case .bytes(let ciphertext) = secret[2], let key = state.withLock({ sessionKey }),
                let plaintext = try? SessionCrypto.decrypt(iv: iv, ciphertext: ciphertext, key: key)
            else { return .failure(ProviderError(name: "org.freedesktop.DBus.Error.InvalidArgs", text: "a secret that does not decrypt")) }
            let bytes = plaintext.withUnsafeBytes { Array($0) }
            state.withLock { stored = bytes }
            return .success([.objectPath(Self.item), .objectPath("/")])
        case ("Delete", .deletePrompts): return .success([.objectPath("/org/freedesktop/secrets/prompt/p2")])
        case ("Delete", _): return .success([.objectPath("/")])
        case ("Dismiss", _), ("Close", _): return .success([])
        default: return .failure(ProviderError(name: Self.unknownMethod, text: "\(member) is not faked"))
        }
    }
}

extension SecretServiceTests {
    /// The fallback for a provider that refuses `dh-ietf1024-sha256-aes128-cbc-pkcs7`: the
    /// connection moves to libsecret's session. libsecret makes its own connection, to the
    /// process's session bus, so here the fake provider refuses and the secret goes to the test
    /// command's gnome-keyring (on a real desktop both are the same bus and the same provider).
    @Test("a provider that refuses Lockbox's session algorithm gets libsecret's session instead")
    func refusedAlgorithmFallsBackToLibsecret() throws {
        let provider = try FakeSecretService(.refusesAlgorithm)
        defer { provider.stop() }
        let key = ItemKey(service: "fallback", account: "not-supported")
        let secret = SecretBytes(copying: Array("through libsecret".utf8))
        try provider.store().set(secret, for: key, options: ItemOptions())
        #expect(provider.calls.contains("OpenSession") && !provider.calls.contains("CreateItem"), "\(provider.calls)")
        #expect(LibraryVersions.libsecret.contains("libsecret-1.so"), "libsecret was not loaded: \(LibraryVersions.libsecret)")
        let real = try SecretServiceStore(timeout: 5, sessions: .libcrypto)
        #expect(try real.get(key) == secret)
        #expect(try real.delete(key))
    }
}
