import CLibSecret
import Lockbox

extension LibraryVersions {
    /// The Secret Service client this process loaded: the libsecret file (e.g.
    /// `/usr/lib/x86_64-linux-gnu/libsecret-1.so.0`) when libsecret made a session; else the GIO
    /// file with "(sessions by Lockbox)" once connected; `not loaded` before anything connected to
    /// the Secret Service. Both are loaded at run time and have no run-time version call.
    public static var libsecret: String {
        if let path = lockbox_libsecret_path() { return String(cString: path) }
        if let path = lockbox_gio_path() { return "not loaded, GIO \(String(cString: path)) (sessions by Lockbox)" }
        return "not loaded"
    }
}
