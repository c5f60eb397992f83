/// How ``PinGuard`` spends memory, time and writes on a PIN: the Argon2id cost of its hashes and
/// when a wrong try is written to the store.
///
/// - ``desktop`` (the default, and the CLI's): 3 passes over 256 MiB (libsodium's MODERATE, about
///   0.4–0.7 s here), and each try counted durably *before* the comparison, so killing the process
///   mid-comparison cannot erase a guess: the threat on a desktop is a local user who can send
///   `SIGKILL`. Two durable writes per successful verify.
/// - ``server``: OWASP's first Argon2id setting for password storage, 2 passes over 19 MiB with
///   one lane (m=19456 KiB, t=2, p=1), and one durable write per verify, made with the outcome:
///   a guesser on a server is remote and cannot kill the process between the comparison and the
///   write. A right PIN with no failures before it writes nothing at all.
///
/// ## Where the figures come from
///
/// OWASP's Password Storage Cheat Sheet recommends Argon2id "with a minimum configuration of
/// 19 MiB of memory, an iteration count of 2, and 1 degree of parallelism", and lists equivalent
/// settings that trade memory for passes — m=47104 KiB (46 MiB), t=1; m=19456 KiB (19 MiB), t=2;
/// m=12288 KiB (12 MiB), t=3; m=9216 KiB (9 MiB), t=4; m=7168 KiB (7 MiB), t=5 — all with p=1.
/// RFC 9106 (Argon2), section 4, recommends t=1 with 2 GiB as its first choice and t=3 with
/// 64 MiB as its second ("if much less memory is available"), each with 4 lanes, and otherwise a
/// procedure: fix the lanes, take the most memory the deployment can afford per hash, then
/// raise the passes until a hash takes the time budget. libsodium's Argon2id always uses one
/// lane, so Lockbox follows OWASP's p=1 rows; ``calibratedServer(target:)`` applies RFC 9106's
/// procedure at OWASP's 19 MiB. A server verifying many PINs at once must keep memory per hash
/// small: 20 concurrent desktop-preset hashes need 5 GiB, 20 server-preset hashes 380 MiB (and
/// ``HashMemoryBudget`` caps either).
///
/// A PIN has few values whatever the hash (10,000 for four digits): what protects it on a server
/// is the lockout and the store's encryption, not the hash cost (SECURITY.md, "PINs").
public struct PinPreset: Sendable, Hashable {
    /// The Argon2id cost of new PIN hashes (older hashes are upgraded on the next right PIN).
    public var hashParameters: KDFParameters
    /// When a wrong try is written to the store.
    public var failureRecording: FailureRecording

    /// When ``PinGuard`` writes a try's count to the store.
    public enum FailureRecording: Sendable, Hashable {
        /// Before the comparison, durably, and again after a right PIN (two writes): a kill during
        /// the comparison cannot erase the count.
        case beforeComparing
        /// Once, with the outcome (one write, none after a right PIN with no failures before it).
        case afterComparing
    }

    /// Creates a preset.
    public init(hashParameters: KDFParameters, failureRecording: FailureRecording) {
        self.hashParameters = hashParameters
        self.failureRecording = failureRecording
    }

    /// 3 passes over 256 MiB, each try counted before it is compared: the default, for desktops.
    public static let desktop = PinPreset(hashParameters: .moderate, failureRecording: .beforeComparing)

    /// OWASP's m=19 MiB, t=2, p=1, one write per verify: for services.
    public static let server = PinPreset(hashParameters: owaspMinimum, failureRecording: .afterComparing)

    /// The memory of OWASP's minimum Argon2id configuration: 19 MiB (19456 KiB).
    public static let serverMemoryBytes: UInt64 = 19_456 << 10

    /// OWASP's minimum Argon2id configuration: 2 passes over 19 MiB.
    private static let owaspMinimum: KDFParameters = {
        do {
            return try KDFParameters(opsLimit: 2, memoryLimitBytes: serverMemoryBytes)
        } catch {
            preconditionFailure("OWASP's Argon2id setting is within KDFParameters' bounds")
        }
    }()

    /// ``server`` with passes raised until one hash takes at least `target` seconds on this machine
    /// (RFC 9106 §4's procedure at OWASP's 19 MiB), never fewer than OWASP's 2.
    /// Measures with ``PinHashCalibration/measure(target:memoryMiB:)``: run it at start-up, or
    /// once and keep the result in your configuration.
    public static func calibratedServer(target: Double) throws -> PinPreset {
        let measured = try PinHashCalibration.measure(target: target, memoryBytes: serverMemoryBytes)
        let passes = max(owaspMinimum.opsLimit, measured.suggested.opsLimit)
        return PinPreset(
            hashParameters: try KDFParameters(opsLimit: passes, memoryLimitBytes: serverMemoryBytes),
            failureRecording: .afterComparing)
    }
}
