import CLibSecret
import Lockbox

extension LibraryVersions {
    /// libsecret's version at build time (`SECRET_*_VERSION`).
    public static var libsecret: String { "\(SECRET_MAJOR_VERSION).\(SECRET_MINOR_VERSION).\(SECRET_MICRO_VERSION)" }
}
