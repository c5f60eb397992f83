import CSodium

/// Versions of the C libraries this build of Lockbox runs against, for `lockbox doctor` and bug reports.
/// LockboxSecretService adds libsecret's.
public enum LibraryVersions {
    /// libsodium's run-time version (`sodium_version_string`).
    public static var sodium: String { String(cString: sodium_version_string()) }
}
