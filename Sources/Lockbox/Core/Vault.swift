import Foundation

/// A keychain-like vault: secrets addressed by (service, account) over any ``SecretStore``.
///
/// ```swift
/// let store = try EncryptedFileStore.open(at: "/var/lib/myapp/vault.lockbox",
///                                         credential: .keyFile("/run/credentials/myapp.service/vault-key"))
/// let vault = Vault(store: store)
/// try vault.set("eyJhbGciOi…", service: "com.example.api", account: "alice", kind: .token)
/// let token = try vault.string(service: "com.example.api", account: "alice")
/// ```
///
/// `Vault` is a small value over a shared store: copy it freely and call it from any thread.
public struct Vault: Sendable {
    /// The store this vault reads and writes.
    public let store: any SecretStore
    /// What vouches for a fresh authentication when a protected item is read; `nil` means no
    /// protected item can be read.
    public let freshness: (any FreshAuthentication)?
    /// Where the async variants of the methods run the blocking store calls.
    public let executor: BlockingExecutor

    /// Creates a vault over `store`. Items stored with ``ItemAccess/freshAuthentication`` are
    /// returned only while `freshness` (e.g. a ``ReauthGate``) says a fresh authentication is in force.
    /// The async variants of the methods (`try await vault.get(…)`) run on `executor`.
    public init(store: any SecretStore, freshness: (any FreshAuthentication)? = nil, executor: BlockingExecutor = .shared) {
        self.store = store
        self.freshness = freshness
        self.executor = executor
    }

    // MARK: Binary secrets

    /// The secret under (service, account), or `nil` if none is stored. A protected item throws
    /// ``LockboxError/reauthenticationRequired(_:)`` outside a re-authentication window.
    public func get(service: String, account: String) throws -> SecretBytes? {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        guard let item = try store.item(key) else { return nil }
        if item.metadata.access == .freshAuthentication {
            guard let freshness else {
                throw LockboxError.reauthenticationRequired("'\(account)' on '\(service)' is protected")
            }
            try freshness.requireFreshAuthentication()
        }
        return item.secret
    }

    /// The secret under (service, account); throws ``LockboxError/itemNotFound(service:account:)``
    /// if none is stored.
    public func require(service: String, account: String) throws -> SecretBytes {
        guard let secret = try get(service: service, account: account) else {
            throw LockboxError.itemNotFound(service: service, account: account)
        }
        return secret
    }

    /// Stores `secret` under (service, account), replacing what was there. With
    /// `access: .freshAuthentication` it can later be read only inside a re-authentication window.
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind = .generic,
        label: String? = nil, attributes: [String: String] = [:], access: ItemAccess = .always
    ) throws {
        let key = ItemKey(service: service, account: account)
        let options = ItemOptions(kind: kind, label: label, attributes: attributes, access: access)
        try ItemLimits.validate(key, options: options, secretCount: secret.count)
        try store.set(secret, for: key, options: options)
    }

    // MARK: String conveniences

    /// The secret under (service, account) decoded as UTF-8, or `nil` if none is stored.
    ///
    /// Throws ``LockboxError/invalidArgument(_:)`` if the stored bytes are not UTF-8.
    /// The returned `String` cannot be wiped; prefer ``get(service:account:)`` for long-lived code.
    public func string(service: String, account: String) throws -> String? {
        guard let secret = try get(service: service, account: account) else { return nil }
        guard let string = secret.stringValue() else {
            throw LockboxError.invalidArgument(
                "the item for account '\(account)' on service '\(service)' holds binary data, not UTF-8 text; read it with get(service:account:)")
        }
        return string
    }

    /// Stores the UTF-8 bytes of `string` under (service, account).
    public func set(
        _ string: String, service: String, account: String, kind: ItemKind = .generic,
        label: String? = nil, attributes: [String: String] = [:], access: ItemAccess = .always
    ) throws {
        try set(SecretBytes(utf8: string), service: service, account: account, kind: kind,
                label: label, attributes: attributes, access: access)
    }

    // MARK: Metadata and removal

    /// The metadata of the item under (service, account), or `nil` if none is stored.
    public func metadata(service: String, account: String) throws -> ItemMetadata? {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        return try store.metadata(key)
    }

    /// Removes the item under (service, account); returns whether there was one.
    @discardableResult
    public func delete(service: String, account: String) throws -> Bool {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        return try store.delete(key)
    }

    /// Metadata (never secrets) of every item, or of one service's items.
    public func list(service: String? = nil) throws -> [ItemMetadata] {
        if let service { try ItemLimits.validateService(service) }
        return try store.list(service: service)
    }

    /// Removes every item of `service`; returns how many were removed.
    @discardableResult
    public func wipe(service: String) throws -> Int {
        try ItemLimits.validateService(service)
        return try store.wipe(service: service)
    }

    /// Removes every item; returns how many were removed.
    @discardableResult
    public func wipeAll() throws -> Int {
        try store.wipeAll()
    }
}
