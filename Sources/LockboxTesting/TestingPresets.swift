import Lockbox

extension KDFParameters {
    /// The cheapest Argon2id libsodium accepts (1 pass over 8 KiB): real hashing code, microseconds
    /// per hash. For tests only — a PIN hashed with it falls to a search in moments.
    public static let testing: KDFParameters = {
        do {
            return try KDFParameters(opsLimit: 1, memoryLimitBytes: KDFParameters.minimumMemoryBytes)
        } catch {
            preconditionFailure("1 pass over libsodium's minimum memory is within KDFParameters' bounds")
        }
    }()
}

extension PinPreset {
    /// ``PinPreset/desktop``'s write order with ``Lockbox/KDFParameters/testing``'s cheap hash: for tests.
    public static let testingDesktop = PinPreset(hashParameters: .testing, failureRecording: .beforeComparing)
    /// ``PinPreset/server``'s one write per verify with ``Lockbox/KDFParameters/testing``'s cheap hash: for tests.
    public static let testingServer = PinPreset(hashParameters: .testing, failureRecording: .afterComparing)
}
