import FoundationEssentials

/// Items that expire, and the previous version kept through a rotation.
///
/// An item's expiry (``ItemOptions/expires``) belongs to its value: ``get(service:account:)``
/// refuses an expired secret with ``LockboxError/itemExpired(service:account:expired:)``
/// (``get(service:account:allowExpired:)`` reads it anyway) and ``wipeExpired(service:)`` removes it.
///
/// A rotation with a grace period (``set(_:service:account:changes:when:keepingPreviousFor:)``)
/// keeps the value it replaces beside the item, readable with ``previous(service:account:)``
/// until the grace period ends or the next rotation, and ``restorePrevious(service:account:keepingReplacedFor:)``
/// puts it back. One previous version at most: keeping another replaces it. The previous value
/// is an item of the same store (the same service, the account `lockbox.previous:ACCOUNT`,
/// bound to the item by a random ID both carry), sealed and protected like the item, never
/// listed; docs/FORMAT.md §7.1 describes it.
extension Vault {
    /// The grace period ``set(_:service:account:changes:when:keepingPreviousFor:)`` and
    /// `lockbox set --keep-previous` use when none is given: one day.
    public static let defaultGracePeriod: Duration = .seconds(24 * 3600)

    /// The secret under (service, account), or `nil` if none is stored; with `allowExpired`, a
    /// secret whose expiry has passed is returned too instead of refused.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func get(service: String, account: String, allowExpired: Bool) throws -> SecretBytes? {
        try access.blocking { try await self.get(service: service, account: account, allowExpired: allowExpired, via: $0) }
    }

    /// ``require(service:account:)``; with `allowExpired`, an expired secret is returned too.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func require(service: String, account: String, allowExpired: Bool) throws -> SecretBytes {
        try access.blocking { try await self.require(service: service, account: account, allowExpired: allowExpired, via: $0) }
    }

    /// Stores `secret` under (service, account) with `changes`, if `condition` holds for the
    /// item there now; returns whether it wrote. With `grace`, the value it replaces stays
    /// readable with ``previous(service:account:)`` for that long (or until the next rotation),
    /// replacing any previous version kept before; without, any previous version is dropped.
    /// `grace` must be positive. Throws ``LockboxError/invalidArgument(_:)`` for an account too
    /// long to keep a previous version beside it, or when an item of its own already has the
    /// previous version's address.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    @discardableResult
    public func set(
        _ secret: SecretBytes, service: String, account: String, changes: ItemChanges, when condition: WriteCondition = .always,
        keepingPreviousFor grace: Duration? = nil
    ) throws -> Bool {
        try access.blocking {
            try await self.set(
                secret, service: service, account: account, changes: changes, when: condition, keepingPreviousFor: grace, via: $0)
        }
    }

    /// The previous version of the item under (service, account) — the value a rotation with a
    /// grace period replaced — or `nil` if it holds none (none was kept, the grace period ended,
    /// or a later rotation dropped it). A protected item's previous version needs a fresh
    /// authentication as the item does.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func previous(service: String, account: String) throws -> SecretBytes? {
        try access.blocking { try await self.previous(service: service, account: account, via: $0) }
    }

    /// Puts the previous version of the item under (service, account) back as its secret; the
    /// value it replaces becomes the previous version for `grace` (so a restore can be undone
    /// within it). Kind, label, attributes and access are kept; the restored value does not
    /// expire. Throws ``LockboxError/itemNotFound(service:account:)`` without the item and
    /// ``LockboxError/noPreviousVersion(service:account:)`` when it holds none; returns `false`
    /// if another writer changed the item meanwhile (nothing was changed then).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    @discardableResult
    public func restorePrevious(service: String, account: String, keepingReplacedFor grace: Duration = Vault.defaultGracePeriod) throws
        -> Bool
    {
        try access.blocking { try await self.restorePrevious(service: service, account: account, keepingReplacedFor: grace, via: $0) }
    }

    /// Removes every item whose expiry has passed (in one service, or everywhere), and the previous
    /// versions whose grace period has ended; returns the addresses of the items removed (previous
    /// versions are not counted). An item rotated meanwhile is kept: each is removed only if it
    /// still holds the expired value.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    @discardableResult
    public func wipeExpired(service: String? = nil) throws -> [ItemKey] {
        try access.blocking { try await self.wipeExpired(service: service, via: $0) }
    }

    // MARK: Async variants

    /// ``get(service:account:allowExpired:)``, awaited.
    public func get(service: String, account: String, allowExpired: Bool) async throws -> SecretBytes? {
        try await get(service: service, account: account, allowExpired: allowExpired, via: access.awaiting)
    }

    /// ``require(service:account:allowExpired:)``, awaited.
    public func require(service: String, account: String, allowExpired: Bool) async throws -> SecretBytes {
        try await require(service: service, account: account, allowExpired: allowExpired, via: access.awaiting)
    }

    /// ``set(_:service:account:changes:when:keepingPreviousFor:)``, awaited.
    @discardableResult
    public func set(
        _ secret: SecretBytes, service: String, account: String, changes: ItemChanges, when condition: WriteCondition = .always,
        keepingPreviousFor grace: Duration? = nil
    ) async throws -> Bool {
        try await set(
            secret, service: service, account: account, changes: changes, when: condition, keepingPreviousFor: grace,
            via: access.awaiting)
    }

    /// ``previous(service:account:)``, awaited.
    public func previous(service: String, account: String) async throws -> SecretBytes? {
        try await previous(service: service, account: account, via: access.awaiting)
    }

    /// ``restorePrevious(service:account:keepingReplacedFor:)``, awaited.
    @discardableResult
    public func restorePrevious(
        service: String, account: String, keepingReplacedFor grace: Duration = Vault.defaultGracePeriod
    ) async throws -> Bool {
        try await restorePrevious(service: service, account: account, keepingReplacedFor: grace, via: access.awaiting)
    }

    /// ``wipeExpired(service:)``, awaited.
    @discardableResult
    public func wipeExpired(service: String? = nil) async throws -> [ItemKey] {
        try await wipeExpired(service: service, via: access.awaiting)
    }

    // MARK: The one implementation of each

    func set(
        _ secret: SecretBytes, service: String, account: String, changes: ItemChanges, when condition: WriteCondition,
        keepingPreviousFor grace: Duration?, via route: StoreRoute
    ) async throws -> Bool {
        guard let grace else {
            return try await set(secret, service: service, account: account, changes: changes, when: condition, via: route)
        }
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key, options: changes.options(over: nil), secretCount: secret.count)
        let graceSeconds = try Self.seconds(of: grace)
        let companionKey = try ItemCompanion.previous.checkedKey(for: key)
        if case .ifCurrent = condition { try await requireFreshnessToCompare(key, via: route) }
        // Another writer may come between the read and the write: the write is conditional on
        // the value read, and a lost race is read again (a few times, then reported as busy).
        for _ in 0..<16 {
            guard let current = try await route.store.item(key) else {
                // Nothing to keep: a plain write, which must still find no item.
                if case .ifCurrent = condition { return false }
                if try await route.store.set(secret, for: key, changes: changes, when: .ifAbsent) { return true }
                if case .ifAbsent = condition { return false }
                continue
            }
            guard condition.holds(for: current.secret) else { return false }
            let id = try await keepPrevious(current, companionKey: companionKey, until: Date().addingTimeInterval(graceSeconds), via: route)
            var kept = changes
            kept.reserved = ItemReserved(previousID: id)
            let written = try await observed("set", service: service, account: account) {
                try await route.store.set(secret, for: key, changes: kept, when: .ifCurrent(current.secret))
            }
            if written { return true }
        }
        throw LockboxError.invalidArgument(
            "the item for account '\(account)' on service '\(service)' kept changing while a rotation was written; nothing was stored")
    }

    /// Writes `current`'s secret as the previous version at `companionKey` (replacing the one
    /// kept before), readable until `until` or the value's own expiry if sooner; returns the ID
    /// that binds it to the item. Refuses to overwrite an item of the user's at that address.
    private func keepPrevious(_ current: StoredItem, companionKey: ItemKey, until: Date, via route: StoreRoute) async throws -> String {
        if let existing = try await route.store.metadata(companionKey), existing.reserved.companion != ItemCompanion.previous.rawValue {
            throw LockboxError.invalidArgument(
                "an item of its own has the account '\(companionKey.account)' on service '\(companionKey.service)', where the previous version would be kept; nothing was stored"
            )
        }
        let id = ReservedAttributes.newID()
        var options = ItemOptions(
            kind: current.metadata.kind, label: "Previous version of '\(current.metadata.account)' on '\(current.metadata.service)'",
            access: current.metadata.access, expires: min(until, current.metadata.expires ?? until))
        options.reserved = ItemReserved(companion: ItemCompanion.previous.rawValue, companionID: id)
        try await route.store.set(current.secret, for: companionKey, options: options)
        return id
    }

    func previous(service: String, account: String, via route: StoreRoute) async throws -> SecretBytes? {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        guard let companion = try await previousVersion(of: key, via: route)?.previous else { return nil }
        if companion.metadata.access == .freshAuthentication {
            guard let freshness else {
                throw LockboxError.reauthenticationRequired("'\(account)' on '\(service)' is protected")
            }
            try await route.compute { try freshness.requireFreshAuthentication() }
        }
        return companion.secret
    }

    /// The item under `key` and its previous version, if it holds one that is still readable.
    private func previousVersion(of key: ItemKey, via route: StoreRoute) async throws -> (current: StoredItem, previous: StoredItem)? {
        guard let companionKey = try? ItemCompanion.previous.checkedKey(for: key),
            let item = try await observed("get", service: key.service, account: key.account, { try await route.store.item(key) }),
            item.metadata.reserved.previousID != nil,
            let companion = try await route.store.item(companionKey),
            Self.previousUntil(of: item.metadata, companion: companion.metadata) != nil
        else { return nil }
        return (item, companion)
    }

    func restorePrevious(service: String, account: String, keepingReplacedFor grace: Duration, via route: StoreRoute) async throws -> Bool {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        let graceSeconds = try Self.seconds(of: grace)
        guard let found = try await previousVersion(of: key, via: route) else {
            if try await route.store.metadata(key) == nil { throw LockboxError.itemNotFound(service: service, account: account) }
            throw LockboxError.noPreviousVersion(service: service, account: account)
        }
        let (current, previous) = (found.current, found.previous)
        let companionKey = ItemCompanion.previous.key(for: key)
        // The replaced value becomes the previous version: written over the one being restored,
        // which the item's value itself then holds.
        let id = try await keepPrevious(current, companionKey: companionKey, until: Date().addingTimeInterval(graceSeconds), via: route)
        var changes = ItemChanges()
        changes.reserved = ItemReserved(previousID: id)
        let written = try await observed("set", service: service, account: account) {
            try await route.store.set(previous.secret, for: key, changes: changes, when: .ifCurrent(current.secret))
        }
        if !written {
            // Another writer came first: the previous version goes back as it was, so that
            // nothing is lost (it stays bound to whatever the item refers to now).
            var options = ItemOptions(
                kind: previous.metadata.kind, label: previous.metadata.label, attributes: previous.metadata.attributes,
                access: previous.metadata.access, expires: previous.metadata.expires)
            options.reserved = previous.metadata.reserved
            try await route.store.set(previous.secret, for: companionKey, options: options)
        }
        return written
    }

    func wipeExpired(service: String?, via route: StoreRoute) async throws -> [ItemKey] {
        if let service { try ItemLimits.validateService(service) }
        let all = try await observed("list", service: service) { try await route.store.list(service: service) }
        let now = Date()
        let byKey = Dictionary(all.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        var removed: [ItemKey] = []
        for item in all {
            let isCompanion = item.reserved.companion != nil
            let doomed: Bool
            if isCompanion {
                // A previous version past its grace period, or one no item refers to any more.
                doomed = item.isExpired(at: now) || Self.owner(of: item, in: byKey) == nil
            } else {
                doomed = item.isExpired(at: now)
            }
            guard doomed else { continue }
            // Removed only if it still holds what was read: a rotation meanwhile is kept.
            guard let fresh = try await route.store.item(item.key) else { continue }
            let stillDoomed =
                isCompanion
                ? fresh.metadata.isExpired(at: now) || Self.owner(of: fresh.metadata, in: byKey) == nil
                : fresh.metadata.isExpired(at: now)
            guard stillDoomed,
                try await observed(
                    "delete", service: item.service, account: item.account, level: .notice,
                    {
                        try await route.store.delete(item.key, ifCurrent: fresh.secret)
                    })
            else { continue }
            if !isCompanion {
                try await deleteCompanions(of: item.key, via: route)
                removed.append(item.key)
            }
        }
        return removed
    }

    // MARK: Companions

    /// The item a companion belongs to, if it is listed in `items` and still refers to it.
    private static func owner(of companion: ItemMetadata, in items: [ItemKey: ItemMetadata]) -> ItemMetadata? {
        for role in ItemCompanion.allCases where companion.reserved.companion == role.rawValue {
            let prefix = "lockbox.\(role.rawValue):"
            guard companion.account.hasPrefix(prefix) else { return nil }
            let owner = items[ItemKey(service: companion.service, account: String(companion.account.dropFirst(prefix.count)))]
            switch role {
            case .previous: return owner.flatMap { previousUntil(of: $0, companion: companion, at: .distantPast) != nil ? $0 : nil }
            case .oauthRefreshToken: return owner
            }
        }
        // A role of a newer Lockbox: left alone.
        return companion
    }

    /// Until when `companion` is readable as the previous version of `item` at `now`, or `nil`
    /// if it is not `item`'s (another ID, another role) or its grace period has ended.
    static func previousUntil(of item: ItemMetadata, companion: ItemMetadata, at now: Date = Date()) -> Date? {
        guard let id = item.reserved.previousID, companion.reserved.companion == ItemCompanion.previous.rawValue,
            companion.reserved.companionID == id, companion.key == ItemCompanion.previous.key(for: item.key),
            let until = companion.expires, until > now
        else { return nil }
        return until
    }

    /// `items` as callers see them: companions left out, each item's previous version noted.
    static func visible(_ items: [ItemMetadata]) -> [ItemMetadata] {
        let companions = Dictionary(
            items.lazy.filter { $0.reserved.companion != nil }.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let now = Date()
        return items.compactMap { item in
            guard item.reserved.companion == nil else { return nil }
            var item = item
            if item.reserved.previousID != nil, let companion = companions[ItemCompanion.previous.key(for: item.key)] {
                item.previousUntil = previousUntil(of: item, companion: companion, at: now)
            }
            return item
        }
    }

    /// Removes the companions of `key` (only items that are companions: an item of the user's at
    /// such an address is kept).
    func deleteCompanions(of key: ItemKey, via route: StoreRoute) async throws {
        for role in ItemCompanion.allCases {
            guard let companionKey = try? role.checkedKey(for: key),
                try await route.store.metadata(companionKey)?.reserved.companion == role.rawValue
            else { continue }
            try await route.store.delete(companionKey)
        }
    }

    /// `duration` in seconds, refused unless positive and at most 100 years.
    static func seconds(of duration: Duration) throws -> Double {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        guard value > 0, value <= 100 * 365.25 * 86400 else {
            throw LockboxError.invalidArgument("a grace period must be positive and at most 100 years")
        }
        return value
    }
}

extension Vault {
    /// The secret `role` keeps beside the item under (service, account) (git's refresh token), or
    /// `nil` if there is none. A protected item's companion needs what reading the item needs.
    package func companion(_ role: ItemCompanion, service: String, account: String) throws -> SecretBytes? {
        try access.blocking { route in
            let key = ItemKey(service: service, account: account)
            try ItemLimits.validate(key)
            guard let companionKey = try? role.checkedKey(for: key),
                let companion = try await route.store.item(companionKey),
                companion.metadata.reserved.companion == role.rawValue
            else { return nil }
            if companion.metadata.access == .freshAuthentication {
                guard let freshness = self.freshness else {
                    throw LockboxError.reauthenticationRequired("'\(account)' on '\(service)' is protected")
                }
                try await route.compute { try freshness.requireFreshAuthentication() }
            }
            return companion.secret
        }
    }

    /// Stores `secret` as the companion `role` of the item under (service, account), with the
    /// item's `kind` and `access`; `nil` removes it. Refuses to overwrite an item of the user's
    /// at the companion's address.
    package func setCompanion(
        _ role: ItemCompanion, _ secret: SecretBytes?, service: String, account: String, kind: ItemKind, access itemAccess: ItemAccess
    ) throws {
        try access.blocking { route in
            let key = ItemKey(service: service, account: account)
            let companionKey = try role.checkedKey(for: key)
            let existing = try await route.store.metadata(companionKey)
            if let existing, existing.reserved.companion != role.rawValue {
                throw LockboxError.invalidArgument(
                    "an item of its own has the account '\(companionKey.account)' on service '\(service)'; nothing was stored there")
            }
            guard let secret else {
                if existing != nil { try await route.store.delete(companionKey) }
                return
            }
            var options = ItemOptions(kind: kind, label: "\(role.rawValue) of '\(account)' on '\(service)'", access: itemAccess)
            options.reserved = ItemReserved(companion: role.rawValue)
            try await route.store.set(secret, for: companionKey, options: options)
        }
    }
}
