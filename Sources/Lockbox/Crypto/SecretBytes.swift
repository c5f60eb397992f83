import CSodium

/// Secret bytes — a passphrase, a key, a token — held in memory that is zeroed when released.
///
/// Every secret that passes through Lockbox lives in a `SecretBytes`: the bytes are copied once
/// into guarded memory (libsodium's `sodium_malloc`: locked into RAM, excluded from core dumps,
/// behind guard pages; see `SecureHeap`), never printed (``description``, ``debugDescription`` and `dump`
/// show `<redacted>`), compared in constant time, and wiped with `sodium_memzero` when the last
/// reference goes away. The value is immutable, so it is safe to share across threads.
///
/// Copies that *you* make (a `String` from ``stringValue()``, a `[UInt8]` built from
/// ``withUnsafeBytes(_:)``) are outside this guarantee: keep them short-lived.
public final class SecretBytes: @unchecked Sendable {
    // Immutable after init; the buffer is written only inside the initialisers.
    private let base: UnsafeMutableRawPointer?
    /// The number of secret bytes.
    public let count: Int

    /// Creates a buffer of `count` bytes and lets `initializer` fill it.
    ///
    /// If `initializer` throws, the partly written buffer is zeroed and freed.
    public init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        precondition(count >= 0, "SecretBytes count must not be negative")
        if count == 0 {
            base = nil
            self.count = 0
            try initializer(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            return
        }
        let pointer = SecureHeap.allocate(count)  // zero-filled, guarded, locked, not dumped
        do {
            try initializer(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            sodium_memzero(pointer, count)
            SecureHeap.deallocate(pointer, count: count)
            throw error
        }
        base = pointer
        self.count = count
    }

    /// Copies `bytes` into secret storage. The source collection is not wiped.
    public convenience init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        self.init(count: bytes.count) { buffer in
            _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        }
    }

    /// Copies the UTF-8 bytes of `string` into secret storage. The `String` itself is not wiped.
    public convenience init(utf8 string: String) {
        var string = string
        let count = string.utf8.count
        self.init(count: count) { buffer in
            string.withUTF8 { utf8 in
                if let source = utf8.baseAddress, count > 0 {
                    buffer.baseAddress?.copyMemory(from: source, byteCount: count)
                }
            }
        }
    }

    /// `count` bytes from libsodium's CSPRNG (`randombytes_buf`).
    public static func random(count: Int) -> SecretBytes {
        Sodium.ensureInitialized()
        return SecretBytes(count: count) { buffer in
            if let start = buffer.baseAddress { randombytes_buf(start, buffer.count) }
        }
    }

    deinit {
        if let base {
            sodium_memzero(base, count)
            SecureHeap.deallocate(base, count: count)
        }
    }

    /// Calls `body` with a read-only view of the secret bytes. Do not let the pointer escape.
    public func withUnsafeBytes<Result>(
        _ body: (UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Decodes the bytes as UTF-8, or returns `nil` if they are not valid UTF-8.
    ///
    /// The returned `String` is an ordinary Swift value that Lockbox cannot wipe.
    public func stringValue() -> String? {
        withUnsafeBytes { bytes in
            String(validating: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        }
    }

    /// Whether the bytes are valid UTF-8, checked in place: unlike ``stringValue()``, no `String`
    /// (ordinary memory Lockbox cannot wipe) is made.
    package var isValidUTF8: Bool {
        withUnsafeBytes { bytes in
            var iterator = bytes.makeIterator()
            var decoder = Unicode.UTF8()
            while true {
                switch decoder.decode(&iterator) {
                case .scalarValue: continue
                case .emptyInput: return true
                case .error: return false
                }
            }
        }
    }

    /// A new secret buffer holding a copy of the bytes in `range`.
    func slice(_ range: Range<Int>) -> SecretBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        return SecretBytes(count: range.count) { target in
            withUnsafeBytes { source in
                if range.count > 0, let from = source.baseAddress, let to = target.baseAddress {
                    to.copyMemory(from: from + range.lowerBound, byteCount: range.count)
                }
            }
        }
    }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison (`sodium_memcmp`); lengths are compared first and are not secret.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in
                sodium_memcmp(a.bytes, b.bytes, a.count) == 0
            }
        }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `<redacted>`: secrets never reach logs through string interpolation.
    public var description: String { "<redacted>" }
    /// Always `SecretBytes(<redacted>)`.
    public var debugDescription: String { "SecretBytes(<redacted>)" }
    /// A mirror with no children, so `dump` and debuggers' summaries show nothing secret.
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .struct) }
}
