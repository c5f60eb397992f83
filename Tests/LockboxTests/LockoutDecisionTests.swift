import Lockbox
import LockboxTesting
import Testing

@testable import LockboxTestSupport

@Suite("The one lockout decision")
struct LockoutDecisionTests {
    @Test("LockoutPolicy.decide gives every case of the shared table its decision", arguments: LockoutDecisionCases.all)
    func tableHolds(_ testCase: LockoutDecisionCases.Case) {
        #expect(
            testCase.policy.decide(failures: testCase.failures, secondsSinceLastAttempt: testCase.secondsSinceLastAttempt)
                == testCase.expected, "\(testCase)")
    }

    @Test("a disabled record is refused whatever its count and time")
    func disabledWins() {
        #expect(LockoutPolicy.default.decide(failures: 0, secondsSinceLastAttempt: nil, disabled: true) == .disabled)
    }
}
