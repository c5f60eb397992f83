import CLibcrypto
import Lockbox

extension LibraryVersions {
    /// The libcrypto this process loaded for the Secret Service session (`OpenSSL_version`, e.g.
    /// `OpenSSL 3.0.19 27 Jan 2026`), or `not loaded`: libcrypto is loaded with dlopen on the
    /// first encrypted session (or `lockbox selftest`), never at start-up.
    public static var libcrypto: String {
        lockbox_libcrypto_version().map { String(cString: $0) } ?? "not loaded"
    }
}
