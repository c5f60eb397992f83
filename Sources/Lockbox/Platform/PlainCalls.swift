import CLinux

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// What Lockbox used of Foundation beyond FoundationEssentials, on POSIX and the standard library
// alone: `lockbox` links no Foundation (and so no ICU), which keeps its start-up and memory small
// (docs/PERFORMANCE.md).

/// Starts `body` on a new detached POSIX thread called `name` (the kernel keeps 15 bytes of it).
/// Returns false, having run nothing, when the system refuses another thread.
package func startDetachedThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(
        &thread, &attributes,
        { raw in
            guard let raw else { return nil }
            let start = Unmanaged<Start>.fromOpaque(raw).takeRetainedValue()
            _ = lockbox_prctl_set_thread_name(start.name)
            start.body()
            return nil
        }, start)
    guard result == 0 else {
        Unmanaged<Start>.fromOpaque(start).release()
        return false
    }
    return true
}

extension KeyedDecodingContainer {
    /// The string at `key`; `nil` when the key is absent or holds anything else (a number,
    /// `null`, an object), as `object[key] as? String` read a `JSONSerialization` object.
    package func text(at key: Key) -> String? {
        try? decode(String.self, forKey: key)
    }
}

extension StringProtocol {
    /// The text without the white space (Unicode's `White_Space`: spaces, tabs, line ends)
    /// at either end, as Foundation's `trimmingCharacters(in: .whitespacesAndNewlines)`.
    package func trimmingWhiteSpace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
