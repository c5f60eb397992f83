/// How wrong PINs are punished: a delay after each consecutive failure, an optional wipe, and a
/// hard limit after which the PIN is disabled until a higher authority resets it.
public struct LockoutPolicy: Sendable, Hashable, Codable {
    /// Seconds the profile stays locked after the Nth consecutive failure (`delays[0]` after
    /// the first); the last value repeats for every later failure.
    public var delays: [Double]
    /// Wipe the PIN and its listed items after this many consecutive failures; `nil` (the
    /// default) never wipes.
    public var wipeAfter: Int?
    /// Disable the PIN after this many consecutive failures (at most 100, NIST SP 800-63B §5.2.2).
    public var disableAfter: Int

    /// The most consecutive failures any policy allows before disabling the PIN.
    public static let hardLimit = 100

    /// The longest delay a policy may set: one year, in seconds. Longer ones (`1e19`) would
    /// overflow the arithmetic of retry times; a stored policy beyond it is corrupt.
    public static let maximumDelay: Double = 366 * 86_400

    /// Creates a policy; `disableAfter` is capped at ``hardLimit``.
    public init(delays: [Double], wipeAfter: Int? = nil, disableAfter: Int = LockoutPolicy.hardLimit) throws {
        guard !delays.isEmpty, delays.allSatisfy({ $0 >= 0 && $0 <= Self.maximumDelay }) else {
            throw LockoutPolicy.invalid(
                "lockout delays must be a non-empty list of seconds, each from 0 to \(Int(Self.maximumDelay)) (one year)")
        }
        if let wipeAfter, wipeAfter < 1 { throw LockoutPolicy.invalid("wipe-after must be at least 1") }
        guard (1...Self.hardLimit).contains(disableAfter) else {
            throw LockoutPolicy.invalid("disable-after must be 1...\(Self.hardLimit)")
        }
        self.delays = delays
        self.wipeAfter = wipeAfter
        self.disableAfter = disableAfter
    }

    private init(uncheckedDelays delays: [Double]) {
        self.delays = delays
        self.wipeAfter = nil
        self.disableAfter = Self.hardLimit
    }

    /// Like a phone: 5 free tries, then 1 minute, 5 minutes, 15, 15, and 1 hour after the 9th
    /// failure and every later one.
    public static let `default` = LockoutPolicy(uncheckedDelays: [0, 0, 0, 0, 60, 300, 900, 900, 3600])

    /// How many consecutive wrong tries are evaluated without any wait: every try up to and
    /// including the failure that starts the first delay (or the disable or wipe limit). The
    /// "free tries" that README.md and the CLI help state are this number for ``default``.
    public var freeTries: Int {
        let firstDelayed = delays.firstIndex { $0 > 0 }.map { $0 + 1 } ?? disableAfter
        return min(firstDelayed, disableAfter, wipeAfter ?? disableAfter)
    }

    /// The count from which no guess is evaluated: the wipe limit or the disable limit, whichever
    /// comes first. A ledger that counts guesses itself (``PinAttemptLedger``) refuses from here
    /// on, and ``PinGuard`` then wipes or reports the PIN disabled by ``decide(failures:secondsSinceLastAttempt:disabled:)``.
    public var evaluationLimit: Int {
        min(disableAfter, wipeAfter ?? disableAfter)
    }

    /// Seconds locked after `failures` consecutive failures.
    public func delay(afterFailures failures: Int) -> Double {
        guard failures > 0 else { return 0 }
        return delays[min(failures, delays.count) - 1]
    }

    /// The one lockout decision: whether a guess may be evaluated now, from the failures counted
    /// so far, the seconds since the last counted guess (`nil` if there is none; negative when a
    /// clock went back, which restarts the delay from now), and whether the PIN was disabled:
    /// evaluate, wait, disabled, or wipe (a count at ``wipeAfter`` — the wipe comes before any
    /// other answer).
    /// ``PinGuard`` applies it to the file vault's and the Secret Service's records; the
    /// PostgreSQL store's `begin_pin_attempt` implements the same rule in SQL, and a table test
    /// holds the two to it.
    public func decide(failures: Int, secondsSinceLastAttempt elapsed: Double?, disabled: Bool = false) -> LockoutDecision {
        // A count at the wipe limit whose wipe never ran (the process died between the count and
        // the wipe, or another host's guess was counted first): the wipe is due, and no guess is
        // evaluated before it.
        if let wipeAfter, failures >= wipeAfter { return .wipe }
        if disabled || failures >= disableAfter { return .disabled }
        guard failures > 0, let elapsed else { return .evaluate }
        let remaining = delay(afterFailures: failures) - max(0, elapsed)
        return remaining > 0 ? .wait(seconds: remaining) : .evaluate
    }

    private static func invalid(_ reason: String) -> LockboxError { .invalidArgument(reason) }

    private enum CodingKeys: String, CodingKey { case delays, wipeAfter, disableAfter }

    /// Decodes through the checking initialiser: a stored policy is data someone could have
    /// edited, and an empty delay list or an out-of-range limit must be refused, not trusted.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            delays: try container.decode([Double].self, forKey: .delays),
            wipeAfter: try container.decodeIfPresent(Int.self, forKey: .wipeAfter),
            disableAfter: try container.decode(Int.self, forKey: .disableAfter))
    }
}

/// What ``LockoutPolicy/decide(failures:secondsSinceLastAttempt:disabled:)`` says of a guess.
public enum LockoutDecision: Sendable, Equatable {
    /// The guess may be evaluated (and is counted before its PIN is compared).
    case evaluate
    /// Refused without evaluating: the delay after the last failure has `seconds` left.
    case wait(seconds: Double)
    /// Refused: the PIN is disabled until a reset.
    case disabled
    /// Refused: the wipe limit has been reached; the PIN and its items are wiped without
    /// evaluating the guess.
    case wipe
}
