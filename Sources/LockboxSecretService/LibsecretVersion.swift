import CLibsecretFallback
import Lockbox

extension LibraryVersions {
    /// The libsecret file this process loaded (e.g. `/usr/lib/x86_64-linux-gnu/libsecret-1.so.0`),
    /// or `not loaded`. Lockbox speaks D-Bus and makes the encrypted session itself (with
    /// libcrypto), so libsecret is loaded only for the fallback session, with a provider that
    /// refuses Lockbox's; it has no run-time version call.
    public static var libsecret: String {
        lockbox_libsecret_path().map { String(cString: $0) } ?? "not loaded"
    }
}
