import FoundationEssentials

/// A store that counts PIN attempts itself, so that a lockout holds across every host that shares
/// it: ``PinGuard`` uses it, when its store adopts this protocol, instead of the per-profile
/// `flock` and the failure count kept in the sealed PIN record (which hold on one host only).
///
/// The contract, for each profile (addressed by the ``ItemKey`` the guard passes, not by its name):
/// - ``beginPinAttempt(_:lockout:)`` decides, from the store's own clock and in one durable
///   transaction, whether a guess may be evaluated now under `lockout` (the count below the
///   policy's ``LockoutPolicy/evaluationLimit`` — the wipe or the disable limit, whichever comes
///   first — and no delay of the last failure still running), and if so counts it as a failure
///   **before** returning. A
///   guess is therefore counted even if the host dies while hashing, and no host's clock decides
///   when a delay ends. Parallel calls are serialised by the store: N calls count N.
/// - ``recordPinSuccess(_:)`` clears the count after the guard found the PIN right.
/// - A store clock that reads earlier than the last attempt restarts the delay from now.
///
/// `LockboxPostgres`'s `PostgresStore` adopts it (one statement, `clock_timestamp()`).
public protocol PinAttemptLedger: AsyncSecretStore {
    /// Counts a guess if it may be evaluated now under `lockout`, or refuses it (counting nothing).
    func beginPinAttempt(_ key: ItemKey, lockout: LockoutPolicy) async throws -> PinAttemptDecision

    /// Clears the count after a right PIN (and on reset, change and removal).
    func recordPinSuccess(_ key: ItemKey) async throws

    /// The count and the last attempt, without changing them (for ``PinGuard/status(_:)``).
    func pinAttempts(_ key: ItemKey) async throws -> PinAttemptState
}

/// What ``PinAttemptLedger/beginPinAttempt(_:lockout:)`` decided.
public struct PinAttemptDecision: Sendable, Equatable {
    /// Whether the guess may be evaluated: it has then been counted already.
    public var evaluate: Bool
    /// Consecutive failures, this guess included when ``evaluate``.
    public var failures: Int
    /// The ledger's clock when it decided.
    public var decidedAt: Date
    /// When refused because of a delay: when the next guess may be evaluated (ledger's clock).
    public var lockedUntil: Date?

    /// Creates a decision.
    public init(evaluate: Bool, failures: Int, decidedAt: Date, lockedUntil: Date?) {
        self.evaluate = evaluate
        self.failures = failures
        self.decidedAt = decidedAt
        self.lockedUntil = lockedUntil
    }
}

/// A ledger's count for one profile, read without changing it.
public struct PinAttemptState: Sendable, Equatable {
    /// Consecutive failures since the last success or reset.
    public var failures: Int
    /// When the last counted guess began (ledger's clock), if any.
    public var lastAttempt: Date?
    /// The ledger's clock when it was read.
    public var readAt: Date

    /// Creates a state.
    public init(failures: Int, lastAttempt: Date?, readAt: Date) {
        self.failures = failures
        self.lastAttempt = lastAttempt
        self.readAt = readAt
    }
}

extension PinProfile {
    /// The key a ``PinAttemptLedger`` counts the profile's guesses under: another item key than
    /// the PIN record's, so the ledger's row and the record's row have unrelated keyed addresses.
    package var attemptKey: ItemKey { ItemKey(service: service, account: "pin-attempts:" + name) }
}
