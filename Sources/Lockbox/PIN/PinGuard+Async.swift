import Foundation

/// The async variants: each waits for the profile's lock without holding a thread (an in-process
/// queue, then the cross-process `flock` polled between suspensions), then runs the blocking
/// operation's body on ``PinGuard/executor``. One implementation: the bodies are the blocking
/// methods'. Cancelling the calling task while it waits for the lock, for memory or for a thread
/// abandons the try before anything was counted; once the body runs it finishes.
extension PinGuard {
    /// ``set(_:pin:lockout:wipeItems:)``, waiting for the profile's lock without holding a thread
    /// and hashing on ``executor``.
    public func set(_ profile: PinProfile, pin: SecretBytes, lockout: LockoutPolicy = .default, wipeItems: [ItemKey] = []) async throws {
        try requireProtectedStore()
        try policy.check(pin)
        try await withProfileLock(profile) { try self.setLocked(profile, pin: pin, lockout: lockout, wipeItems: wipeItems) }
    }

    /// ``verify(_:pin:)`` without blocking a thread of the cooperative pool.
    ///
    /// A refusal while locked out or disabled is decided first, on ``executor``, from the stored
    /// record: no hash, no write, and no wait behind another verification of the profile. Then
    /// the profile's lock is awaited, the hash's memory is reserved in the executor's
    /// ``BlockingExecutor/hashMemoryBudget`` (waiting there, too, without a thread), and the
    /// verification runs on the executor.
    public func verify(_ profile: PinProfile, pin: SecretBytes) async throws {
        try requireProtectedStore()
        try ItemLimits.validate(profile.itemKey)
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let memory = try await executor.run { try self.refuseIfLockedOut(profile) }
            let held = try await profileLock.acquire(profile.itemKey)
            defer { held.release() }
            let reservation = try await executor.hashMemoryBudget.reserve(memory)
            defer { reservation.release() }
            try await executor.run { try self.verifyLocked(profile, pin: pin, memoryHeld: true) }
            record(nil, of: profile, startedAt: start)
        } catch is CancellationError {
            throw CancellationError()  // abandoned before anything was counted: not an outcome
        } catch {
            record(error, of: profile, startedAt: start)
            throw error
        }
    }

    /// ``change(_:from:to:)``, waiting for the profile's lock without holding a thread.
    public func change(_ profile: PinProfile, from oldPin: SecretBytes, to newPin: SecretBytes) async throws {
        try requireProtectedStore()
        try policy.check(newPin)
        try await withProfileLock(profile) { try self.changeLocked(profile, from: oldPin, to: newPin) }
    }

    /// ``remove(_:)``, waiting for the profile's lock without holding a thread.
    @discardableResult
    public func remove(_ profile: PinProfile) async throws -> Bool {
        try await withProfileLock(profile) { try self.store.delete(profile.itemKey) }
    }

    /// ``reset(_:)``, waiting for the profile's lock without holding a thread.
    public func reset(_ profile: PinProfile) async throws {
        try requireProtectedStore()
        try await withProfileLock(profile) { try self.resetLocked(profile) }
    }

    /// ``reset(_:authorizedBy:pin:)``: the async ``verify(_:pin:)`` of `authority`, then the async ``reset(_:)``.
    public func reset(_ profile: PinProfile, authorizedBy authority: PinProfile, pin: SecretBytes) async throws {
        try Self.requireOtherProfile(authority, resetting: profile)
        try await verify(authority, pin: pin)
        try await reset(profile)
    }

    /// ``fingerprint(_:)``, run on ``executor``.
    public func fingerprint(_ profile: PinProfile) async throws -> String? {
        try await executor.run { try self.fingerprint(profile) }
    }

    /// ``status(_:)``, run on ``executor``.
    public func status(_ profile: PinProfile) async throws -> PinStatus {
        try await executor.run { try self.status(profile) }
    }

    /// Runs `body` on the executor holding the profile's lock, awaited without holding a thread.
    private func withProfileLock<T: Sendable>(_ profile: PinProfile, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try ItemLimits.validate(profile.itemKey)
        let held = try await profileLock.acquire(profile.itemKey)
        defer { held.release() }
        return try await executor.run(body)
    }
}
