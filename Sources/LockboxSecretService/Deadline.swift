import CLibsecretFallback
import Dispatch
import Lockbox

#if canImport(Glibc)
    import Glibc
#endif

// The Deadline every Secret Service call has, and the small, typed helpers for the GLib types
// libsecret speaks (errors, string dictionaries), used only on libsecret's fallback path.
// Nothing here leaks into Lockbox's public API.

/// A `GError` copied into Swift, with the D-Bus error name when the error came over the bus.
struct GLibError: Error, CustomStringConvertible {
    var domain: String
    var code: Int32
    var message: String
    /// e.g. `org.freedesktop.DBus.Error.ServiceUnknown`, for errors a D-Bus peer returned.
    var remoteName: String?

    /// Takes ownership of `error` (frees it).
    init(taking error: UnsafeMutablePointer<GError>) {
        domain = g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "unknown"
        code = error.pointee.code
        message = error.pointee.message.map { String(cString: $0) } ?? "no message"
        if g_dbus_error_is_remote_error(error) != 0, let name = g_dbus_error_get_remote_error(error) {
            remoteName = String(cString: name)
            g_free(name)
            g_dbus_error_strip_remote_error(error)
            message = error.pointee.message.map { String(cString: $0) } ?? message
        }
        g_error_free(error)
    }

    var isCancelled: Bool { domain == "g-io-error-quark" && code == Int32(G_IO_ERROR_CANCELLED.rawValue) }
    var description: String { message }
}

/// Calls `body` with a `GError **` and throws the error it sets, if any.
func withGError<T>(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> T) throws(GLibError) -> T {
    var error: UnsafeMutablePointer<GError>?
    let result = body(&error)
    if let error { throw GLibError(taking: error) }
    return result
}

/// When one ``SecretServiceClient/run(_:_:)`` must be over: every D-Bus wait of Lockbox's own
/// client is bounded by it (`poll`), and libsecret's calls get a `GCancellable` cancelled at it,
/// so no call can hang on a prompt nobody can answer or a provider that stopped answering.
package final class Deadline: @unchecked Sendable {
    package let seconds: Double
    /// `CLOCK_MONOTONIC` nanoseconds at which it passes.
    private let end: UInt64
    // Made on first use, only on libsecret's paths (GIO is loaded then); g_cancellable_cancel is
    // thread-safe, and the pointer is only unref'd in deinit.
    private var made: OpaquePointer?

    package init(seconds: Double) {
        self.seconds = seconds
        let span = seconds.isFinite && seconds > 0 ? min(seconds, 1e9) : 0
        end = Self.now() &+ UInt64(span * 1e9)
    }

    package var expired: Bool { Self.now() >= end }

    /// Milliseconds until it passes, rounded up (0 once it has), at most `Int32.max`.
    package var remainingMilliseconds: Int32 {
        let now = Self.now()
        guard now < end else { return 0 }
        return Int32(min((end - now + 999_999) / 1_000_000, UInt64(Int32.max)))
    }

    /// A `GCancellable` cancelled when the deadline passes, for libsecret's calls. GLib must be
    /// loaded.
    var cancellable: OpaquePointer {
        if let made { return made }
        guard let cancellable = g_cancellable_new() else { fatalError("g_cancellable_new returned NULL") }
        made = cancellable
        let left = Double(remainingMilliseconds) / 1000
        // The timer holds a strong reference, so the cancellable outlives any late firing.
        DispatchQueue.global().asyncAfter(deadline: .now() + left) { [self] in
            if let made { g_cancellable_cancel(made) }
        }
        return cancellable
    }

    deinit { if let made { g_object_unref(UnsafeMutableRawPointer(made)) } }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}

/// A `GVariant` `a{ss}` (floating), for libsecret's calls.
func gVariantStringDictionary(_ values: [String: String]) -> OpaquePointer? {
    let entryType = g_variant_type_new("{ss}")
    defer { g_variant_type_free(entryType) }
    var entries: [OpaquePointer?] = values.sorted { $0.key < $1.key }.map {
        g_variant_new_dict_entry(g_variant_new_string($0.key), g_variant_new_string($0.value))
    }
    return g_variant_new_array(entryType, &entries, gsize(entries.count))
}
