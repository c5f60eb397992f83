import CoreMetrics
import Dispatch
import FoundationEssentials
import Logging
import SystemPackage

/// A PIN-protected profile: a service (an app) and a profile name within it ("kids", "max").
public struct PinProfile: Hashable, Sendable, CustomStringConvertible {
    /// The service the profile belongs to.
    public var service: String
    /// The profile's name.
    public var name: String

    /// Creates a profile address.
    public init(service: String, name: String) {
        self.service = service
        self.name = name
    }

    /// `name@service`.
    public var description: String { "\(name)@\(service)" }

    /// The store item that holds the profile's PIN record.
    package var itemKey: ItemKey { ItemKey(service: service, account: "pin:" + name) }
}

/// What `status` reports: counts and times, never the hash.
public struct PinStatus: Sendable, Equatable {
    /// Consecutive failures since the last success.
    public var failures: Int
    /// When the next try is allowed, if the profile is locked now.
    public var lockedUntil: Date?
    /// Whether the PIN is disabled until a higher authority resets it.
    public var disabled: Bool
    /// The lockout rules in force for this profile.
    public var lockout: LockoutPolicy
}

/// PINs for profiles: Argon2id hashes kept in a ``SecretStore`` (encrypted at rest in the file
/// vault), with lockout counters that survive crashes, clock changes and parallel guessing.
///
/// - The failure counter is written durably **before** the PIN is compared and cleared only
///   after a success, so killing the process after a wrong guess cannot erase it.
/// - Verifications of one profile are serialised across processes (an `flock` per profile), so
///   N parallel guesses count as N. Over a store that adopts ``PinAttemptLedger`` (one shared by
///   many hosts) the store counts each guess in its own transaction instead, from its own clock.
/// - While locked out, a try is refused without hashing, without a write and without waiting for
///   a verification of the same profile in progress, with the time it may be retried.
/// - A lockout ends only when every clock Lockbox trusts agrees its delay has passed (see
///   ``PinInstant``): within one boot the smaller of the boot-clock and wall-clock readings, after
///   a reboot the wall clock; a clock reading earlier than the last attempt restarts the lockout.
///
/// Every operation has an async variant (`try await guard.verify(…)`) that runs the same code on
/// ``executor`` and waits for the profile's lock without holding a thread; Argon2id hashes are
/// capped by the executor's ``BlockingExecutor/hashMemoryBudget``. Services choose
/// ``PinPreset/server``; the default, ``PinPreset/desktop``, is what the CLI uses.
public final class PinGuard: Sendable {
    /// Where PIN records are kept, as a blocking store (a guard made over an ``AsyncSecretStore``
    /// gives it as a ``BlockingSecretStore``).
    public var store: any SecretStore { access.secretStore }
    /// What new PINs must look like.
    public let policy: PinPolicy
    /// Argon2id cost for new hashes; older hashes are upgraded on the next successful verify.
    public let hashParameters: KDFParameters
    /// When a wrong try is written to the store: before the comparison (desktop) or with its outcome (server).
    public let failureRecording: PinPreset.FailureRecording
    /// Where the async variants run, and whose memory budget caps concurrent hashes.
    public var executor: BlockingExecutor { access.executor }
    /// Where verifications are logged: wrong PINs and refusals (notice), disabling and wiping
    /// (warning), with the profile and the failure count — never the PIN or its hash.
    public let logger: Logger
    let metrics: LockboxMetrics
    let access: StoreAccess
    private let clock: any PinClock
    private let lockDirectory: FilePath?
    private let lockTimeout: Duration
    private let hasher: PinHasher
    private let acceptsOpenStore: Bool

    /// Argon2id cost of PIN hashes by default: 3 passes over 256 MiB (about 0.4 s here).
    public static let defaultHashParameters = KDFParameters.moderate

    /// Creates a guard over `store`.
    /// - Parameters:
    ///   - store: where the PIN records (hash, failure counter, lockout policy) are kept, one item
    ///     per profile.
    ///   - policy: what new PINs must look like; checked by ``set(_:pin:lockout:wipeItems:)`` and
    ///     ``change(_:from:to:)``.
    ///   - hashParameters: Argon2id cost for new hashes.
    ///   - clock: where lockout times come from; inject your own in tests.
    ///   - lockDirectory: where the per-profile lock files live; every process guarding the same
    ///     store must use the same one. Default: beside the file vault (`VAULT.locks/pin-locks`),
    ///     none for a store only this process reaches (``MemoryStore``: the lock is in-process,
    ///     no file is written), or a per-user folder for other stores; never chosen by
    ///     environment variables.
    ///   - lockTimeout: how long an operation waits for another process's lock on the same
    ///     profile before it throws ``LockboxError/vaultBusy(path:waitedSeconds:)``.
    ///   - acceptingStoreOpenToOtherProcesses: keep PIN records in a store that every process of
    ///     the user can read and rewrite (``SecretStore/isOpenToOtherProcessesOfUser``: the Secret
    ///     Service). There, any such process can read a PIN's hash and try all 10,000 four-digit
    ///     PINs offline, and reset the failure count: the lockout holds only against someone who
    ///     types into your app. Without this flag, ``set(_:pin:lockout:wipeItems:)``,
    ///     ``verify(_:pin:)``, ``change(_:from:to:)`` and ``reset(_:)`` throw
    ///     ``LockboxError/pinStoreUnprotected(store:)`` on such a store.
    ///   - executor: where the async variants run; its memory budget caps concurrent hashes.
    ///   - logger: where verifications are logged (silent by default).
    ///   - metricsFactory: where `lockbox_pin_verifications{outcome}`, `lockbox_pin_failures`,
    ///     `lockbox_pin_lockouts` and `lockbox_pin_verify_duration` are recorded.
    public convenience init(
        store: any SecretStore, policy: PinPolicy = .default, hashParameters: KDFParameters = PinGuard.defaultHashParameters,
        clock: any PinClock = SystemPinClock(), lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(30),
        acceptingStoreOpenToOtherProcesses: Bool = false, executor: BlockingExecutor = .shared,
        logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            store: store, policy: policy, hashParameters: hashParameters, clock: clock, lockDirectory: lockDirectory,
            lockTimeout: lockTimeout, acceptingStoreOpenToOtherProcesses: acceptingStoreOpenToOtherProcesses,
            hasher: .argon2id, executor: executor, logger: logger, metricsFactory: metricsFactory)
    }

    /// Creates a guard with the hash cost and failure recording of `preset` (``PinPreset/server``
    /// for a service); the other parameters are those of
    /// ``init(store:policy:hashParameters:clock:lockDirectory:lockTimeout:acceptingStoreOpenToOtherProcesses:executor:logger:metricsFactory:)``.
    public convenience init(
        store: any SecretStore, preset: PinPreset, policy: PinPolicy = .default, clock: any PinClock = SystemPinClock(),
        lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(30), acceptingStoreOpenToOtherProcesses: Bool = false,
        executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            store: store, policy: policy, hashParameters: preset.hashParameters, clock: clock, lockDirectory: lockDirectory,
            lockTimeout: lockTimeout, acceptingStoreOpenToOtherProcesses: acceptingStoreOpenToOtherProcesses,
            hasher: .argon2id, failureRecording: preset.failureRecording, executor: executor, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Creates a guard over an async store (a network-backed one) with the hash cost and failure
    /// recording of `preset`: the async methods await the store and never block a thread on it;
    /// the blocking methods block the calling thread until it answers. The other parameters are
    /// those of
    /// ``init(store:policy:hashParameters:clock:lockDirectory:lockTimeout:acceptingStoreOpenToOtherProcesses:executor:logger:metricsFactory:)``.
    ///
    /// The per-profile lock is this process's queue and an `flock` in `lockDirectory` (by default
    /// a per-user folder on this host): it serialises the verifications of the processes of one
    /// host. Processes on other hosts sharing the store do not meet it; a lockout holds across
    /// hosts when the store counts the guesses itself (``PinAttemptLedger``, as the PostgreSQL
    /// store does): a verify then takes no profile lock (see docs/ARCHITECTURE.md).
    public convenience init(
        store: any AsyncSecretStore, preset: PinPreset, policy: PinPolicy = .default, clock: any PinClock = SystemPinClock(),
        lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(30), acceptingStoreOpenToOtherProcesses: Bool = false,
        executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            access: StoreAccess(store, executor: executor), policy: policy, hashParameters: preset.hashParameters, clock: clock,
            lockDirectory: lockDirectory, lockTimeout: lockTimeout,
            acceptingStoreOpenToOtherProcesses: acceptingStoreOpenToOtherProcesses, hasher: .argon2id,
            failureRecording: preset.failureRecording, logger: logger, metricsFactory: metricsFactory)
    }

    /// Creates a guard that hashes and compares through `hasher` (tests count, block or fail hashes with it).
    package convenience init(
        store: any SecretStore, policy: PinPolicy = .default, hashParameters: KDFParameters = PinGuard.defaultHashParameters,
        clock: any PinClock = SystemPinClock(), lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(30),
        acceptingStoreOpenToOtherProcesses: Bool = false, hasher: PinHasher,
        failureRecording: PinPreset.FailureRecording = .beforeComparing, executor: BlockingExecutor = .shared,
        logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            access: StoreAccess(store, executor: executor), policy: policy, hashParameters: hashParameters, clock: clock,
            lockDirectory: lockDirectory, lockTimeout: lockTimeout,
            acceptingStoreOpenToOtherProcesses: acceptingStoreOpenToOtherProcesses, hasher: hasher,
            failureRecording: failureRecording, logger: logger, metricsFactory: metricsFactory)
    }

    /// The one initializer the others call.
    package init(
        access: StoreAccess, policy: PinPolicy, hashParameters: KDFParameters, clock: any PinClock, lockDirectory: FilePath?,
        lockTimeout: Duration, acceptingStoreOpenToOtherProcesses: Bool, hasher: PinHasher,
        failureRecording: PinPreset.FailureRecording, logger: Logger, metricsFactory: any MetricsFactory
    ) {
        self.access = access
        self.logger = logger
        self.metrics = LockboxMetrics(factory: metricsFactory)
        self.hasher = hasher
        self.failureRecording = failureRecording
        self.acceptsOpenStore = acceptingStoreOpenToOtherProcesses
        self.policy = policy
        self.hashParameters = hashParameters
        self.clock = clock
        self.lockDirectory = lockDirectory ?? ItemLock.defaultDirectory("pin-locks", for: access)
        self.lockTimeout = lockTimeout
    }

    // MARK: Operations

    /// Sets the PIN of a profile that has none. Throws ``LockboxError/pinRejected(rule:)`` if
    /// the policy refuses it, and ``LockboxError/invalidArgument(_:)`` if a PIN is already set
    /// (change it with ``change(_:from:to:)``, or ``remove(_:)`` it first).
    /// - Parameters:
    ///   - profile: the profile the PIN belongs to.
    ///   - pin: the new PIN; only its Argon2id hash is stored.
    ///   - lockout: the delays and limits that wrong tries of this PIN trigger.
    ///   - wipeItems: items to wipe with the PIN if `lockout.wipeAfter` is reached.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func set(_ profile: PinProfile, pin: SecretBytes, lockout: LockoutPolicy = .default, wipeItems: [ItemKey] = []) throws {
        try access.blocking { try await self.set(profile, pin: pin, lockout: lockout, wipeItems: wipeItems, via: $0) }
    }

    /// Checks `pin`. Returns normally on success (and resets the failure count); throws
    /// ``LockboxError/wrongPin(profile:failures:retryAt:)``, ``LockboxError/pinLockedOut(profile:retryAt:seconds:)``,
    /// ``LockboxError/pinDisabled(profile:failures:)``, ``LockboxError/pinWiped(profile:failures:)``
    /// or ``LockboxError/pinNotSet(profile:)``.
    ///
    /// A try while the profile is locked out or disabled is refused before the profile's lock is
    /// taken: no hash, no write, no wait behind a verification in progress.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func verify(_ profile: PinProfile, pin: SecretBytes) throws {
        try access.blocking { try await self.verify(profile, pin: pin, via: $0) }
    }

    /// Replaces the PIN after checking the old one (which counts toward the lockout like any try).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func change(_ profile: PinProfile, from oldPin: SecretBytes, to newPin: SecretBytes) throws {
        try access.blocking { try await self.change(profile, from: oldPin, to: newPin, via: $0) }
    }

    /// Removes a profile's PIN and its counters; returns whether there was one.
    ///
    /// Removing needs no PIN: whoever can write the store is the higher authority (with the file
    /// vault, the holder of its passphrase or key file).
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func remove(_ profile: PinProfile) throws -> Bool {
        try access.blocking { try await self.remove(profile, via: $0) }
    }

    /// Clears the failures and re-enables a disabled PIN, after the caller has checked a higher
    /// authority (the vault passphrase, say). See ``reset(_:authorizedBy:pin:)`` for another profile's PIN.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func reset(_ profile: PinProfile) throws {
        try access.blocking { try await self.reset(profile, via: $0) }
    }

    /// Resets `profile` if `authority`'s PIN verifies (with its own lockout applying).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func reset(_ profile: PinProfile, authorizedBy authority: PinProfile, pin: SecretBytes) throws {
        try access.blocking { try await self.reset(profile, authorizedBy: authority, pin: pin, via: $0) }
    }

    /// A fingerprint of the profile's current PIN hash (BLAKE2b), or `nil` without a PIN: it
    /// changes whenever the PIN is changed, removed or set anew, which closes re-authentication
    /// windows the old PIN opened. Reveals nothing about the PIN.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func fingerprint(_ profile: PinProfile) throws -> String? {
        try access.blocking { try await self.fingerprint(profile, via: $0) }
    }

    /// Failures, lockout end and state, without touching the counters.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func status(_ profile: PinProfile) throws -> PinStatus {
        try access.blocking { try await self.status(profile, via: $0) }
    }

    // MARK: The one implementation of each operation (the blocking methods run it on the
    // caller's thread, the async variants over the awaited store: see ``StoreAccess``)

    func set(_ profile: PinProfile, pin: SecretBytes, lockout: LockoutPolicy, wipeItems: [ItemKey], via route: StoreRoute) async throws {
        try requireProtectedStore()
        try policy.check(pin)
        try await withProfileLock(profile) {
            if try await load(profile, via: route) != nil {
                throw Self.alreadySet(profile)
            }
            let record = PinRecord(hash: try await hash(pin, via: route), lockout: lockout, wipeItems: wipeItems)
            // A new PIN starts with no failures, whatever a wiped or removed one left behind.
            if let ledger = route.store as? any PinAttemptLedger { try await ledger.recordPinSuccess(profile.attemptKey) }
            if let conditional = conditionalStore(route) {
                // Another host may have set one since the check above: the first write wins.
                guard try await conditional.set(try encoded(record), for: profile.itemKey, options: recordOptions(profile), ifCurrent: nil)
                else {
                    throw Self.alreadySet(profile)
                }
                return
            }
            try await save(record, for: profile, via: route)
        }
    }

    /// A refusal while locked out or disabled is decided first, from the stored record: no hash,
    /// no write, and no wait behind another verification of the profile. Then the profile's lock
    /// is awaited and the verification runs; its hash holds memory in the executor's
    /// ``BlockingExecutor/hashMemoryBudget`` only while it runs (an async caller's hash waits for
    /// memory as a queued job, holding no thread). Cancelling the calling task while it waits for
    /// the lock abandons the try before anything was counted; cancelled while its hash waits for
    /// memory or a thread, a try the profile counts before comparing (the desktop preset) stays
    /// counted, one the profile counts after comparing (the server preset) is not counted.
    func verify(_ profile: PinProfile, pin: SecretBytes, via route: StoreRoute) async throws {
        try requireProtectedStore()
        try ItemLimits.validate(profile.itemKey)
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            if let ledger = route.store as? any PinAttemptLedger {
                try await verifyCounted(profile, pin: pin, by: ledger, via: route)
                record(nil, of: profile, startedAt: start)
                return
            }
            try await refuseIfLockedOut(profile, via: route)
            let held = try await profileLock.acquire(profile.itemKey)
            defer { held.release() }
            try await verifyLocked(profile, pin: pin, via: route)
            record(nil, of: profile, startedAt: start)
        } catch is CancellationError {
            throw CancellationError()  // abandoned before anything was counted: not an outcome
        } catch {
            record(error, of: profile, startedAt: start)
            throw error
        }
    }

    func change(_ profile: PinProfile, from oldPin: SecretBytes, to newPin: SecretBytes, via route: StoreRoute) async throws {
        try requireProtectedStore()
        try policy.check(newPin)
        try await withProfileLock(profile) {
            if let conditional = conditionalStore(route), let ledger = route.store as? any PinAttemptLedger {
                return try await changeAcrossHosts(profile, from: oldPin, to: newPin, in: conditional, ledger: ledger, via: route)
            }
            let ledger = route.store as? any PinAttemptLedger
            if let ledger {
                try await verifyCounted(profile, pin: oldPin, by: ledger, via: route)
            } else {
                try await verifyLocked(profile, pin: oldPin, via: route)
            }
            guard var record = try await load(profile, via: route) else { throw LockboxError.pinNotSet(profile: profile.description) }
            record.hash = try await hash(newPin, via: route)
            record.failures = 0
            record.lastAttempt = nil
            try await save(record, for: profile, via: route)
        }
    }

    /// `change` on a store hosts share: the old PIN is checked against the record as read, and
    /// the new record is written only if that record is still there. If another host changed,
    /// reset or removed the PIN in between, the change starts over against what it wrote (where
    /// the old PIN then fails as a counted wrong try, as it would one after the other on one host),
    /// so two changes never both report success with one of them undone.
    private func changeAcrossHosts(
        _ profile: PinProfile, from oldPin: SecretBytes, to newPin: SecretBytes,
        in store: any ConditionalWriteStore, ledger: any PinAttemptLedger, via route: StoreRoute
    ) async throws {
        var newHash: String?
        for _ in 0..<Self.conditionalWriteTries {
            guard let before = try await route.store.get(profile.itemKey) else {
                throw LockboxError.pinNotSet(profile: profile.description)
            }
            try await verifyCounted(profile, pin: oldPin, by: ledger, via: route)
            var record = try decoded(before, profile)
            if newHash == nil { newHash = try await hash(newPin, via: route) }
            record.hash = newHash ?? record.hash
            record.failures = 0
            record.lastAttempt = nil
            if try await store.set(try encoded(record), for: profile.itemKey, options: recordOptions(profile), ifCurrent: before) { return }
        }
        throw LockboxError.vaultBusy(path: "the PIN of '\(profile)'", waitedSeconds: 0)
    }

    /// `set` on a profile that has a PIN.
    private static func alreadySet(_ profile: PinProfile) -> LockboxError {
        LockboxError.invalidArgument("a PIN is already set for '\(profile)'; change it with the old PIN, or remove it first")
    }

    /// How many times a conditional write starts over after another host's write came first.
    static let conditionalWriteTries = 8

    /// The store as a ``ConditionalWriteStore``, when it adopts that and ``PinAttemptLedger``
    /// (whose counts live outside the record, so a verify leaves the record as it was).
    private func conditionalStore(_ route: StoreRoute) -> (any ConditionalWriteStore)? {
        guard route.store is any PinAttemptLedger else { return nil }
        return route.store as? any ConditionalWriteStore
    }

    func remove(_ profile: PinProfile, via route: StoreRoute) async throws -> Bool {
        try await withProfileLock(profile) {
            let removed = try await route.store.delete(profile.itemKey)
            if let ledger = route.store as? any PinAttemptLedger { try await ledger.recordPinSuccess(profile.attemptKey) }
            return removed
        }
    }

    func reset(_ profile: PinProfile, via route: StoreRoute) async throws {
        try requireProtectedStore()
        try await withProfileLock(profile) {
            guard var record = try await load(profile, via: route) else { throw LockboxError.pinNotSet(profile: profile.description) }
            if let ledger = route.store as? any PinAttemptLedger {
                // The counts live in the ledger: the record is left as it is, so a change another
                // host makes meanwhile is not written over.
                try await ledger.recordPinSuccess(profile.attemptKey)
                return
            }
            record.failures = 0
            record.lastAttempt = nil
            record.disabled = false
            try await save(record, for: profile, via: route)
            if let ledger = route.store as? any PinAttemptLedger { try await ledger.recordPinSuccess(profile.attemptKey) }
        }
    }

    func reset(_ profile: PinProfile, authorizedBy authority: PinProfile, pin: SecretBytes, via route: StoreRoute) async throws {
        guard authority != profile else {
            throw LockboxError.invalidArgument("a profile cannot reset itself; use another profile's PIN or the vault passphrase")
        }
        try await verify(authority, pin: pin, via: route)
        try await reset(profile, via: route)
    }

    func fingerprint(_ profile: PinProfile, via route: StoreRoute) async throws -> String? {
        guard let record = try await load(profile, via: route) else { return nil }
        return Array(record.hash.utf8).withUnsafeBytes { Sodium.blake2b($0).hexString }
    }

    func status(_ profile: PinProfile, via route: StoreRoute) async throws -> PinStatus {
        guard let record = try await load(profile, via: route) else { throw LockboxError.pinNotSet(profile: profile.description) }
        if let ledger = route.store as? any PinAttemptLedger {
            let state = try await ledger.pinAttempts(profile.attemptKey)
            var lockedUntil: Date?
            if let last = state.lastAttempt, state.failures > 0 {
                let until = last.addingTimeInterval(record.lockout.delay(afterFailures: state.failures))
                if until > state.readAt { lockedUntil = until }
            }
            return PinStatus(
                failures: state.failures, lockedUntil: lockedUntil, disabled: state.failures >= record.lockout.disableAfter,
                lockout: record.lockout)
        }
        var lockedUntil: Date?
        if let last = record.lastAttempt {
            let now = clock.now()
            let remaining = record.lockout.delay(afterFailures: record.failures) - max(0, now.secondsSince(last))
            if remaining > 0 { lockedUntil = now.wall.addingTimeInterval(remaining) }
        }
        return PinStatus(failures: record.failures, lockedUntil: lockedUntil, disabled: record.disabled, lockout: record.lockout)
    }

    // MARK: Internals

    /// Logs and counts a verification's outcome (`error` is `nil` for a right PIN).
    private func record(_ error: (any Error)?, of profile: PinProfile, startedAt start: UInt64) {
        metrics.timer("lockbox_pin_verify_duration").recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
        var metadata: Logger.Metadata = [LogKey.profile: "\(profile)", LogKey.store: .string(access.typeName)]
        let outcome: String
        switch error {
        case nil:
            outcome = "success"
            logger.debug("PIN verified", metadata: metadata)
        case LockboxError.wrongPin(_, let failures, let retryAt)?:
            outcome = "wrong"
            metrics.counter("lockbox_pin_failures").increment()
            if retryAt != nil { metrics.counter("lockbox_pin_lockouts").increment() }
            metadata[LogKey.failures] = "\(failures)"
            logger.notice(retryAt == nil ? "wrong PIN" : "wrong PIN; the profile is locked out", metadata: metadata)
        case LockboxError.pinLockedOut?:
            outcome = "locked-out"
            logger.notice("PIN try refused: locked out", metadata: metadata)
        case LockboxError.pinDisabled(_, let failures)?:
            outcome = "disabled"
            metadata[LogKey.failures] = "\(failures)"
            logger.warning("PIN try refused: the PIN is disabled", metadata: metadata)
        case LockboxError.pinWiped(_, let failures)?:
            outcome = "wiped"
            metrics.counter("lockbox_pin_failures").increment()
            metadata[LogKey.failures] = "\(failures)"
            logger.warning("wrong PIN; the PIN and its items were wiped", metadata: metadata)
        case let error?:
            outcome = "error"
            metadata[LogKey.errorCode] = loggableError(error)
            logger.warning("PIN verification failed", metadata: metadata)
        }
        metrics.counter("lockbox_pin_verifications", [("outcome", outcome)]).increment()
    }

    /// PIN records only where other processes of the user cannot read and rewrite them, unless
    /// the caller accepted that (see ``init(store:policy:hashParameters:clock:lockDirectory:lockTimeout:acceptingStoreOpenToOtherProcesses:executor:)``).
    private func requireProtectedStore() throws {
        if access.isOpenToOtherProcessesOfUser && !acceptsOpenStore {
            throw LockboxError.pinStoreUnprotected(store: access.typeName)
        }
    }

    /// The refusal a try gets from `record` at `now` without hashing: disabled, or locked out by
    /// every trusted clock. `nil` when the try may go ahead (or a clock went back, which the
    /// locked path handles with a write).
    private func refusal(_ record: PinRecord, at now: PinInstant, for profile: PinProfile, lastAttemptAheadMeansNow: Bool = false) -> (
        any Error
    )? {
        // A last attempt later than `now`: when deciding on the record being counted, another
        // verifier's count just now (the delay runs from now); on an advisory read before the
        // lock, a clock that went back, which the locked path handles: not refused on it.
        let elapsed = record.lastAttempt.map { now.secondsSince($0) }
        let ahead: Double = lastAttemptAheadMeansNow ? 0 : .infinity
        switch record.lockout.decide(
            failures: record.failures, secondsSinceLastAttempt: elapsed.map { $0 < 0 ? ahead : $0 },
            disabled: record.disabled)
        {
        case .evaluate:
            return nil
        case .disabled:
            return LockboxError.pinDisabled(profile: profile.description, failures: record.failures)
        case .wait(let remaining):
            return LockboxError.pinLockedOut(
                profile: profile.description, retryAt: now.wall.addingTimeInterval(remaining), seconds: remaining)
        case .wipe:
            return WipeDue(record: record)
        }
    }

    /// A refusal that is a wipe still to be done: the count reached the wipe limit and the wipe did
    /// not run (the process died first, or another verifier counted first). Caught by
    /// ``verifyLocked(_:pin:via:)``, which wipes; never thrown to a caller.
    private struct WipeDue: Error {
        let record: PinRecord
    }

    /// Wipes the PIN's items, then its record (so a wipe cut short is done again by the next
    /// try), then clears `ledger`'s count if the store keeps one (a new PIN starts with none), and
    /// throws ``LockboxError/pinWiped(profile:failures:)``.
    private func wipe(
        _ profile: PinProfile, _ record: PinRecord, failures: Int, by ledger: (any PinAttemptLedger)? = nil, via route: StoreRoute
    ) async throws -> Never {
        for key in record.wipeItems { try await route.store.delete(key) }
        try await route.store.delete(profile.itemKey)
        if let ledger { try await ledger.recordPinSuccess(profile.attemptKey) }
        throw LockboxError.pinWiped(profile: profile.description, failures: failures)
    }

    /// Throws the refusal the stored record gives a try now, read without the profile's lock (a
    /// record is one item, read atomically).
    /// A verification in progress elsewhere may have counted its try already: then this refuses
    /// as that count says, which is the order the two tries are counted in.
    private func refuseIfLockedOut(_ profile: PinProfile, via route: StoreRoute) async throws {
        guard let record = try await load(profile, via: route) else { return }
        // A wipe that is due is done under the profile's lock, by the locked path.
        if let refusal = refusal(record, at: clock.now(), for: profile), !(refusal is WipeDue) { throw refusal }
    }

    /// Verifies holding the profile's lock; each hash holds its memory in the executor's budget
    /// while it runs. Every change to the record is a compare-and-set of the store
    /// (``updateRecord(_:via:_:)``): the lock makes this host's verifiers wait their turn, and the
    /// store's own transaction makes every guess count where the lock does not reach (a verifier in
    /// another mount namespace, a lock folder removed meanwhile).
    private func verifyLocked(_ profile: PinProfile, pin: SecretBytes, via route: StoreRoute) async throws {
        let now = clock.now()
        // A clock that went back (the wall clock set earlier, across a reboot or not) restarts the
        // lockout from now.
        _ = try await updateRecord(profile, via: route) { record in
            // The clock read now, not before: a last attempt another verifier counted after `now`
            // is not a clock that went back.
            let current = clock.now()
            guard let last = record.lastAttempt, record.failures > 0, !record.disabled, current.secondsSince(last) < 0 else { return false }
            record.lastAttempt = current
            return true
        }
        let countedBeforeComparing = failureRecording == .beforeComparing
        var evaluated: PinRecord
        if countedBeforeComparing {
            // Desktop: the try is counted durably before comparing, so a kill from here on still
            // counts it, and the refusal is decided on the record the count was added to.
            do {
                evaluated = try await updateRecord(profile, via: route) { record in
                    // Decided on the clock read now, with a last attempt later than it (another
                    // verifier counted meanwhile) taken as just now: never evaluated past the delay.
                    let decidedAt = clock.now()
                    if let refusal = refusal(record, at: decidedAt, for: profile, lastAttemptAheadMeansNow: true) { throw refusal }
                    record.failures += 1
                    record.lastAttempt = decidedAt
                    return true
                }
            } catch let due as WipeDue {
                try await wipe(profile, due.record, failures: due.record.failures, via: route)
            }
        } else {
            guard let record = try await load(profile, via: route) else { throw LockboxError.pinNotSet(profile: profile.description) }
            if let refusal = refusal(record, at: now, for: profile) {
                if let due = refusal as? WipeDue { try await wipe(profile, due.record, failures: due.record.failures, via: route) }
                throw refusal
            }
            evaluated = record
        }
        let matches = try await compare(pin, with: evaluated.hash, via: route)
        if matches {
            // A right PIN never counts as a wrong one: if the upgrade to the new cost fails (not
            // enough memory, say), the old hash, which still verifies, is kept and the upgrade is
            // tried again on the next success.
            var newHash: String?
            if Sodium.hashStringNeedsRehash(evaluated.hash, opsLimit: hashParameters.opsLimit, memLimit: hashParameters.memoryLimitBytes) {
                newHash = try? await hash(pin, via: route)
            }
            // Server: one write, and only if something changed.
            _ = try await updateRecord(profile, via: route) { record in
                let hadFailures = record.failures > 0 || record.lastAttempt != nil
                record.failures = 0
                record.lastAttempt = nil
                // Only over the hash this PIN was checked against (a change meanwhile wins).
                let upgrade = newHash != nil && record.hash == evaluated.hash
                if upgrade, let newHash { record.hash = newHash }
                return hadFailures || upgrade
            }
            return
        }
        if !countedBeforeComparing {
            // Server: the one write of a wrong try, its count, added to the count stored now.
            evaluated = try await updateRecord(profile, via: route) { record in
                record.failures += 1
                record.lastAttempt = now
                return true
            }
        }
        if evaluated.lockout.decide(failures: evaluated.failures, secondsSinceLastAttempt: nil) == .wipe {
            try await wipe(profile, evaluated, failures: evaluated.failures, via: route)
        }
        if evaluated.failures >= evaluated.lockout.disableAfter {
            _ = try await updateRecord(profile, via: route) { record in
                guard !record.disabled, record.failures >= record.lockout.disableAfter else { return false }
                record.disabled = true
                return true
            }
            throw LockboxError.pinDisabled(profile: profile.description, failures: evaluated.failures)
        }
        let delay = evaluated.lockout.delay(afterFailures: evaluated.failures)
        throw LockboxError.wrongPin(
            profile: profile.description, failures: evaluated.failures,
            retryAt: delay > 0 ? now.wall.addingTimeInterval(delay) : nil)
    }

    /// Reads the profile's record, lets `change` edit it (returning whether it did; throwing to
    /// leave it), and writes it back only if the stored record is still the one read — a
    /// compare-and-set, one transaction of the file vault — reading again and retrying when
    /// another writer came first. Returns the record as stored after the call.
    private func updateRecord(
        _ profile: PinProfile, via route: StoreRoute, _ change: (inout PinRecord) throws -> Bool
    ) async throws -> PinRecord {
        for _ in 0..<Self.updateAttempts {
            guard let bytes = try await route.store.get(profile.itemKey) else { throw LockboxError.pinNotSet(profile: profile.description) }
            var record = try decoded(bytes, profile)
            guard try change(&record) else { return record }
            let written = try await route.store.set(
                try encoded(record), for: profile.itemKey,
                changes: ItemChanges(replacingWith: recordOptions(profile)), when: .ifCurrent(bytes))
            if written { return record }
        }
        throw LockboxError.vaultBusy(path: "the PIN record of \(profile.description)", waitedSeconds: 0)
    }

    /// How often ``updateRecord(_:via:_:)`` reads again after losing a race before it gives up.
    private static let updateAttempts = 64

    /// Verifies with the store's own attempt ledger (a store many hosts share): the ledger counts
    /// the guess durably, deciding from its own clock whether it may be evaluated at all, before
    /// the hash is compared here; a right PIN then clears the count. No profile lock: the
    /// ledger's transaction serialises the counting, and comparisons of counted guesses may run
    /// in parallel. The hash is not upgraded to a new cost here (the store has no
    /// compare-and-swap to keep a concurrent change on another host from being overwritten);
    /// ``change(_:from:to:)`` hashes at the current cost.
    private func verifyCounted(_ profile: PinProfile, pin: SecretBytes, by ledger: any PinAttemptLedger, via route: StoreRoute) async throws
    {
        guard let record = try await load(profile, via: route) else { throw LockboxError.pinNotSet(profile: profile.description) }
        let decision = try await ledger.beginPinAttempt(profile.attemptKey, lockout: record.lockout)
        // The count before this guess: at the wipe limit (a wipe that did not run: its host died,
        // or another host's guess was counted first), the PIN is wiped and this guess, counted or
        // refused by the ledger, is not evaluated.
        let before = decision.evaluate ? decision.failures - 1 : decision.failures
        if record.lockout.decide(failures: before, secondsSinceLastAttempt: nil) == .wipe {
            try await wipe(profile, record, failures: before, by: ledger, via: route)
        }
        guard decision.evaluate else {
            if decision.failures >= record.lockout.disableAfter {
                throw LockboxError.pinDisabled(profile: profile.description, failures: decision.failures)
            }
            let until = decision.lockedUntil ?? decision.decidedAt
            throw LockboxError.pinLockedOut(
                profile: profile.description, retryAt: until,
                seconds: max(0, until.timeIntervalSince(decision.decidedAt)))
        }
        let matches = try await compare(pin, with: record.hash, via: route)
        if matches {
            try await ledger.recordPinSuccess(profile.attemptKey)
            return
        }
        if record.lockout.decide(failures: decision.failures, secondsSinceLastAttempt: nil) == .wipe {
            try await wipe(profile, record, failures: decision.failures, by: ledger, via: route)
        }
        if decision.failures >= record.lockout.disableAfter {
            throw LockboxError.pinDisabled(profile: profile.description, failures: decision.failures)
        }
        let delay = record.lockout.delay(afterFailures: decision.failures)
        throw LockboxError.wrongPin(
            profile: profile.description, failures: decision.failures,
            retryAt: delay > 0 ? decision.decidedAt.addingTimeInterval(delay) : nil)
    }

    /// Whether `pin` matches a stored PHC hash, compared holding the hash's memory (its own cost,
    /// or the current parameters' if the string does not say) while it runs.
    private func compare(_ pin: SecretBytes, with storedHash: String, via route: StoreRoute) async throws -> Bool {
        try await route.computeHoldingHashMemory(Self.memoryBytes(ofHash: storedHash) ?? hashParameters.memoryLimitBytes) { [hasher] in
            hasher.verify(storedHash, pin)
        }
    }

    private func hash(_ pin: SecretBytes, via route: StoreRoute) async throws -> String {
        let hash = try await route.computeHoldingHashMemory(hashParameters.memoryLimitBytes) { [hasher, hashParameters] in
            hasher.hash(pin, hashParameters)
        }
        guard let hash else {
            throw LockboxError.invalidArgument("Argon2id could not hash the PIN with \(hashParameters) (not enough memory?)")
        }
        return hash
    }

    /// The memory cost of a PHC string (`$argon2id$v=19$m=KIB,t=…`), in bytes.
    static func memoryBytes(ofHash hash: String) -> UInt64? {
        for field in hash.split(separator: "$") {
            for parameter in field.split(separator: ",") where parameter.hasPrefix("m=") {
                guard let kibibytes = UInt64(parameter.dropFirst(2)), kibibytes <= UInt64.max >> 10 else { return nil }
                return kibibytes << 10
            }
        }
        return nil
    }

    private func load(_ profile: PinProfile, via route: StoreRoute) async throws -> PinRecord? {
        guard let bytes = try await route.store.get(profile.itemKey) else { return nil }
        return try decoded(bytes, profile)
    }

    /// The PIN record stored as `bytes`, checked.
    private func decoded(_ bytes: SecretBytes, _ profile: PinProfile) throws -> PinRecord {
        let record: PinRecord
        do {
            record = try bytes.withUnsafeBytes { try JSONDecoder().decode(PinRecord.self, from: Data($0)) }
        } catch let error as LockboxError {
            // The stored lockout policy broke a rule of LockoutPolicy's checking initialiser.
            throw LockboxError.undecodableItem(
                service: profile.service, account: profile.itemKey.account,
                reason: "its lockout policy is out of range (\(error))")
        } catch {
            throw LockboxError.undecodableItem(
                service: profile.service, account: profile.itemKey.account,
                reason: "it is not a Lockbox PIN record")
        }
        // A count can never pass the disable limit (verify stops there), so anything else was edited.
        guard (0...LockoutPolicy.hardLimit).contains(record.failures), record.lastAttempt?.sinceBoot.isFinite ?? true else {
            throw LockboxError.undecodableItem(
                service: profile.service, account: profile.itemKey.account,
                reason: "its failure count or last attempt is out of range")
        }
        return record
    }

    private func save(_ record: PinRecord, for profile: PinProfile, via route: StoreRoute) async throws {
        try await route.store.set(try encoded(record), for: profile.itemKey, options: recordOptions(profile))
    }

    private func encoded(_ record: PinRecord) throws -> SecretBytes { SecretBytes(copying: try JSONEncoder().encode(record)) }

    private func recordOptions(_ profile: PinProfile) -> ItemOptions {
        ItemOptions(kind: .pinHash, label: "Lockbox PIN for '\(profile.name)' on '\(profile.service)'")
    }

    /// Serialises everything about one profile across threads and tasks of this process and the
    /// processes of this host (see ``ItemLock``); waited for without holding a thread.
    private func withProfileLock<T>(_ profile: PinProfile, _ body: () async throws -> T) async throws -> T {
        try ItemLimits.validate(profile.itemKey)
        let held = try await profileLock.acquire(profile.itemKey)
        defer { held.release() }
        return try await body()
    }

    /// The per-profile lock.
    var profileLock: ItemLock { ItemLock(directory: lockDirectory, timeout: lockTimeout, access: access) }
}

/// How ``PinGuard`` hashes a PIN and compares one with a stored hash: Argon2id, or in tests a
/// wrapper that counts or fails calls.
package struct PinHasher: Sendable {
    /// The PHC string of `pin` at `parameters`, or `nil` if hashing failed.
    package var hash: @Sendable (_ pin: SecretBytes, _ parameters: KDFParameters) -> String?
    /// Whether `pin` matches the PHC string `hash`.
    package var verify: @Sendable (_ hash: String, _ pin: SecretBytes) -> Bool

    /// Creates a hasher from its two operations.
    package init(
        hash: @escaping @Sendable (SecretBytes, KDFParameters) -> String?, verify: @escaping @Sendable (String, SecretBytes) -> Bool
    ) {
        self.hash = hash
        self.verify = verify
    }

    /// libsodium's Argon2id.
    package static let argon2id = PinHasher(
        hash: { Sodium.hashString($0, opsLimit: $1.opsLimit, memLimit: $1.memoryLimitBytes) },
        verify: { Sodium.verifyHashString($0, $1) })
}

/// What is stored for a profile (JSON, inside the store's encryption).
package struct PinRecord: Codable {
    package var hash: String
    var lockout: LockoutPolicy
    var wipeItems: [ItemKey]
    var failures = 0
    var lastAttempt: PinInstant?
    var disabled = false

    init(hash: String, lockout: LockoutPolicy, wipeItems: [ItemKey]) {
        self.hash = hash
        self.lockout = lockout
        self.wipeItems = wipeItems
    }
}
