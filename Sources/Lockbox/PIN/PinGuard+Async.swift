import FoundationEssentials

/// The async variants: each runs the operation's one implementation over the store as awaited
/// (an ``AsyncSecretStore`` directly, a blocking ``SecretStore`` offloaded to
/// ``PinGuard/executor``), waits for the profile's lock without holding a thread (an in-process
/// queue, then the cross-process `flock` polled between suspensions) and hashes on the executor.
/// Cancelling the calling task while it waits for the lock, for memory or for a thread abandons
/// the try before anything was counted; once a store call or a hash runs it finishes.
extension PinGuard {
    /// ``set(_:pin:lockout:wipeItems:)``, awaited.
    public func set(_ profile: PinProfile, pin: SecretBytes, lockout: LockoutPolicy = .default, wipeItems: [ItemKey] = []) async throws {
        try await set(profile, pin: pin, lockout: lockout, wipeItems: wipeItems, via: access.awaiting)
    }

    /// ``verify(_:pin:)`` without blocking a thread of the cooperative pool.
    ///
    /// A refusal while locked out or disabled is decided first from the stored record: no hash,
    /// no write, and no wait behind another verification of the profile. Then the profile's lock
    /// is awaited, and the hash runs on the executor holding its memory in the executor's
    /// ``BlockingExecutor/hashMemoryBudget`` while it runs (while memory is short the hash waits
    /// as a queued job, holding no thread).
    public func verify(_ profile: PinProfile, pin: SecretBytes) async throws {
        try await verify(profile, pin: pin, via: access.awaiting)
    }

    /// ``change(_:from:to:)``, awaited.
    public func change(_ profile: PinProfile, from oldPin: SecretBytes, to newPin: SecretBytes) async throws {
        try await change(profile, from: oldPin, to: newPin, via: access.awaiting)
    }

    /// ``remove(_:)``, awaited.
    @discardableResult
    public func remove(_ profile: PinProfile) async throws -> Bool {
        try await remove(profile, via: access.awaiting)
    }

    /// ``reset(_:)``, awaited.
    public func reset(_ profile: PinProfile) async throws {
        try await reset(profile, via: access.awaiting)
    }

    /// ``reset(_:authorizedBy:pin:)``, awaited.
    public func reset(_ profile: PinProfile, authorizedBy authority: PinProfile, pin: SecretBytes) async throws {
        try await reset(profile, authorizedBy: authority, pin: pin, via: access.awaiting)
    }

    /// ``fingerprint(_:)``, awaited.
    public func fingerprint(_ profile: PinProfile) async throws -> String? {
        try await fingerprint(profile, via: access.awaiting)
    }

    /// ``status(_:)``, awaited.
    public func status(_ profile: PinProfile) async throws -> PinStatus {
        try await status(profile, via: access.awaiting)
    }
}
