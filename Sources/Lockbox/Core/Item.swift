import FoundationEssentials

/// The address of an item: which service it belongs to and which account within that service.
///
/// Both parts are metadata, not secrets: they appear in listings and error messages.
public struct ItemKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The service, e.g. `com.example.api`.
    public var service: String
    /// The account within the service, e.g. a user name, `refresh-token` or `device`.
    public var account: String

    /// Creates the address of an item.
    public init(service: String, account: String) {
        self.service = service
        self.account = account
    }

    /// `account@service`.
    public var description: String { "\(account)@\(service)" }
}

/// What an item holds. Kinds are open-ended strings; the common ones have names.
public struct ItemKind: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The kind as stored, e.g. `token`.
    public var rawValue: String
    /// Creates a kind from its stored name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Creates a kind from a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }
    /// The stored name.
    public var description: String { rawValue }

    /// Anything without a more precise kind.
    public static let generic: ItemKind = "generic"
    /// A password or passphrase.
    public static let password: ItemKind = "password"
    /// An access or refresh token.
    public static let token: ItemKind = "token"
    /// A device identifier.
    public static let deviceID: ItemKind = "device-id"
    /// A guest or anonymous profile's identifier.
    public static let guestID: ItemKind = "guest-id"
    /// A PIN hash (Argon2id PHC string).
    public static let pinHash: ItemKind = "pin-hash"
}

/// When an item's secret may be read.
public enum ItemAccess: String, Sendable, Hashable, Codable {
    /// Whenever the store is open: tokens a service needs unattended.
    case always
    /// Only inside a fresh re-authentication window (a PIN or passphrase proved recently), like
    /// Apple's user-presence access control. Listing still shows the item's metadata.
    case freshAuthentication = "fresh-authentication"
}

/// What may be stored with a secret besides its bytes.
public struct ItemOptions: Sendable, Hashable {
    /// What the item holds.
    public var kind: ItemKind
    /// A human-readable label; `nil` gives `Password for 'ACCOUNT' on 'SERVICE'`.
    public var label: String?
    /// Extra non-secret attributes, searchable by other tools in stores that support it.
    /// Names starting with `lockbox.` are reserved.
    public var attributes: [String: String]
    /// When the secret may be read.
    public var access: ItemAccess
    /// When the secret stops being valid: after it, ``Vault/get(service:account:)`` refuses it
    /// with ``LockboxError/itemExpired(service:account:expired:)`` and ``Vault/wipeExpired(service:)``
    /// removes it; `nil` never expires.
    public var expires: Date?
    /// Lockbox's own bookkeeping (the previous version, companions), kept as reserved attributes.
    package var reserved = ItemReserved()

    /// Creates item options.
    public init(
        kind: ItemKind = .generic, label: String? = nil, attributes: [String: String] = [:], access: ItemAccess = .always,
        expires: Date? = nil
    ) {
        self.kind = kind
        self.label = label
        self.attributes = attributes
        self.access = access
        self.expires = expires
    }

    /// The label to store for `key`: the given one, or the conventional default.
    package func resolvedLabel(for key: ItemKey) -> String {
        label ?? "Password for '\(key.account)' on '\(key.service)'"
    }
}

/// Everything about an item except its secret: what `list` returns.
public struct ItemMetadata: Hashable, Sendable, Codable {
    /// Where the item is stored.
    public var key: ItemKey
    /// What the item holds.
    public var kind: ItemKind
    /// Its human-readable label.
    public var label: String
    /// When it was first stored.
    public var created: Date
    /// When its secret or metadata last changed.
    public var modified: Date
    /// Extra non-secret attributes.
    public var attributes: [String: String]
    /// When the secret may be read.
    public var access: ItemAccess
    /// When the secret stops being valid (``ItemOptions/expires``); `nil` never expires.
    public var expires: Date?
    /// Until when the value this item's secret replaced stays readable with
    /// ``Vault/previous(service:account:)``; `nil` when it holds none. Filled in by ``Vault``'s
    /// `list` and `metadata` (a store's own `list` leaves it `nil`).
    public var previousUntil: Date?
    /// Lockbox's own bookkeeping (the previous version, companions), kept as reserved attributes.
    package var reserved = ItemReserved()

    /// Creates item metadata.
    public init(
        key: ItemKey, kind: ItemKind, label: String, created: Date, modified: Date,
        attributes: [String: String] = [:], access: ItemAccess = .always, expires: Date? = nil
    ) {
        self.key = key
        self.kind = kind
        self.label = label
        self.created = created
        self.modified = modified
        self.attributes = attributes
        self.access = access
        self.expires = expires
    }

    /// The metadata a store gives an item written with `options` under `key`.
    package init(key: ItemKey, options: ItemOptions, created: Date, modified: Date) {
        self.init(
            key: key, kind: options.kind, label: options.resolvedLabel(for: key), created: created, modified: modified,
            attributes: options.attributes, access: options.access, expires: options.expires)
        reserved = options.reserved
    }

    /// Whether the secret has expired at `now`.
    public func isExpired(at now: Date = Date()) -> Bool {
        expires.map { $0 <= now } ?? false
    }

    private enum CodingKeys: String, CodingKey {
        case key, kind, label, created, modified, attributes, access, expires, previousUntil
    }

    /// The item's service.
    public var service: String { key.service }
    /// The item's account.
    public var account: String { key.account }
}

/// The limits every store enforces, so that an item that one store accepts fits in every other.
public enum ItemLimits {
    /// Longest service, account, kind or label, in UTF-8 bytes.
    public static let maxNameBytes = 1024
    /// Most attributes per item.
    public static let maxAttributes = 64
    /// Longest attribute value, in UTF-8 bytes.
    public static let maxAttributeValueBytes = 4096
    /// Largest secret, in bytes.
    public static let maxSecretBytes = 1 << 24
    /// Attribute names Lockbox keeps for itself (e.g. `lockbox.access` in the file vault).
    public static let reservedAttributePrefix = "lockbox."

    /// Throws ``LockboxError/invalidArgument(_:)`` naming the first rule that `key`, `options`
    /// or the secret's size breaks.
    package static func validate(_ key: ItemKey, options: ItemOptions? = nil, secretCount: Int? = nil) throws {
        try checkName(key.service, what: "service")
        try checkName(key.account, what: "account")
        guard let options else { return }
        try checkName(options.kind.rawValue, what: "kind")
        if let label = options.label { try checkName(label, what: "label", allowEmpty: true) }
        if let expires = options.expires {
            let milliseconds = expires.timeIntervalSince1970 * 1000
            guard milliseconds.isFinite, abs(milliseconds) < Double(VaultPayload.timestampLimit) else {
                throw LockboxError.invalidArgument("the expiry time is out of range")
            }
        }
        guard options.attributes.count <= maxAttributes else {
            throw LockboxError.invalidArgument("an item may carry at most \(maxAttributes) attributes, not \(options.attributes.count)")
        }
        for (name, value) in options.attributes {
            try checkName(name, what: "attribute name")
            if name.hasPrefix(reservedAttributePrefix) {
                throw LockboxError.invalidArgument("attribute names starting with '\(reservedAttributePrefix)' are reserved for Lockbox")
            }
            guard value.utf8.count <= maxAttributeValueBytes else {
                throw LockboxError.invalidArgument("attribute '\(name)' is longer than \(maxAttributeValueBytes) bytes")
            }
        }
        if let secretCount, secretCount > maxSecretBytes {
            throw LockboxError.invalidArgument("the secret is \(secretCount) bytes; the limit is \(maxSecretBytes) bytes")
        }
    }

    /// Throws ``LockboxError/invalidArgument(_:)`` for a service name no item can have.
    package static func validateService(_ service: String) throws {
        try checkName(service, what: "service")
    }

    private static func checkName(_ value: String, what: String, allowEmpty: Bool = false) throws {
        if value.isEmpty && !allowEmpty { throw LockboxError.invalidArgument("the \(what) must not be empty") }
        if value.utf8.count > maxNameBytes {
            throw LockboxError.invalidArgument("the \(what) is longer than \(maxNameBytes) bytes")
        }
        if value.utf8.contains(0) { throw LockboxError.invalidArgument("the \(what) must not contain a NUL character") }
    }
}
