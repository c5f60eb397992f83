/// Little-endian encoding helpers for the vault format. Reading is bounds-checked everywhere:
/// the bytes come from a file anyone could have edited.

/// Why bytes could not be parsed: a short phrase that ends up in ``LockboxError/corruptVault(path:reason:)``.
package struct FormatError: Error, Equatable {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
}

/// Appends little-endian fields to a growable, non-secret byte array (headers).
package struct ByteWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func append(_ value: UInt8) { bytes.append(value) }
    package mutating func append(_ value: UInt16) { appendLittleEndian(value) }
    package mutating func append(_ value: UInt32) { appendLittleEndian(value) }
    package mutating func append(_ value: UInt64) { appendLittleEndian(value) }
    package mutating func append(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    private mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Writes little-endian fields into a fixed-size buffer (secret payloads), never reallocating,
/// so no copy of the plaintext is left behind in freed memory.
package struct FixedBufferWriter {
    package let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    package init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    package mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    package mutating func append(_ raw: UnsafeRawBufferPointer) {
        precondition(offset + raw.count <= buffer.count, "payload size was miscounted")
        if raw.count > 0, let target = buffer.baseAddress, let source = raw.baseAddress {
            (target + offset).copyMemory(from: source, byteCount: raw.count)
        }
        offset += raw.count
    }

    /// A string as a `UInt16` byte count followed by its UTF-8 bytes.
    package mutating func appendShortString(_ string: String) {
        var string = string
        append(UInt16(string.utf8.count))
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }
}

/// Reads little-endian fields, throwing ``FormatError`` instead of reading out of bounds.
package struct ByteReader {
    package let bytes: UnsafeRawBufferPointer
    package private(set) var offset: Int

    package init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var remaining: Int { bytes.count - offset }

    package mutating func read<T: FixedWidthInteger>(_: T.Type, _ what: @autoclosure () -> String) throws -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw FormatError("truncated at \(what())") }
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + size]))
        }
        offset += size
        return T(littleEndian: value)
    }

    package mutating func readBytes(_ count: Int, _ what: @autoclosure () -> String) throws -> [UInt8] {
        Array(try readSlice(count, what()))
    }

    package mutating func readSlice(_ count: Int, _ what: @autoclosure () -> String) throws -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw FormatError("truncated at \(what())") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// A `UInt16` byte count followed by that many bytes of valid UTF-8.
    /// The field's name (`what`) is built only when there is an error to report: this runs for
    /// every field of every item when a vault is opened.
    package mutating func readShortString(_ what: @autoclosure () -> String) throws -> String {
        let length = Int(try read(UInt16.self, "\(what()) length"))
        let slice = try readSlice(length, what())
        guard let string = String(validating: slice.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
            throw FormatError("\(what()) is not valid UTF-8")
        }
        return string
    }
}
