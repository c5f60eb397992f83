import CLibSecret
import Dispatch
import Lockbox

// Small, typed helpers for the GLib types libsecret speaks: errors, string hash tables, lists and
// cancellables. Nothing here leaks into Lockbox's public API.

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

/// A `GHashTable` of strings to strings, owned by Swift (unref'd on release).
final class GStringTable {
    let table: OpaquePointer

    init(_ values: [String: String]) {
        table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)
        for (key, value) in values {
            g_hash_table_insert(table, g_strdup(key), g_strdup(value))
        }
    }

    deinit { g_hash_table_unref(table) }

    /// Reads a table of strings; does not take ownership.
    static func read(_ table: OpaquePointer) -> [String: String] {
        var result: [String: String] = [:]
        var iterator = GHashTableIter()
        g_hash_table_iter_init(&iterator, table)
        var key: gpointer?
        var value: gpointer?
        while g_hash_table_iter_next(&iterator, &key, &value) != 0 {
            guard let key, let value else { continue }
            result[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                String(cString: value.assumingMemoryBound(to: CChar.self))
        }
        return result
    }
}

/// A `GCancellable` that cancels itself after `seconds`: every libsecret call gets one, so no
/// call can hang on a prompt nobody can answer or a provider that stopped answering.
final class Deadline: @unchecked Sendable {
    // g_cancellable_cancel is thread-safe; the pointer is only unref'd in deinit.
    let cancellable: OpaquePointer
    let seconds: Double

    init(seconds: Double) {
        self.seconds = seconds
        cancellable = g_cancellable_new()
        // The timer holds a strong reference, so the cancellable outlives any late firing.
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            g_cancellable_cancel(cancellable)
        }
    }

    var expired: Bool { g_cancellable_is_cancelled(cancellable) != 0 }

    deinit { g_object_unref(UnsafeMutableRawPointer(cancellable)) }
}

/// The strings of a NULL-terminated `gchar **` (not freed).
func stringArray(_ array: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
    guard let array else { return [] }
    var result: [String] = []
    var index = 0
    while let element = array[index] {
        result.append(String(cString: element))
        index += 1
    }
    return result
}

/// One D-Bus value, read by its type signature; anything of another type reads as `nil`.
enum GVariantReader {
    static func string(_ value: OpaquePointer) -> String? {
        guard typeString(value) == "s" || typeString(value) == "o" else { return nil }
        return g_variant_get_string(value, nil).map { String(cString: $0) }
    }

    /// An `ay` byte array.
    static func bytes(_ value: OpaquePointer) -> [UInt8]? {
        guard typeString(value) == "ay" else { return nil }
        var count: gsize = 0
        guard let start = g_variant_get_fixed_array(value, &count, 1) else { return count == 0 ? [] : nil }
        return Array(UnsafeRawBufferPointer(start: start, count: Int(count)))
    }

    static func uint64(_ value: OpaquePointer) -> UInt64? {
        typeString(value) == "t" ? UInt64(g_variant_get_uint64(value)) : nil
    }

    static func bool(_ value: OpaquePointer) -> Bool? {
        typeString(value) == "b" ? g_variant_get_boolean(value) != 0 : nil
    }

    /// An `a{ss}` dictionary.
    static func stringDictionary(_ value: OpaquePointer) -> [String: String]? {
        guard typeString(value) == "a{ss}" else { return nil }
        var result: [String: String] = [:]
        for index in 0..<g_variant_n_children(value) {
            guard let entry = g_variant_get_child_value(value, index) else { continue }
            defer { g_variant_unref(entry) }
            guard let key = g_variant_get_child_value(entry, 0), let item = g_variant_get_child_value(entry, 1) else { continue }
            defer { g_variant_unref(key); g_variant_unref(item) }
            if let name = string(key), let text = string(item) { result[name] = text }
        }
        return result
    }

    /// Calls `body` with each entry of an `a{sv}` dictionary: its name and its unboxed value.
    static func forEachProperty(_ value: OpaquePointer, _ body: (String, OpaquePointer) -> Void) {
        guard typeString(value) == "a{sv}" else { return }
        for index in 0..<g_variant_n_children(value) {
            guard let entry = g_variant_get_child_value(value, index) else { continue }
            defer { g_variant_unref(entry) }
            guard let key = g_variant_get_child_value(entry, 0), let boxed = g_variant_get_child_value(entry, 1) else { continue }
            defer { g_variant_unref(key); g_variant_unref(boxed) }
            guard let name = string(key), let inner = g_variant_get_variant(boxed) else { continue }
            defer { g_variant_unref(inner) }
            body(name, inner)
        }
    }

    static func typeString(_ value: OpaquePointer) -> String {
        g_variant_get_type_string(value).map { String(cString: $0) } ?? ""
    }
}
