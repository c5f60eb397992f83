/// Argon2id cost parameters for a passphrase key slot (libsodium's `crypto_pwhash`).
///
/// They are stored in the slot, so a vault created with one setting opens with any later one.
public struct KDFParameters: Sendable, Hashable, CustomStringConvertible {
    /// Number of passes over memory (libsodium's `opslimit`).
    public let opsLimit: UInt64
    /// Memory used, in bytes (libsodium's `memlimit`).
    public let memoryLimitBytes: UInt64

    /// The smallest memory libsodium's Argon2id accepts (8 KiB).
    public static let minimumMemoryBytes: UInt64 = 8 * 1024
    /// The most memory Lockbox will spend on one derivation (4 GiB): a header asking for more
    /// is treated as corrupt rather than obeyed.
    public static let maximumMemoryBytes: UInt64 = 4 * 1024 * 1024 * 1024
    /// The most passes Lockbox will run (a header asking for more is treated as corrupt).
    public static let maximumOpsLimit: UInt64 = 64

    /// Creates parameters, or throws ``LockboxError/invalidArgument(_:)`` outside
    /// 1...64 passes and 8 KiB...4 GiB of memory.
    public init(opsLimit: UInt64, memoryLimitBytes: UInt64) throws {
        guard Self.isWithinBounds(opsLimit: opsLimit, memoryLimitBytes: memoryLimitBytes) else {
            throw LockboxError.invalidArgument(
                "Argon2id parameters out of range: passes must be 1...\(Self.maximumOpsLimit) and memory \(Self.minimumMemoryBytes)...\(Self.maximumMemoryBytes) bytes"
            )
        }
        self.opsLimit = opsLimit
        self.memoryLimitBytes = memoryLimitBytes
    }

    private init(unchecked opsLimit: UInt64, _ memoryLimitBytes: UInt64) {
        self.opsLimit = opsLimit
        self.memoryLimitBytes = memoryLimitBytes
    }

    static func isWithinBounds(opsLimit: UInt64, memoryLimitBytes: UInt64) -> Bool {
        (1...maximumOpsLimit).contains(opsLimit)
            && (minimumMemoryBytes...maximumMemoryBytes).contains(memoryLimitBytes)
    }

    /// libsodium's INTERACTIVE limits: 2 passes, 64 MiB (about 0.1 s here).
    public static let interactive = KDFParameters(unchecked: 2, 64 << 20)
    /// libsodium's MODERATE limits: 3 passes, 256 MiB (about 0.5–0.8 s here). The default.
    public static let moderate = KDFParameters(unchecked: 3, 256 << 20)
    /// libsodium's SENSITIVE limits: 4 passes, 1 GiB (several seconds).
    public static let sensitive = KDFParameters(unchecked: 4, 1 << 30)
    /// What new passphrase slots use unless told otherwise.
    public static let `default` = moderate

    /// `Argon2id(t=3, m=256 MiB)`.
    public var description: String {
        let mebibytes = Double(memoryLimitBytes) / 1_048_576
        let memory = mebibytes >= 1 ? "\(Int(mebibytes)) MiB" : "\(memoryLimitBytes / 1024) KiB"
        return "Argon2id(t=\(opsLimit), m=\(memory))"
    }
}
