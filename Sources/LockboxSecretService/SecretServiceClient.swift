import CLibsecretFallback
import Lockbox

/// Which code makes the encrypted session a secret crosses the bus in.
package enum SecretServiceSessions: Sendable {
    /// Lockbox's own (``SessionCrypto``, with libcrypto loaded on the first secret): no libsecret,
    /// GLib or libgcrypt loaded. The default; a provider that refuses the algorithm moves the
    /// connection to ``libsecretFallback``.
    case libcrypto
    /// libsecret's (loaded on the first secret): the fallback for a provider that answers
    /// `NotSupported` to Lockbox's session, and tests that check the two agree.
    case libsecretFallback
}

/// The raw Secret Service client under ``SecretServiceStore``: the session-bus connection and one
/// method per Secret Service call, with no knowledge of Lockbox's items.
///
/// Every call is a plain D-Bus call on a session-bus connection of Lockbox's own
/// (``DBusConnection``: a Unix socket, no GIO), to the provider's well-known name: no libsecret
/// proxy, no bus match rules. Calls where no secret
/// crosses the bus (`SearchItems`, an item's properties, `Item.Delete`, the collection's `Locked`
/// property) have no session at all; reading a secret (`Item.GetSecret`) and creating an item
/// (`CreateItem`) use an encrypted session opened on the connection's first secret (`OpenSession`,
/// ``SessionCrypto``, which loads libcrypto on its first use). So `delete` and `list` make no
/// session and load no libcrypto, and no command loads GIO, libsecret or libgcrypt (the call
/// counts and instructions are in docs/PERFORMANCE.md). With
/// ``SecretServiceSessions/libsecretFallback`` those two calls go through
/// libsecret instead (on GIO's own bus connection), whose `SecretService` is made on first need
/// (a lean proxy: no property or signal set-up).
///
/// Every call of one ``run(_:_:)`` shares a ``Deadline`` and the client's lock; a failure that
/// means the provider went away drops the connection (and its session), so the next call
/// reconnects.
final class SecretServiceClient: @unchecked Sendable {
    static let busName = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"

    /// The most one ``run(_:_:)`` may take, in seconds.
    let timeout: Double

    private let connection = Locked<Connection?>(nil)
    private let connectionsMade = Locked(0)

    /// How many times this client has connected (1 while the connection holds).
    var connectionCount: Int { connectionsMade.withLock { $0 } }

    /// Who makes the encrypted session.
    let sessions: SecretServiceSessions

    /// Where the session bus's address is read: the process environment, or a test's.
    let environment: @Sendable (String) -> String?

    /// An encrypted session Lockbox opened: its object path and AES key.
    struct Session {
        let path: String
        let key: SecretBytes
    }

    /// The session bus and, once a secret crossed it, the encrypted session: Lockbox's own, or
    /// libsecret's service proxy with libsecret's.
    final class Connection: @unchecked Sendable {
        let bus: DBusConnection
        var sessions: SecretServiceSessions
        var session: Session?
        var service: OpaquePointer?
        /// Whether the provider has answered a call on this connection (see `Calls.call`).
        var providerAnswered = false
        init(bus: DBusConnection, sessions: SecretServiceSessions) {
            self.bus = bus
            self.sessions = sessions
        }
        deinit {
            if let service { g_object_unref(UnsafeMutableRawPointer(service)) }
        }
    }

    /// Connects to the session bus. Throws ``LockboxError/noSessionBus(detail:)`` without a bus,
    /// and, with libsecret's sessions, ``LockboxError/secretServiceUnavailable(detail:)`` without
    /// libsecret.
    /// Whether a provider owns the Secret Service's name is not asked here: the first call to it
    /// starts one installed for D-Bus activation, or fails with
    /// ``LockboxError/secretServiceUnavailable(detail:)`` (`ServiceUnknown`), which is as clear as
    /// a `GetNameOwner` of our own, and one round trip fewer on every command.
    init(
        timeout: Double, sessions: SecretServiceSessions = .libcrypto,
        environment: @escaping @Sendable (String) -> String? = DBusConnection.processEnvironment
    ) throws {
        self.timeout = timeout
        self.sessions = sessions
        self.environment = environment
        if sessions == .libsecretFallback { try Self.loadLibsecret() }
        try run("connecting") { _ in }
    }

    /// Before a call that moves a secret: starts loading libcrypto for Lockbox's session on a
    /// thread of its own, so the loading overlaps the bus round trips before `OpenSession`. Does
    /// nothing for libsecret's sessions, and nothing after the first time in a process.
    func prepareSession() {
        if sessions == .libcrypto { SessionCrypto.preload() }
    }

    /// Runs `body` with the connection and a fresh deadline, serialised, and turns every D-Bus
    /// (or libsecret) failure into a typed ``LockboxError``.
    func run<T>(_ operation: String, _ body: (Calls) throws -> T) throws -> T {
        try connection.withLock { (handle: inout Connection?) throws -> T in
            let deadline = Deadline(seconds: timeout)
            do {
                if handle == nil {
                    handle = Connection(bus: try DBusConnection(deadline: deadline, environment: environment), sessions: sessions)
                    connectionsMade.withLock { $0 += 1 }
                }
                guard let current = handle else { throw LockboxError.secretServiceUnavailable(detail: "no connection") }
                return try body(Calls(connection: current, deadline: deadline, timeout: timeout))
            } catch let error as DBusConnectionError {
                try drop(&handle, Self.map(error, operation: operation, deadline: deadline), deadline: deadline)
            } catch let error as GLibError {
                try drop(&handle, Self.map(error, operation: operation, deadline: deadline), deadline: deadline)
            }
        }
    }

    /// Throws `mapped`, first dropping the connection (closing its session) unless the failure
    /// leaves it usable: the next call reconnects.
    private func drop(_ handle: inout Connection?, _ mapped: LockboxError, deadline: Deadline) throws -> Never {
        switch mapped {
        case .keyringLocked: break
        case .secretServiceTimeout: handle = nil  // a provider that stopped answering would not answer Close either
        default:
            // The provider keeps a session until its client's bus connection closes:
            // close it at once (a connection that failed may well refuse this too). That
            // call has its own half second, so a failed run may end up to 0.5 s past
            // its timeout; never after a timeout, which drops the connection unasked.
            if let current = handle { Calls(connection: current, deadline: deadline, timeout: timeout).closeSession() }
            handle = nil
        }
        throw mapped
    }

    /// An item's D-Bus properties, as one `Properties.GetAll` returns them.
    struct ItemProperties {
        var path: String
        /// `nil` when the reply had no `Attributes` of type `a{ss}`.
        var attributes: [String: String]?
        var label = ""
        var created: UInt64 = 0
        var modified: UInt64 = 0
        var locked = false
    }

    /// The calls of one ``run(_:_:)``: each is one D-Bus round trip unless it says otherwise.
    struct Calls {
        let connection: Connection
        let deadline: Deadline
        let timeout: Double

        /// Item paths whose attributes include `attributes` (no schema is matched):
        /// `Service.SearchItems`. Never unlocks (that would prompt).
        func searchItems(_ attributes: [String: String]) throws -> (unlocked: [String], locked: [String]) {
            let reply = try call(
                Self.servicePath, "org.freedesktop.Secret.Service", "SearchItems", [.stringDictionary(attributes)],
                replyType: "aoao")
            func paths(_ index: Int) -> [String] { reply[index].elements?.compactMap(\.text) ?? [] }
            return (paths(0), paths(1))
        }

        /// The properties of the item at `path`: `Properties.GetAll`.
        func itemProperties(_ path: String) throws -> ItemProperties {
            let reply = try call(
                path, "org.freedesktop.DBus.Properties", "GetAll", [.string("org.freedesktop.Secret.Item")],
                replyType: "a{sv}")
            var properties = ItemProperties(path: path)
            for (name, value) in reply[0].properties ?? [] {
                switch (name, value) {
                case ("Attributes", _): properties.attributes = value.stringDictionary
                case ("Label", .string(let label)): properties.label = label
                case ("Created", .uint64(let seconds)): properties.created = seconds
                case ("Modified", .uint64(let seconds)): properties.modified = seconds
                case ("Locked", .boolean(let locked)): properties.locked = locked
                default: break
                }
            }
            return properties
        }

        /// Deletes the item at `path`: `Item.Delete`. Lockbox never shows a prompt: if the
        /// provider wants the deletion confirmed (KeePassXC can be set to), the prompt is
        /// dismissed (one more call) and the deletion reported as refused, with what to do.
        func deleteItem(_ path: String) throws {
            let reply = try call(path, "org.freedesktop.Secret.Item", "Delete", [], replyType: "o")
            guard let promptPath = reply[0].text, promptPath != "/" else { return }
            dismiss(promptPath)
            throw LockboxError.secretServiceFailed(
                operation: "deleting an item",
                detail: "the provider asked to confirm the deletion with a prompt, which Lockbox never shows; allow deleting "
                    + "without confirmation in the provider's settings, or delete the item there")
        }

        /// Whether the collection `alias` is locked, asked of the provider (nothing cached): the
        /// collection's `Locked` property through its alias path, one call; a provider that does
        /// not serve alias paths is asked `ReadAlias` first.
        func isLocked(alias: String) throws -> Bool {
            let property: [DBusValue] = [.string("org.freedesktop.Secret.Collection"), .string("Locked")]
            let reply: [DBusValue]
            do {
                reply = try call(Self.servicePath + "/aliases/" + alias, "org.freedesktop.DBus.Properties", "Get", property, replyType: "v")
            } catch let error as DBusConnectionError where Self.meansTheCallFailed(error) {
                let aliasReply = try call(Self.servicePath, "org.freedesktop.Secret.Service", "ReadAlias", [.string(alias)], replyType: "o")
                let path = aliasReply[0].text ?? "/"
                guard path != "/" else {
                    throw LockboxError.secretServiceFailed(
                        operation: "finding the default collection",
                        detail: "the provider has no '\(alias)' collection; create one (e.g. in Passwords and Keys)")
                }
                reply = try call(path, "org.freedesktop.DBus.Properties", "Get", property, replyType: "v")
            }
            guard case .variant(.boolean(let locked)) = reply[0] else {
                throw LockboxError.secretServiceFailed(
                    operation: "reading the collection's state", detail: "a Locked property that is not a boolean")
            }
            return locked
        }

        /// The secret of the item at `path`: `Item.GetSecret` in the connection's session (the
        /// first secret of a connection also costs `OpenSession`). With libsecret's sessions,
        /// `Service.GetSecrets` through libsecret, `nil` when it returned none.
        func secret(at path: String) throws -> SecretBytes? {
            guard let opened = try lockboxSession() else { return try libsecretSecret(at: path) }
            let (reply, session) = try inSession(opened) { session in
                (try call(path, "org.freedesktop.Secret.Item", "GetSecret", [.objectPath(session.path)], replyType: "(oayays)"), session)
            }
            guard case .structure(let fields) = reply[0], fields.count == 4, case .bytes(let iv) = fields[1],
                case .bytes(let ciphertext) = fields[2]
            else { return nil }
            return try SessionCrypto.decrypt(iv: iv, ciphertext: ciphertext, key: session.key)
        }

        /// Closes the connection's session, if Lockbox opened one, before the connection is
        /// dropped: best effort, one call bounded by a short timeout, nothing reported.
        func closeSession() {
            guard let session = connection.session else { return }
            connection.session = nil
            _ = try? connection.bus.call(
                destination: Self.busName, path: session.path, interface: "org.freedesktop.Secret.Session",
                member: "Close", body: [], replySignature: "", deadline: Deadline(seconds: min(timeout, 0.5)))
        }

        /// Creates an item in the collection `alias`, replacing one with exactly these attributes
        /// (`Collection.CreateItem`, the secret encrypted for the session); returns the new item's
        /// path. A provider that wants a prompt for it (the collection locked since the caller
        /// checked) gets the prompt dismissed, and the call fails as
        /// ``LockboxError/keyringLocked(collection:)``: Lockbox never shows a prompt.
        func createItem(alias: String, label: String, attributes: [String: String], secret: SecretBytes, contentType: String) throws
            -> String
        {
            guard let opened = try lockboxSession() else {
                return try libsecretCreateItem(alias: alias, label: label, attributes: attributes, secret: secret, contentType: contentType)
            }
            let reply = try inSession(opened) { session in
                let (iv, ciphertext) = try SessionCrypto.encrypt(secret, key: session.key)
                let properties = DBusValue.array(
                    .dictEntry(.string, .variant),
                    [
                        .dictEntry(.string("org.freedesktop.Secret.Item.Label"), .variant(.string(label))),
                        .dictEntry(.string("org.freedesktop.Secret.Item.Attributes"), .variant(.stringDictionary(attributes))),
                    ])
                let value = DBusValue.structure([.objectPath(session.path), .bytes(iv), .bytes(ciphertext), .string(contentType)])
                return try call(
                    Self.servicePath + "/aliases/" + alias, "org.freedesktop.Secret.Collection", "CreateItem",
                    [properties, value, .boolean(true)], replyType: "oo")
            }
            let item = reply[0].text ?? "/"
            let prompt = reply[1].text ?? "/"
            if item == "/" {
                guard prompt != "/" else {
                    throw LockboxError.secretServiceFailed(
                        operation: "storing an item", detail: "the provider returned neither an item nor a prompt")
                }
                dismiss(prompt)
                throw LockboxError.keyringLocked(collection: alias)
            }
            return item
        }

        /// Runs `body` with `session`, the connection's; if the provider no longer knows it
        /// (`NoSession`: it restarted, or closed it), opens a new one and runs `body` once more.
        private func inSession<T>(_ session: Session, _ body: (Session) throws -> T) throws -> T {
            do {
                return try body(session)
            } catch let error as DBusConnectionError where error.remoteName == "org.freedesktop.Secret.Error.NoSession" {
                connection.session = nil
                guard let fresh = try lockboxSession() else { throw error }
                return try body(fresh)
            }
        }

        /// The connection's encrypted session, opened on first need (`OpenSession`), or `nil` when
        /// this connection uses libsecret's. A provider that does not support the algorithm
        /// (`NotSupported`) moves the connection to libsecret's sessions, which libsecret then
        /// negotiates as it would for any client.
        private func lockboxSession() throws -> Session? {
            if connection.sessions == .libsecretFallback { return nil }
            if let session = connection.session { return session }
            // A shared value with a leading zero byte is discarded (SessionCrypto): one in 256
            // exchanges, so four in a row is one in 2^32.
            for _ in 0..<4 {
                let pair = try SessionCrypto.makeKeyPair()
                let reply: [DBusValue]
                do {
                    reply = try call(
                        Self.servicePath, "org.freedesktop.Secret.Service", "OpenSession",
                        [.string(SessionCrypto.algorithm), .variant(.bytes(pair.publicValue))], replyType: "vo")
                } catch let error as DBusConnectionError where error.remoteName == "org.freedesktop.DBus.Error.NotSupported" {
                    try SecretServiceClient.loadLibsecret()
                    connection.sessions = .libsecretFallback
                    return nil
                }
                guard case .variant(.bytes(let providerValue)) = reply[0], let path = reply[1].text, path != "/" else {
                    throw LockboxError.secretServiceFailed(operation: "opening an encrypted session", detail: "an unexpected reply")
                }
                if let key = try SessionCrypto.sessionKey(exponent: pair.exponent, providerValue: providerValue) {
                    let session = Session(path: path, key: key)
                    connection.session = session
                    return session
                }
                _ = try? call(path, "org.freedesktop.Secret.Session", "Close", [], replyType: "")
            }
            throw LockboxError.secretServiceFailed(operation: "opening an encrypted session", detail: "no usable key in four exchanges")
        }

        /// Dismisses the prompt at `path` (one call; a failure is ignored: the prompt is not shown
        /// either way).
        private func dismiss(_ prompt: String) {
            _ = try? call(prompt, "org.freedesktop.Secret.Prompt", "Dismiss", [], replyType: "")
        }

        /// The secret of the item at `path` through libsecret (`Service.GetSecrets` in libsecret's
        /// session), or `nil` when the provider returned none.
        private func libsecretSecret(at path: String) throws -> SecretBytes? {
            let service = try secretService()
            let fetched = try withGError { error in
                secret_service_get_secret_for_dbus_path_sync(service, path, deadline.cancellable, error)
            }
            guard let value = fetched else { return nil }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            var length = 0
            let bytes = secret_value_get(value, &length)
            return SecretBytes(count: length) { out in
                if let bytes, length > 0, let target = out.baseAddress { target.copyMemory(from: bytes, byteCount: length) }
            }
        }

        /// ``createItem(alias:label:attributes:secret:contentType:)`` through libsecret, which
        /// encrypts the secret for its session.
        private func libsecretCreateItem(
            alias: String, label: String, attributes: [String: String], secret: SecretBytes,
            contentType: String
        ) throws -> String {
            let service = try secretService()
            let properties = GVariantTable([
                "org.freedesktop.Secret.Item.Label": g_variant_new_string(label),
                "org.freedesktop.Secret.Item.Attributes": gVariantStringDictionary(attributes),
            ])
            // secret_value_new copies the bytes into libsecret's own locked, wiped memory.
            let value = secret.withUnsafeBytes { bytes in
                UnsafeRawPointer(bytes.bytes).withMemoryRebound(to: CChar.self, capacity: max(1, bytes.count)) {
                    secret_value_new($0, bytes.count, contentType)
                }
            }
            defer { if let value { secret_value_unref(UnsafeMutableRawPointer(value)) } }
            let path = try withGError { error in
                secret_service_create_item_dbus_path_sync(
                    service, Self.servicePath + "/aliases/" + alias, properties.table, value,
                    SECRET_ITEM_CREATE_REPLACE, deadline.cancellable, error)
            }
            guard let path else {
                throw LockboxError.secretServiceFailed(operation: "storing an item", detail: "the provider returned no item")
            }
            defer { g_free(path) }
            return String(cString: path)
        }

        /// libsecret's service proxy, made on first use in this connection; libsecret opens the
        /// session on its first secret. The proxy is the lean one of `lockbox_secret_service_open`
        /// (CLibsecretFallback.h): no service properties, no signal match rules, no auto-start, so its
        /// set-up costs two bus calls (AddMatch for the owner's changes, GetNameOwner) where
        /// `secret_service_get_sync`'s costs seven.
        private func secretService() throws -> OpaquePointer {
            if let service = connection.service { return service }
            try SecretServiceClient.loadLibsecret()
            let service = try withGError { error in lockbox_secret_service_open(deadline.cancellable, error) }
            guard let service else { throw LockboxError.secretServiceUnavailable(detail: "libsecret returned no service") }
            connection.service = service
            return service
        }

        /// One plain D-Bus method call to the provider, returning the reply's values, which have the
        /// types `replyType` spells (a reply of another shape fails the call, so the reading code
        /// may index the values `replyType` promises).
        ///
        /// The connection's first call to the provider is made again, once, if the provider
        /// answers it `UnknownMethod`. gnome-keyring registers a caller on its main loop at a
        /// higher priority than the call itself, but when the loop is busy the call can run first:
        /// a method that needs the caller (`SearchItems`, for one) then finds none, does nothing,
        /// and GDBus answers `UnknownMethod`. By the time that answer arrives the registration is
        /// due before any later call, so the second attempt is answered; a
        /// provider that really lacks the method answers it the same way again, and that error is
        /// thrown. Calls after the provider's first answer are never repeated.
        private func call(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue], replyType: String) throws
            -> [DBusValue]
        {
            func send() throws -> [DBusValue] {
                try connection.bus.call(
                    destination: Self.busName, path: path, interface: interface, member: method, body: arguments,
                    replySignature: replyType, deadline: deadline)
            }
            let first = !connection.providerAnswered
            defer { connection.providerAnswered = true }
            do {
                return try send()
            } catch let error as DBusConnectionError where first && error.remoteName == "org.freedesktop.DBus.Error.UnknownMethod" {
                return try send()
            }
        }

        private static let servicePath = SecretServiceClient.servicePath
        private static let busName = SecretServiceClient.busName

        /// A failure of the call itself, which another call may avoid: not a missing provider,
        /// a timeout or a broken connection.
        private static func meansTheCallFailed(_ error: DBusConnectionError) -> Bool {
            switch error {
            case .remote(let name, _): !meansNoProvider(name)
            case .unexpectedReply: true
            case .noBus, .timedOut, .closed, .malformed: false
            }
        }
    }

    /// Loads libsecret (once per process; see CLibsecretFallback.h), for its sessions: a system
    /// without it is reported as the Secret Service being unavailable.
    fileprivate static func loadLibsecret() throws {
        var message = [CChar](repeating: 0, count: 512)
        if lockbox_libsecret_load(&message, message.count) == 0 {
            let detail = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw LockboxError.secretServiceUnavailable(detail: "libsecret could not be loaded: \(detail)")
        }
    }

    /// A D-Bus error name that says nobody owns the provider's name.
    static func meansNoProvider(_ name: String) -> Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }

    private static func map(_ error: DBusConnectionError, operation: String, deadline: Deadline) -> LockboxError {
        switch error {
        case .noBus(let detail): return .noSessionBus(detail: detail)
        case .timedOut: return .secretServiceTimeout(operation: operation, seconds: deadline.seconds)
        case .remote(let name, let message):
            if meansNoProvider(name) { return .secretServiceUnavailable(detail: message.isEmpty ? name : message) }
            if name == "org.freedesktop.Secret.Error.IsLocked" { return .keyringLocked(collection: "default") }
            return .secretServiceFailed(operation: operation, detail: message.isEmpty ? name : "\(message) (\(name))")
        case .closed, .malformed, .unexpectedReply: return .secretServiceFailed(operation: operation, detail: error.description)
        }
    }

    private static func map(_ error: GLibError, operation: String, deadline: Deadline) -> LockboxError {
        if error.isCancelled || deadline.expired {
            return .secretServiceTimeout(operation: operation, seconds: deadline.seconds)
        }
        if error.domain == "secret-error" && error.code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            return .keyringLocked(collection: "default")
        }
        switch error.remoteName {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return .secretServiceUnavailable(detail: error.message)
        case "org.freedesktop.Secret.Error.IsLocked":
            return .keyringLocked(collection: "default")
        default:
            break
        }
        let message = error.message
        if message.contains("Cannot autolaunch D-Bus") || message.contains("DBUS_SESSION_BUS_ADDRESS")
            || (error.domain == "g-io-error-quark" && message.contains("Could not connect"))
        {
            return .noSessionBus(detail: message)
        }
        if message.contains("was not provided by any .service files") {
            return .secretServiceUnavailable(detail: message)
        }
        return .secretServiceFailed(operation: operation, detail: message)
    }
}

/// A `GHashTable` of strings to D-Bus values (`a{sv}` as libsecret takes properties), owned by
/// Swift (unref'd on release). Takes the values' floating references.
final class GVariantTable {
    let table: OpaquePointer

    init(_ values: [String: OpaquePointer?]) {
        table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, { g_variant_unref(OpaquePointer($0)) })
        for (key, value) in values {
            guard let value else { continue }
            g_hash_table_insert(table, g_strdup(key), UnsafeMutableRawPointer(g_variant_ref_sink(value)))
        }
    }

    deinit { g_hash_table_unref(table) }
}
