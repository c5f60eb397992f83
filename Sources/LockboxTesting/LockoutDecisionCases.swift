import Lockbox

/// The cases every implementation of the lockout decision must agree on: ``LockoutPolicy``'s
/// `decide(failures:secondsSinceLastAttempt:disabled:)`, which ``PinGuard`` applies, and the SQL
/// of the PostgreSQL store's ledger. A store of your own that counts PIN attempts itself
/// (``PinAttemptLedger``) can run them too.
public enum LockoutDecisionCases {
    /// One case: a policy, what has been counted, and the decision it must give.
    public struct Case: Sendable, CustomStringConvertible {
        /// The policy.
        public let policy: LockoutPolicy
        /// Failures counted so far.
        public let failures: Int
        /// Seconds since the last counted guess (`nil`: none; negative: a clock went back).
        public let secondsSinceLastAttempt: Double?
        /// The decision.
        public let expected: LockoutDecision

        /// What the case is, for a test's output.
        public var description: String {
            "delays \(policy.delays), wipe after \(policy.wipeAfter.map(String.init) ?? "never"), disable after \(policy.disableAfter): \(failures) failures, "
                + "\(secondsSinceLastAttempt.map { "\($0) s since the last" } ?? "no last attempt") → \(expected)"
        }
    }

    private static let phone = LockoutPolicy.default  // 0,0,0,0,60,300,900,900,3600
    private static let strict = LockoutPolicy(uncheckedDelays: [0, 30], disableAfter: 3)
    private static let wiping = LockoutPolicy(uncheckedDelays: [0, 0, 30], wipeAfter: 3, disableAfter: 5)

    /// Every case.
    public static let all: [Case] = [
        Case(policy: phone, failures: 0, secondsSinceLastAttempt: nil, expected: .evaluate),
        Case(policy: phone, failures: 3, secondsSinceLastAttempt: 1, expected: .evaluate),
        Case(policy: phone, failures: 4, secondsSinceLastAttempt: 0, expected: .evaluate),
        Case(policy: phone, failures: 5, secondsSinceLastAttempt: 10, expected: .wait(seconds: 50)),
        Case(policy: phone, failures: 5, secondsSinceLastAttempt: 61, expected: .evaluate),
        Case(policy: phone, failures: 6, secondsSinceLastAttempt: 100, expected: .wait(seconds: 200)),
        Case(policy: phone, failures: 9, secondsSinceLastAttempt: 600, expected: .wait(seconds: 3000)),
        Case(policy: phone, failures: 40, secondsSinceLastAttempt: 3590, expected: .wait(seconds: 10)),
        Case(policy: phone, failures: 40, secondsSinceLastAttempt: 3700, expected: .evaluate),
        Case(policy: phone, failures: 5, secondsSinceLastAttempt: -500, expected: .wait(seconds: 60)),
        Case(policy: phone, failures: 100, secondsSinceLastAttempt: 99_999, expected: .disabled),
        Case(policy: strict, failures: 1, secondsSinceLastAttempt: 0, expected: .evaluate),
        Case(policy: strict, failures: 2, secondsSinceLastAttempt: 5, expected: .wait(seconds: 25)),
        Case(policy: strict, failures: 3, secondsSinceLastAttempt: 99_999, expected: .disabled),
        Case(policy: wiping, failures: 2, secondsSinceLastAttempt: 1, expected: .evaluate),
        Case(policy: wiping, failures: 3, secondsSinceLastAttempt: 1, expected: .wipe),
        Case(policy: wiping, failures: 3, secondsSinceLastAttempt: 99_999, expected: .wipe),
        Case(policy: wiping, failures: 7, secondsSinceLastAttempt: 99_999, expected: .wipe),
    ]
}

extension LockoutPolicy {
    /// A policy of known-good values, for the table (the checking initialiser throws).
    fileprivate init(uncheckedDelays delays: [Double], wipeAfter: Int? = nil, disableAfter: Int) {
        do {
            try self.init(delays: delays, wipeAfter: wipeAfter, disableAfter: disableAfter)
        } catch {
            preconditionFailure("the table's policy breaks a rule: \(error)")
        }
    }
}
