// The D-Bus wire format (the D-Bus Specification, "Message Protocol"): types, values, and messages
// to and from bytes. Lockbox speaks it itself on the session bus's socket (DBusConnection), so a
// Secret Service command loads no GIO. Everything read here came from another process,
// so the reader checks all the specification requires of a valid message (lengths, alignment
// padding, nesting depth, UTF-8, object paths, signatures, booleans) and fails with
// ``DBusWireError`` on anything else; it never traps. `scripts/ci/fuzz.sh dbus-message` feeds it
// arbitrary bytes.

/// Why bytes are not a valid D-Bus message or value.
package struct DBusWireError: Error, Equatable, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "malformed D-Bus message: \(reason)" }
}

/// A D-Bus type, as a signature spells it.
package indirect enum DBusType: Equatable, Sendable {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double, unixFD
    case string, objectPath, signature
    case variant
    case array(DBusType)
    case structure([DBusType])
    case dictEntry(DBusType, DBusType)

    /// Its signature: `a{sv}` for `.array(.dictEntry(.string, .variant))`.
    package var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .unixFD: "h"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .variant: "v"
        case .array(let element): "a" + element.signature
        case .structure(let members): "(" + members.map(\.signature).joined() + ")"
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        }
    }

    /// The boundary a value of this type starts on.
    var alignment: Int {
        switch self {
        case .byte, .signature, .variant: 1
        case .int16, .uint16: 2
        case .boolean, .int32, .uint32, .unixFD, .string, .objectPath, .array: 4
        case .int64, .uint64, .double, .structure, .dictEntry: 8
        }
    }

    var isBasic: Bool {
        switch self {
        case .variant, .array, .structure, .dictEntry: false
        default: true
        }
    }

    /// The complete types `signature` spells, in order, or an error if it is not a valid
    /// signature: at most 255 bytes, arrays and structures each nested at most 32 deep, dict
    /// entries only as array elements with a basic key, no empty structure.
    package static func parse(_ signature: String) throws(DBusWireError) -> [DBusType] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= 255 else { throw DBusWireError("a signature longer than 255 bytes") }
        var index = 0
        var types: [DBusType] = []
        while index < bytes.count {
            types.append(try parseOne(bytes, &index, arrays: 0, structures: 0, inArray: false))
        }
        return types
    }

    /// The single complete type `signature` spells (a variant's), or an error.
    static func parseSingle(_ signature: String) throws(DBusWireError) -> DBusType {
        let types = try parse(signature)
        guard types.count == 1, let only = types.first else { throw DBusWireError("a variant signature of \(types.count) types") }
        return only
    }

    private static func parseOne(_ bytes: [UInt8], _ index: inout Int, arrays: Int, structures: Int, inArray: Bool) throws(DBusWireError)
        -> DBusType
    {
        guard index < bytes.count else { throw DBusWireError("a signature that ends inside a type") }
        let code = bytes[index]
        index += 1
        switch code {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "h"): return .unixFD
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            guard arrays < 32 else { throw DBusWireError("arrays nested deeper than 32") }
            return .array(try parseOne(bytes, &index, arrays: arrays + 1, structures: structures, inArray: true))
        case UInt8(ascii: "("):
            guard structures < 32 else { throw DBusWireError("structures nested deeper than 32") }
            var members: [DBusType] = []
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                members.append(try parseOne(bytes, &index, arrays: arrays, structures: structures + 1, inArray: false))
            }
            guard index < bytes.count else { throw DBusWireError("a structure signature without ')'") }
            guard !members.isEmpty else { throw DBusWireError("an empty structure") }
            index += 1
            return .structure(members)
        case UInt8(ascii: "{"):
            guard inArray else { throw DBusWireError("a dict entry outside an array") }
            guard structures < 32 else { throw DBusWireError("structures nested deeper than 32") }
            let key = try parseOne(bytes, &index, arrays: arrays, structures: structures + 1, inArray: false)
            guard key.isBasic else { throw DBusWireError("a dict entry whose key is not a basic type") }
            let value = try parseOne(bytes, &index, arrays: arrays, structures: structures + 1, inArray: false)
            guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
                throw DBusWireError("a dict entry of other than two types")
            }
            index += 1
            return .dictEntry(key, value)
        default:
            throw DBusWireError("an unknown type code \(code) in a signature")
        }
    }
}

/// A D-Bus value. Arrays carry their element type, so an empty one still has a signature; `ay`
/// reads and writes as ``bytes(_:)``.
package indirect enum DBusValue: Equatable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    /// A `d`, kept as its bits (Lockbox reads none; NaN compares equal to itself this way).
    case double(bits: UInt64)
    case unixFD(UInt32)
    case string(String)
    case objectPath(String)
    case signature(String)
    case variant(DBusValue)
    case bytes([UInt8])
    case array(DBusType, [DBusValue])
    case structure([DBusValue])
    case dictEntry(DBusValue, DBusValue)

    /// Its type.
    package var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .unixFD: .unixFD
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .variant: .variant
        case .bytes: .array(.byte)
        case .array(let element, _): .array(element)
        case .structure(let members): .structure(members.map(\.type))
        case .dictEntry(let key, let value): .dictEntry(key.type, value.type)
        }
    }

    /// An `a{ss}`, its entries in key order.
    package static func stringDictionary(_ values: [String: String]) -> DBusValue {
        .array(.dictEntry(.string, .string), values.sorted { $0.key < $1.key }.map { .dictEntry(.string($0.key), .string($0.value)) })
    }

    /// The text of a `s` or `o`.
    package var text: String? {
        switch self {
        case .string(let text), .objectPath(let text): text
        default: nil
        }
    }

    /// The entries of an `a{ss}`; `nil` for a value of any other type.
    package var stringDictionary: [String: String]? {
        guard case .array(.dictEntry(.string, .string), let entries) = self else { return nil }
        var result: [String: String] = [:]
        for case .dictEntry(.string(let key), .string(let value)) in entries { result[key] = value }
        return result
    }

    /// The entries of an `a{sv}`, each value unboxed; `nil` for a value of any other type.
    package var properties: [(name: String, value: DBusValue)]? {
        guard case .array(.dictEntry(.string, .variant), let entries) = self else { return nil }
        return entries.compactMap { entry in
            guard case .dictEntry(.string(let name), .variant(let value)) = entry else { return nil }
            return (name, value)
        }
    }

    /// The elements of an array (of any element type).
    package var elements: [DBusValue]? {
        switch self {
        case .array(_, let values): values
        case .bytes(let bytes): bytes.map { .byte($0) }
        default: nil
        }
    }
}

/// Whether `text` is a valid object path: `/`, or `/`-separated non-empty elements of
/// `[A-Za-z0-9_]`, with no trailing `/`.
package func isValidObjectPath(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    guard bytes.first == UInt8(ascii: "/") else { return false }
    if bytes.count == 1 { return true }
    guard bytes.last != UInt8(ascii: "/") else { return false }
    var previousSlash = true  // the leading '/'
    for byte in bytes.dropFirst() {
        if byte == UInt8(ascii: "/") {
            if previousSlash { return false }
            previousSlash = true
            continue
        }
        previousSlash = false
        let allowed = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        if !allowed { return false }
    }
    return true
}

// MARK: - Writing

/// Appends values in the wire format, little-endian, aligned from the start of `bytes`.
struct DBusWriter {
    var bytes: [UInt8] = []

    mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func appendString(_ text: String) {
        append(UInt32(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    mutating func appendSignature(_ text: String) {
        bytes.append(UInt8(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    /// Appends `value`. The caller built it, so a mismatch between an array's element type and
    /// its elements, or an invalid string, is a programming error reported here rather than a
    /// message the peer would refuse.
    mutating func append(_ value: DBusValue) throws(DBusWireError) {
        switch value {
        case .byte(let byte): bytes.append(byte)
        case .boolean(let flag): append(UInt32(flag ? 1 : 0))
        case .int16(let number): append(number)
        case .uint16(let number): append(number)
        case .int32(let number): append(number)
        case .uint32(let number), .unixFD(let number): append(number)
        case .int64(let number): append(number)
        case .uint64(let number), .double(bits: let number): append(number)
        case .string(let text):
            guard !text.utf8.contains(0) else { throw DBusWireError("a string with a NUL byte") }
            guard text.utf8.count < DBusMessage.maximumLength else { throw DBusWireError("a string longer than a message") }
            appendString(text)
        case .objectPath(let text):
            guard isValidObjectPath(text) else { throw DBusWireError("an invalid object path") }
            appendString(text)
        case .signature(let text):
            _ = try DBusType.parse(text)
            appendSignature(text)
        case .variant(let inner):
            let signature = inner.type.signature
            _ = try DBusType.parseSingle(signature)
            appendSignature(signature)
            try append(inner)
        case .bytes(let content):
            guard content.count <= 1 << 26 else { throw DBusWireError("an array longer than 64 MiB") }
            append(UInt32(content.count))
            bytes.append(contentsOf: content)
        case .array(let element, let values):
            pad(to: 4)
            let lengthAt = bytes.count
            append(UInt32(0))
            pad(to: element.alignment)
            let start = bytes.count
            for value in values {
                guard value.type == element else { throw DBusWireError("an array element of another type than the array's") }
                try append(value)
            }
            let length = bytes.count - start
            guard length <= 1 << 26 else { throw DBusWireError("an array longer than 64 MiB") }
            withUnsafeBytes(of: UInt32(length).littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
        case .structure(let members):
            pad(to: 8)
            for member in members { try append(member) }
        case .dictEntry(let key, let value):
            pad(to: 8)
            try append(key)
            try append(value)
        }
    }
}

// MARK: - Reading

/// Reads values in the wire format from `bytes`, aligned from its start, checking everything.
struct DBusReader {
    let bytes: [UInt8]
    let bigEndian: Bool
    var offset = 0
    /// Containers (arrays, structures, dict entries, variants) open around the value being read:
    /// at most 64, as the specification's limit on a message's total depth.
    private var depth = 0

    init(_ bytes: [UInt8], bigEndian: Bool, offset: Int = 0) {
        self.bytes = bytes
        self.bigEndian = bigEndian
        self.offset = offset
    }

    var atEnd: Bool { offset == bytes.count }

    mutating func skipPadding(to alignment: Int) throws(DBusWireError) {
        while offset % alignment != 0 {
            guard offset < bytes.count else { throw DBusWireError("the message ends inside alignment padding") }
            guard bytes[offset] == 0 else { throw DBusWireError("non-zero alignment padding") }
            offset += 1
        }
    }

    mutating func readByte() throws(DBusWireError) -> UInt8 {
        guard offset < bytes.count else { throw DBusWireError("the message ends inside a value") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func read<T: FixedWidthInteger>(_: T.Type) throws(DBusWireError) -> T {
        let size = MemoryLayout<T>.size
        try skipPadding(to: size)
        guard bytes.count - offset >= size else { throw DBusWireError("the message ends inside a value") }
        var value: T = 0
        for index in 0..<size {
            let byte = T(truncatingIfNeeded: bytes[offset + index])
            value |= bigEndian ? byte << (8 * (size - 1 - index)) : byte << (8 * index)
        }
        offset += size
        return value
    }

    /// `count` bytes, then a NUL, as valid UTF-8 with no NUL inside.
    private mutating func readText(count: Int) throws(DBusWireError) -> String {
        guard count >= 0, bytes.count - offset > count else { throw DBusWireError("a string longer than the message") }
        let content = bytes[offset..<offset + count]
        guard bytes[offset + count] == 0 else { throw DBusWireError("a string without its NUL") }
        guard !content.contains(0) else { throw DBusWireError("a string with a NUL byte") }
        guard let text = String(validating: content, as: UTF8.self) else { throw DBusWireError("a string that is not UTF-8") }
        offset += count + 1
        return text
    }

    mutating func readString() throws(DBusWireError) -> String {
        let count = try read(UInt32.self)
        guard count <= UInt32(Int32.max) else { throw DBusWireError("a string longer than the message") }
        return try readText(count: Int(count))
    }

    mutating func readSignature() throws(DBusWireError) -> String {
        let count = try readByte()
        let text = try readText(count: Int(count))
        _ = try DBusType.parse(text)
        return text
    }

    mutating func read(_ type: DBusType) throws(DBusWireError) -> DBusValue {
        switch type {
        case .byte: return .byte(try readByte())
        case .boolean:
            let raw = try read(UInt32.self)
            guard raw <= 1 else { throw DBusWireError("a boolean other than 0 or 1") }
            return .boolean(raw == 1)
        case .int16: return .int16(try read(Int16.self))
        case .uint16: return .uint16(try read(UInt16.self))
        case .int32: return .int32(try read(Int32.self))
        case .uint32: return .uint32(try read(UInt32.self))
        case .unixFD: return .unixFD(try read(UInt32.self))
        case .int64: return .int64(try read(Int64.self))
        case .uint64: return .uint64(try read(UInt64.self))
        case .double: return .double(bits: try read(UInt64.self))
        case .string: return .string(try readString())
        case .objectPath:
            let text = try readString()
            guard isValidObjectPath(text) else { throw DBusWireError("an invalid object path") }
            return .objectPath(text)
        case .signature: return .signature(try readSignature())
        case .variant:
            let inner = try DBusType.parseSingle(try readSignature())
            return .variant(try nested { (reader: inout DBusReader) throws(DBusWireError) in try reader.read(inner) })
        case .array(let element):
            let length = try read(UInt32.self)
            guard length <= 1 << 26 else { throw DBusWireError("an array longer than 64 MiB") }
            try skipPadding(to: element.alignment)
            guard bytes.count - offset >= Int(length) else { throw DBusWireError("an array longer than the message") }
            let end = offset + Int(length)
            if element == .byte {
                // Counted as a container, as GLib and zbus count it.
                return try nested { (reader: inout DBusReader) throws(DBusWireError) in
                    defer { reader.offset = end }
                    return .bytes(Array(reader.bytes[reader.offset..<end]))
                }
            }
            return .array(
                element,
                try nested { (reader: inout DBusReader) throws(DBusWireError) in
                    var values: [DBusValue] = []
                    while reader.offset < end {
                        values.append(try reader.read(element))
                        guard reader.offset <= end else { throw DBusWireError("an array element past the array's end") }
                    }
                    return values
                })
        case .structure(let members):
            try skipPadding(to: 8)
            return .structure(
                try nested { (reader: inout DBusReader) throws(DBusWireError) in
                    var values: [DBusValue] = []
                    for member in members { values.append(try reader.read(member)) }
                    return values
                })
        case .dictEntry(let keyType, let valueType):
            try skipPadding(to: 8)
            return try nested { (reader: inout DBusReader) throws(DBusWireError) in
                let key = try reader.read(keyType)
                return .dictEntry(key, try reader.read(valueType))
            }
        }
    }

    private mutating func nested<T>(_ body: (inout DBusReader) throws(DBusWireError) -> T) throws(DBusWireError) -> T {
        guard depth < 64 else { throw DBusWireError("values nested deeper than 64") }
        depth += 1
        defer { depth -= 1 }
        return try body(&self)
    }
}

// MARK: - Messages

/// One D-Bus message: its header's fields that Lockbox uses, and its body.
package struct DBusMessage: Equatable, Sendable {
    package enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    package var kind: Kind
    package var flags: UInt8 = 0
    package var serial: UInt32
    package var path: String?
    package var interface: String?
    package var member: String?
    package var errorName: String?
    package var replySerial: UInt32?
    package var destination: String?
    package var sender: String?
    /// The body's values; their types make the message's signature.
    package var body: [DBusValue] = []

    /// The body's signature.
    package var signature: String { body.map(\.type.signature).joined() }

    /// The most a message may be, header and body (the specification's limit).
    package static let maximumLength = 1 << 27

    package init(
        kind: Kind, serial: UInt32, path: String? = nil, interface: String? = nil, member: String? = nil,
        errorName: String? = nil, replySerial: UInt32? = nil, destination: String? = nil, sender: String? = nil,
        body: [DBusValue] = []
    ) {
        self.kind = kind
        self.serial = serial
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.replySerial = replySerial
        self.destination = destination
        self.sender = sender
        self.body = body
    }

    /// A method call (no reply expected flag unset; the bus may start the destination).
    package static func methodCall(
        serial: UInt32, destination: String, path: String, interface: String, member: String,
        body: [DBusValue]
    ) -> DBusMessage {
        DBusMessage(
            kind: .methodCall, serial: serial, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    /// The message's bytes, little-endian.
    package func encoded() throws(DBusWireError) -> [UInt8] {
        var fields: [DBusValue] = []
        func field(_ code: UInt8, _ value: DBusValue?) {
            if let value { fields.append(.structure([.byte(code), .variant(value)])) }
        }
        field(1, path.map { .objectPath($0) })
        field(2, interface.map { .string($0) })
        field(3, member.map { .string($0) })
        field(4, errorName.map { .string($0) })
        field(5, replySerial.map { .uint32($0) })
        field(6, destination.map { .string($0) })
        field(7, sender.map { .string($0) })
        let signature = signature
        field(8, signature.isEmpty ? nil : .signature(signature))

        var body = DBusWriter()
        for value in self.body { try body.append(value) }
        var writer = DBusWriter()
        writer.bytes.reserveCapacity(64 + body.bytes.count)
        writer.bytes.append(contentsOf: [UInt8(ascii: "l"), kind.rawValue, flags, 1])
        writer.append(UInt32(body.bytes.count))
        writer.append(serial)
        try writer.append(.array(.structure([.byte, .variant]), fields))
        writer.pad(to: 8)
        writer.bytes.append(contentsOf: body.bytes)
        guard writer.bytes.count <= Self.maximumLength else { throw DBusWireError("a message longer than 128 MiB") }
        return writer.bytes
    }

    /// Where a message's parts end, from its first 16 bytes.
    package struct Frame: Equatable, Sendable {
        /// The fixed header and the header fields, padded to 8: where the body starts.
        package var headerLength: Int
        package var bodyLength: Int
        package var bigEndian: Bool
        /// Header and body.
        package var length: Int { headerLength + bodyLength }
    }

    /// The frame of the message starting with `prefix`, once `prefix` holds its first 16 bytes
    /// (`nil` before that), or an error if those bytes cannot start a message: then the stream
    /// cannot be read further.
    package static func frame(startingWith prefix: ArraySlice<UInt8>) throws(DBusWireError) -> Frame? {
        guard prefix.count >= 16 else { return nil }
        let start = prefix.startIndex
        let bigEndian: Bool
        switch prefix[start] {
        case UInt8(ascii: "l"): bigEndian = false
        case UInt8(ascii: "B"): bigEndian = true
        default: throw DBusWireError("an unknown byte order")
        }
        guard prefix[start + 3] == 1 else { throw DBusWireError("protocol version \(prefix[start + 3])") }
        func word(_ at: Int) -> Int {
            let bytes = (0..<4).map { Int(prefix[start + at + $0]) }
            return bigEndian
                ? bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]
                : bytes[3] << 24 | bytes[2] << 16 | bytes[1] << 8 | bytes[0]
        }
        let bodyLength = word(4)
        let fieldsLength = word(12)
        guard bodyLength <= maximumLength, fieldsLength <= 1 << 26 else { throw DBusWireError("a message longer than 128 MiB") }
        let headerLength = (16 + fieldsLength + 7) & ~7
        guard headerLength + bodyLength <= maximumLength else { throw DBusWireError("a message longer than 128 MiB") }
        return Frame(headerLength: headerLength, bodyLength: bodyLength, bigEndian: bigEndian)
    }

    /// How many bytes the message starting with `prefix` has in all (``frame(startingWith:)``).
    package static func length(startingWith prefix: ArraySlice<UInt8>) throws(DBusWireError) -> Int? {
        try frame(startingWith: prefix)?.length
    }

    /// A message's header: every field, no body yet.
    package struct Header: Sendable {
        /// The message with an empty ``DBusMessage/body``.
        package var message: DBusMessage
        /// The body's signature.
        package var signature: String
        package var frame: Frame
    }

    /// Reads a message's header from `bytes`, which hold at least its ``Frame/headerLength``
    /// bytes. A message type the specification does not define is an error here; a reader of a
    /// stream skips such messages, as it must ignore them.
    package static func decodeHeader(_ bytes: ArraySlice<UInt8>) throws(DBusWireError) -> Header {
        guard let frame = try frame(startingWith: bytes), bytes.count >= frame.headerLength else {
            throw DBusWireError("a header longer than the bytes given")
        }
        let start = bytes.startIndex
        guard let kind = Kind(rawValue: bytes[start + 1]) else { throw DBusWireError("an unknown message type \(bytes[start + 1])") }
        var reader = DBusReader(Array(bytes[start..<start + frame.headerLength]), bigEndian: frame.bigEndian, offset: 8)
        let serial = try reader.read(UInt32.self)
        guard serial != 0 else { throw DBusWireError("serial 0") }
        var message = DBusMessage(kind: kind, serial: serial)
        message.flags = bytes[start + 2]
        guard case .array(_, let fields) = try reader.read(.array(.structure([.byte, .variant]))) else {
            throw DBusWireError("no header fields")
        }
        var signature = ""
        var seen = Set<UInt8>()
        for case .structure(let pair) in fields {
            guard pair.count == 2, case .byte(let code) = pair[0], case .variant(let value) = pair[1] else { continue }
            guard seen.insert(code).inserted else { throw DBusWireError("header field \(code) twice") }
            switch (code, value) {
            case (0, _): throw DBusWireError("header field 0, which is invalid")
            case (1, .objectPath(let text)): message.path = text
            case (2, .string(let text)): message.interface = text
            case (3, .string(let text)): message.member = text
            case (4, .string(let text)): message.errorName = text
            case (5, .uint32(let number)): message.replySerial = number
            case (6, .string(let text)): message.destination = text
            case (7, .string(let text)): message.sender = text
            case (8, .signature(let text)): signature = text
            case (9, .uint32): throw DBusWireError("a message carrying file descriptors, which Lockbox never asks for")
            case (1...9, _): throw DBusWireError("header field \(code) of the wrong type")
            default: break  // unknown fields are ignored, as the specification requires
            }
        }
        switch kind {
        case .methodCall:
            guard message.path != nil, message.member != nil else { throw DBusWireError("a method call without path or member") }
        case .methodReturn: guard message.replySerial != nil else { throw DBusWireError("a method return without a reply serial") }
        case .error:
            guard message.replySerial != nil, message.errorName != nil else {
                throw DBusWireError("an error without a reply serial or name")
            }
        case .signal:
            guard message.path != nil, message.interface != nil, message.member != nil else {
                throw DBusWireError("a signal without path, interface or member")
            }
        }
        try reader.skipPadding(to: 8)
        guard reader.atEnd else { throw DBusWireError("header fields that end before their length says") }
        _ = try DBusType.parse(signature)
        return Header(message: message, signature: signature, frame: frame)
    }

    /// Reads a body of the types `signature` spells from `bytes`, which must be exactly the body
    /// (it starts 8-aligned in its message, so alignment counts from its start).
    package static func decodeBody(_ bytes: [UInt8], signature: String, bigEndian: Bool) throws(DBusWireError) -> [DBusValue] {
        var reader = DBusReader(bytes, bigEndian: bigEndian)
        var values: [DBusValue] = []
        for type in try DBusType.parse(signature) { values.append(try reader.read(type)) }
        guard reader.atEnd else { throw DBusWireError("bytes after the body's values") }
        return values
    }

    /// Reads one whole message: `bytes` must be exactly one message (see
    /// ``length(startingWith:)``).
    package static func decode(_ bytes: [UInt8]) throws(DBusWireError) -> DBusMessage {
        guard let frame = try frame(startingWith: bytes[...]), frame.length == bytes.count else {
            throw DBusWireError("a message whose length differs from its header's")
        }
        var header = try decodeHeader(bytes[...])
        header.message.body = try decodeBody(Array(bytes[frame.headerLength...]), signature: header.signature, bigEndian: frame.bigEndian)
        return header.message
    }
}
