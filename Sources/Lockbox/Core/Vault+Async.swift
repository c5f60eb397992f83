/// The async variants: each runs the operation's one implementation over the store as awaited
/// (an ``AsyncSecretStore`` directly, a blocking ``SecretStore`` offloaded to ``Vault/executor``),
/// so a caller on Swift's cooperative pool suspends instead of blocking a thread.
extension Vault {
    /// ``get(service:account:)``, awaited.
    public func get(service: String, account: String) async throws -> SecretBytes? {
        try await get(service: service, account: account, via: access.awaiting)
    }

    /// ``require(service:account:)``, awaited.
    public func require(service: String, account: String) async throws -> SecretBytes {
        try await require(service: service, account: account, via: access.awaiting)
    }

    /// ``set(_:service:account:kind:label:attributes:access:)-(SecretBytes,_,_,_,_,_,_)``, awaited.
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil
    ) async throws {
        let changes = ItemChanges(kind: kind, label: label, attributes: attributes, access: access)
        _ = try await set(secret, service: service, account: account, changes: changes, when: .always, via: self.access.awaiting)
    }

    /// ``set(_:service:account:kind:label:attributes:access:when:)``, awaited.
    @discardableResult
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil, when condition: WriteCondition
    ) async throws -> Bool {
        let changes = ItemChanges(kind: kind, label: label, attributes: attributes, access: access)
        return try await set(secret, service: service, account: account, changes: changes, when: condition, via: self.access.awaiting)
    }

    /// ``delete(service:account:ifCurrent:)``, awaited.
    @discardableResult
    public func delete(service: String, account: String, ifCurrent expected: SecretBytes) async throws -> Bool {
        try await delete(service: service, account: account, ifCurrent: expected, via: access.awaiting)
    }

    /// ``string(service:account:)``, awaited.
    public func string(service: String, account: String) async throws -> String? {
        try await string(service: service, account: account, via: access.awaiting)
    }

    /// ``set(_:service:account:kind:label:attributes:access:)-(String,_,_,_,_,_,_)``, awaited.
    public func set(
        _ string: String, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil
    ) async throws {
        try await set(
            SecretBytes(utf8: string), service: service, account: account, kind: kind,
            label: label, attributes: attributes, access: access)
    }

    /// ``metadata(service:account:)``, awaited.
    public func metadata(service: String, account: String) async throws -> ItemMetadata? {
        try await metadata(service: service, account: account, via: access.awaiting)
    }

    /// ``delete(service:account:)``, awaited.
    @discardableResult
    public func delete(service: String, account: String) async throws -> Bool {
        try await delete(service: service, account: account, via: access.awaiting)
    }

    /// ``list(service:)``, awaited.
    public func list(service: String? = nil) async throws -> [ItemMetadata] {
        try await list(service: service, via: access.awaiting)
    }

    /// ``wipe(service:)``, awaited.
    @discardableResult
    public func wipe(service: String) async throws -> Int {
        try await wipe(service: service, via: access.awaiting)
    }

    /// ``wipeAll()``, awaited.
    @discardableResult
    public func wipeAll() async throws -> Int {
        try await wipeAll(via: access.awaiting)
    }
}
