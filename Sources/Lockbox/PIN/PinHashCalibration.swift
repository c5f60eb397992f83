import Dispatch
import FoundationEssentials

/// Measures Argon2id on this machine to choose PIN hash parameters for a target time.
public enum PinHashCalibration {
    /// One measured setting.
    public struct Row: Sendable {
        /// The parameters measured.
        public var parameters: KDFParameters
        /// Seconds one hash took (the best of two runs).
        public var seconds: Double
    }

    /// What ``measure(target:memoryMiB:)`` found.
    public struct Result: Sendable {
        /// Every setting measured, cheapest first.
        public var rows: [Row]
        /// The cheapest setting that reaches the target (or the most expensive one tried).
        public var suggested: KDFParameters
        /// Its measured time.
        public var suggestedSeconds: Double
    }

    /// Raises the passes at `memoryMiB` until one hash takes at least `target` seconds (at most 10 passes).
    public static func measure(target: Double, memoryMiB: Int) throws -> Result {
        try measure(target: target, memoryBytes: UInt64(memoryMiB) << 20)
    }

    /// Raises the passes at `memoryBytes` until one hash takes at least `target` seconds (at most 10 passes).
    public static func measure(target: Double, memoryBytes memory: UInt64) throws -> Result {
        guard target.isFinite, target > 0 else {
            throw LockboxError.invalidArgument("the calibration target must be a positive number of seconds")
        }
        let sample = SecretBytes(utf8: "2580-calibration")
        var rows: [Row] = []
        for passes in UInt64(1)...10 {
            let parameters = try KDFParameters(opsLimit: passes, memoryLimitBytes: memory)
            var best = Double.infinity
            for _ in 0..<2 {
                let start = DispatchTime.now().uptimeNanoseconds
                guard Sodium.hashString(sample, opsLimit: passes, memLimit: memory) != nil else {
                    throw LockboxError.invalidArgument("Argon2id could not run with \(parameters): not enough memory")
                }
                best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            }
            rows.append(Row(parameters: parameters, seconds: best))
            if best >= target { break }
        }
        let chosen = rows.first { $0.seconds >= target } ?? rows[rows.count - 1]
        return Result(rows: rows, suggested: chosen.parameters, suggestedSeconds: chosen.seconds)
    }
}
