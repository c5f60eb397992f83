import CLibSecret
import CSodium

/// Versions of the C libraries this build of Lockbox runs against, for `lockbox doctor` and bug reports.
public enum LibraryVersions {
    /// libsodium's run-time version (`sodium_version_string`).
    public static var sodium: String { String(cString: sodium_version_string()) }
    /// libsecret's version at build time (`SECRET_*_VERSION`).
    public static var libsecret: String { "\(SECRET_MAJOR_VERSION).\(SECRET_MINOR_VERSION).\(SECRET_MICRO_VERSION)" }
}
