/// The async variants: each runs the blocking method of the same name on ``Vault/executor``, so
/// a caller on Swift's cooperative pool suspends instead of blocking a thread. One
/// implementation: the rules (validation, protected items) are the blocking methods'.
extension Vault {
    /// ``get(service:account:)``, run on ``executor``.
    public func get(service: String, account: String) async throws -> SecretBytes? {
        try await executor.run { try self.get(service: service, account: account) }
    }

    /// ``require(service:account:)``, run on ``executor``.
    public func require(service: String, account: String) async throws -> SecretBytes {
        try await executor.run { try self.require(service: service, account: account) }
    }

    /// ``set(_:service:account:kind:label:attributes:access:)-(SecretBytes,_,_,_,_,_,_)``, run on ``executor``.
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind = .generic,
        label: String? = nil, attributes: [String: String] = [:], access: ItemAccess = .always
    ) async throws {
        try await executor.run {
            try self.set(secret, service: service, account: account, kind: kind, label: label, attributes: attributes, access: access)
        }
    }

    /// ``string(service:account:)``, run on ``executor``.
    public func string(service: String, account: String) async throws -> String? {
        try await executor.run { try self.string(service: service, account: account) }
    }

    /// ``set(_:service:account:kind:label:attributes:access:)-(String,_,_,_,_,_,_)``, run on ``executor``.
    public func set(
        _ string: String, service: String, account: String, kind: ItemKind = .generic,
        label: String? = nil, attributes: [String: String] = [:], access: ItemAccess = .always
    ) async throws {
        try await executor.run {
            try self.set(string, service: service, account: account, kind: kind, label: label, attributes: attributes, access: access)
        }
    }

    /// ``metadata(service:account:)``, run on ``executor``.
    public func metadata(service: String, account: String) async throws -> ItemMetadata? {
        try await executor.run { try self.metadata(service: service, account: account) }
    }

    /// ``delete(service:account:)``, run on ``executor``.
    @discardableResult
    public func delete(service: String, account: String) async throws -> Bool {
        try await executor.run { try self.delete(service: service, account: account) }
    }

    /// ``list(service:)``, run on ``executor``.
    public func list(service: String? = nil) async throws -> [ItemMetadata] {
        try await executor.run { try self.list(service: service) }
    }

    /// ``wipe(service:)``, run on ``executor``.
    @discardableResult
    public func wipe(service: String) async throws -> Int {
        try await executor.run { try self.wipe(service: service) }
    }

    /// ``wipeAll()``, run on ``executor``.
    @discardableResult
    public func wipeAll() async throws -> Int {
        try await executor.run { try self.wipeAll() }
    }
}
