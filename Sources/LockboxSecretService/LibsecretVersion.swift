import CLibSecret
import Lockbox

extension LibraryVersions {
    /// The libsecret this process loaded (its file, e.g. `/usr/lib/x86_64-linux-gnu/libsecret-1.so.0`),
    /// or `not loaded` before anything connected to the Secret Service. libsecret is loaded at
    /// run time and has no run-time version call.
    public static var libsecret: String {
        lockbox_libsecret_path().map { String(cString: $0) } ?? "not loaded"
    }
}
