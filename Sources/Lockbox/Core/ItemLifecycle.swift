import FoundationEssentials

/// Lockbox's own bookkeeping of an item, which every store keeps beside its metadata as reserved
/// attributes (docs/FORMAT.md §7.1: `lockbox.previous`, `lockbox.companion`,
/// `lockbox.companion-id`; the Secret Service spells the prefix `lockbox:`). Callers never set it:
/// ``Vault`` does, to keep a previous version and the secrets that belong to an item.
package struct ItemReserved: Sendable, Hashable {
    /// `lockbox.previous`: the ID of the previous version this item holds, which its
    /// ``ItemCompanion/previous`` companion carries as ``companionID``.
    package var previousID: String?
    /// `lockbox.companion`: what this item is to the item it belongs to (an ``ItemCompanion``
    /// raw value, or a role of a newer Lockbox), or `nil` for an item of its own. Companions
    /// are not listed.
    package var companion: String?
    /// `lockbox.companion-id`: the ID that binds a previous version to its item's ``previousID``.
    package var companionID: String?

    /// Bookkeeping of these parts.
    package init(previousID: String? = nil, companion: String? = nil, companionID: String? = nil) {
        self.previousID = previousID
        self.companion = companion
        self.companionID = companionID
    }
}

/// What a companion item is to the item it belongs to. A companion lives in the same service,
/// under the account `lockbox.ROLE:ACCOUNT`, so wiping the service removes it with its item.
package enum ItemCompanion: String, Sendable, CaseIterable {
    /// The value the item's secret replaced (`set --keep-previous`), readable until the
    /// companion's expiry (the grace period) or the next rotation.
    case previous
    /// git's `oauth_refresh_token` stored with a git credential.
    case oauthRefreshToken = "oauth-refresh-token"

    /// The address of `key`'s companion of this role.
    package func key(for key: ItemKey) -> ItemKey {
        ItemKey(service: key.service, account: "lockbox.\(rawValue):" + key.account)
    }

    /// ``key(for:)``, refused with ``LockboxError/invalidArgument(_:)`` when the account is too
    /// long for a companion's account to fit the limits.
    package func checkedKey(for key: ItemKey) throws -> ItemKey {
        let companion = self.key(for: key)
        guard companion.account.utf8.count <= ItemLimits.maxNameBytes else {
            throw LockboxError.invalidArgument(
                "the account is too long to keep a \(self == .previous ? "previous version" : "companion secret") beside it")
        }
        return companion
    }
}

/// The reserved attributes that carry an item's expiry and ``ItemReserved``, by name without
/// the store's prefix (`lockbox.` in the file vault and PostgreSQL, `lockbox:` in the Secret Service).
package enum ReservedAttributes {
    /// Expiry: decimal milliseconds since 1970-01-01T00:00:00Z.
    package static let expires = "expires"
    /// ``ItemReserved/previousID``.
    package static let previous = "previous"
    /// ``ItemReserved/companion``.
    package static let companion = "companion"
    /// ``ItemReserved/companionID``.
    package static let companionID = "companion-id"
    /// Every name this version knows besides `access`.
    package static let names = [expires, previous, companion, companionID]

    /// The attributes for `expires` and `reserved`, by name without prefix.
    package static func encode(expires: Date?, reserved: ItemReserved) -> [String: String] {
        var attributes: [String: String] = [:]
        if let expires { attributes[Self.expires] = String(VaultPayload.milliseconds(expires)) }
        if let previous = reserved.previousID { attributes[Self.previous] = previous }
        if let companion = reserved.companion { attributes[Self.companion] = companion }
        if let companionID = reserved.companionID { attributes[Self.companionID] = companionID }
        return attributes
    }

    /// The expiry and bookkeeping in `value(name)` (by name without prefix); `nil` with the name
    /// of the first malformed value: an expiry that is not a decimal integer within ±2^48 ms,
    /// an ID that is not 1–64 lower-case hex digits, an empty role.
    package static func decode(_ value: (String) -> String?) -> Result<(Date?, ItemReserved), Malformed> {
        var expiresAt: Date?
        if let text = value(expires) {
            guard text.utf8.count <= 20, let milliseconds = Int64(text), abs(milliseconds) <= VaultPayload.timestampLimit else {
                return .failure(Malformed(name: expires))
            }
            expiresAt = VaultPayload.date(milliseconds: milliseconds)
        }
        var reserved = ItemReserved()
        for (name, path) in [(previous, \ItemReserved.previousID), (companionID, \ItemReserved.companionID)] {
            guard let text = value(name) else { continue }
            guard isID(text) else { return .failure(Malformed(name: name)) }
            reserved[keyPath: path] = text
        }
        if let role = value(companion) {
            guard !role.isEmpty else { return .failure(Malformed(name: companion)) }
            reserved.companion = role
        }
        return .success((expiresAt, reserved))
    }

    /// A reserved attribute whose value this version cannot read.
    package struct Malformed: Error {
        /// Its name without prefix.
        package var name: String
    }

    /// A fresh random ID for ``ItemReserved/previousID``: 32 lower-case hex digits.
    package static func newID() -> String {
        Sodium.randomBytes(16).hexString
    }

    private static func isID(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension ItemMetadata {
    /// Whether this is a companion of another item (its previous version, a refresh token)
    /// rather than an item of its own: ``Vault/list(service:)`` leaves companions out.
    package var isCompanion: Bool { reserved.companion != nil }
}
