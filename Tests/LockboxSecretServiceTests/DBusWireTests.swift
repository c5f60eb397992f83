import Foundation
import LockboxSecretService
import Testing

@testable import LockboxTestSupport

/// Lockbox's own D-Bus wire format (DBusWire.swift): what it writes reads back the same, what the
/// specification calls invalid is refused with an error (never a trap), and damaged bytes never
/// crash the reader.
@Suite("D-Bus wire format")
struct DBusWireTests {
    /// A method call with a value of every type, in containers and empty ones. Made anew on each
    /// use, not kept in a static: an indirect enum's boxes are referenced through pointers with
    /// the case in their spare bits, which LeakSanitizer does not recognise, so a static holding
    /// them is reported as leaked at exit under `scripts/ci/sanitizers.sh`.
    static var everything: DBusMessage {
        DBusMessage.methodCall(
            serial: 7, destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets/aliases/default",
            interface: "org.freedesktop.Secret.Collection", member: "CreateItem",
            body: [
                .byte(0xFF), .boolean(true), .int16(-2), .uint16(65535), .int32(-70000), .uint32(4_000_000_000),
                .int64(-1 << 40), .uint64(1 << 63), .double(bits: 0x3FF0_0000_0000_0000), .string("zürich"), .objectPath("/"),
                .signature("a{sv}(oayays)"),
                .variant(.variant(.bytes([1, 2, 3]))),
                .array(
                    .dictEntry(.string, .variant),
                    [
                        .dictEntry(.string("org.freedesktop.Secret.Item.Label"), .variant(.string("label"))),
                        .dictEntry(
                            .string("org.freedesktop.Secret.Item.Attributes"),
                            .variant(.stringDictionary(["service": "s", "username": "u"]))),
                    ]),
                .array(.structure([.byte, .uint64]), []),
                .array(.array(.uint64), [.array(.uint64, []), .array(.uint64, [.uint64(9)])]),
                .structure([.objectPath("/org/freedesktop/secrets/session/s1"), .bytes([]), .bytes(Array(0..<48)), .string("text/plain")]),
                .stringDictionary([:]),
            ])
    }

    @Test("a message of every type reads back as it was written")
    func roundTrip() throws {
        let bytes = try Self.everything.encoded()
        #expect(bytes[0] == UInt8(ascii: "l"))
        #expect(try DBusMessage.length(startingWith: bytes[...]) == bytes.count)
        let decoded = try DBusMessage.decode(bytes)
        #expect(decoded == Self.everything)
        #expect(decoded.signature == "ybnqiuxtdsogva{sv}a(yt)aat(oayays)a{ss}")
        #expect(try decoded.encoded() == bytes)
    }

    /// The Hello call as the specification lays it out, byte for byte: the header's fields array
    /// of (byte, variant) structures, each 8-aligned, the header padded to 8, no body.
    @Test("Hello is laid out as the specification says")
    func helloBytes() throws {
        let hello = DBusMessage.methodCall(
            serial: 1, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "Hello", body: [])
        var expected: [UInt8] = [0x6C, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0]
        var fields: [UInt8] = []
        func field(_ code: UInt8, _ type: Character, _ text: String) {
            while fields.count % 8 != 0 { fields.append(0) }
            fields += [code, 1, UInt8(ascii: type.unicodeScalars.first ?? "s"), 0]
            fields += withUnsafeBytes(of: UInt32(text.utf8.count).littleEndian, Array.init) + Array(text.utf8) + [0]
        }
        field(1, "o", "/org/freedesktop/DBus")
        field(2, "s", "org.freedesktop.DBus")
        field(3, "s", "Hello")
        field(6, "s", "org.freedesktop.DBus")
        expected += withUnsafeBytes(of: UInt32(fields.count).littleEndian, Array.init) + fields
        while expected.count % 8 != 0 { expected.append(0) }
        #expect(try hello.encoded() == expected)
    }

    /// Messages recorded with `dbus-monitor --binary` on the test command's bus while `lockbox`
    /// and `secret-tool` stored, read, listed and deleted an item: dbus-daemon's, gnome-keyring's,
    /// GDBus's and Lockbox's own (also the fuzzer's seeds).
    @Test("real messages from dbus-daemon, gnome-keyring and libsecret read, and their bodies write back byte for byte")
    func recordedMessages() throws {
        let folder = repositoryRoot.appendingPathComponent("Fuzz/corpus/dbus-message").path
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(names.count >= 25, "\(names)")
        var members = Set<String>()
        for name in names {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))
            let message = try DBusMessage.decode(bytes)
            members.insert(message.member ?? message.errorName ?? "return \(message.signature)")
            let encoded = try message.encoded()
            #expect(try DBusMessage.decode(encoded) == message, "\(name)")
            // The header's fields may come in another order; the body is canonical.
            let bodyLength = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
            #expect(Array(encoded.suffix(bodyLength)) == Array(bytes.suffix(bodyLength)), "\(name)")
        }
        for expected in [
            "Hello", "OpenSession", "CreateItem", "GetSecret", "SearchItems", "GetAll", "NameAcquired",
            "org.freedesktop.DBus.Error.ServiceUnknown", "return (oayays)", "return a{o(oayays)}",
        ] {
            #expect(members.contains(expected), "no recorded \(expected) message")
        }
    }

    @Test("a big-endian message reads as well as a little-endian one")
    func bigEndian() throws {
        // A method return (type 2) to serial 5 with body signature "su": "hi", 258.
        var bytes: [UInt8] = [UInt8(ascii: "B"), 2, 0, 1]
        let body: [UInt8] = [0, 0, 0, 2, UInt8(ascii: "h"), UInt8(ascii: "i"), 0, 0, 0, 0, 1, 2]
        bytes += [0, 0, 0, UInt8(body.count), 0, 0, 0, 9]
        let fields: [UInt8] = [
            5, 1, UInt8(ascii: "u"), 0, 0, 0, 0, 5, 8, 1, UInt8(ascii: "g"), 0, 2, UInt8(ascii: "s"), UInt8(ascii: "u"), 0,
        ]
        bytes += [0, 0, 0, UInt8(fields.count)] + fields + body
        let message = try DBusMessage.decode(bytes)
        #expect(message.kind == .methodReturn && message.serial == 9 && message.replySerial == 5)
        #expect(message.body == [.string("hi"), .uint32(258)])
    }

    /// A valid reply to serial 1 with the body `signature` and `body` bytes (little-endian).
    static func reply(signature: String, body: [UInt8], fields extra: [UInt8] = []) -> [UInt8] {
        var fields: [UInt8] = [5, 1, UInt8(ascii: "u"), 0, 1, 0, 0, 0]
        fields += [8, 1, UInt8(ascii: "g"), 0, UInt8(signature.utf8.count)] + Array(signature.utf8) + [0]
        if !extra.isEmpty {
            while (16 + fields.count) % 8 != 0 { fields.append(0) }
            fields += extra
        }
        var bytes: [UInt8] = [UInt8(ascii: "l"), 2, 0, 1]
        bytes += withUnsafeBytes(of: UInt32(body.count).littleEndian, Array.init)
        bytes += [3, 0, 0, 0]
        bytes += withUnsafeBytes(of: UInt32(fields.count).littleEndian, Array.init) + fields
        while bytes.count % 8 != 0 { bytes.append(0) }
        return bytes + body
    }

    @Test("the reply builder itself makes messages that read")
    func replyBuilderControl() throws {
        #expect(try DBusMessage.decode(Self.reply(signature: "b", body: [1, 0, 0, 0])).body == [.boolean(true)])
        #expect(try DBusMessage.decode(Self.reply(signature: "s", body: [2, 0, 0, 0, 0x68, 0x69, 0])).body == [.string("hi")])
        #expect(try DBusMessage.decode(Self.reply(signature: "ay", body: [0, 0, 0, 0])).body == [.bytes([])])
        #expect(try DBusMessage.decode(Self.reply(signature: "at", body: [0, 0, 0, 0, 0, 0, 0, 0])).body == [.array(.uint64, [])])
    }

    @Test(
        "what the specification calls invalid is refused, with a reason",
        arguments: [
            ("boolean 2", "b", [2, 0, 0, 0] as [UInt8]),
            ("string without its NUL", "s", [2, 0, 0, 0, 0x68, 0x69, 1]),
            ("string with a NUL inside", "s", [2, 0, 0, 0, 0x68, 0, 0]),
            ("string not UTF-8", "s", [2, 0, 0, 0, 0xC3, 0x28, 0]),
            ("string longer than the message", "s", [0xFF, 0xFF, 0xFF, 0x7F, 0]),
            ("object path with //", "o", [3, 0, 0, 0, 0x2F, 0x2F, 0x61, 0]),
            ("object path ending in /", "o", [3, 0, 0, 0, 0x2F, 0x61, 0x2F, 0]),
            ("object path with -", "o", [2, 0, 0, 0, 0x2F, 0x2D, 0]),
            ("non-zero padding", "yu", [1, 0, 1, 0, 5, 0, 0, 0]),
            ("array longer than the message", "ay", [9, 0, 0, 0, 1]),
            ("array over 64 MiB", "ay", [1, 0, 0, 4]),
            ("array element past the array's end", "au", [2, 0, 0, 0, 1, 0, 0, 0]),
            ("non-zero padding before an array's first element", "at", [8, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
            ("variant of two types", "v", [2, 0x79, 0x79, 0, 1, 2]),
            ("variant of no type", "v", [0, 0]),
            ("signature with an unknown code", "g", [1, 0x7A, 0]),
            ("bytes after the body's values", "y", [1, 2]),
            ("body shorter than its signature", "uu", [1, 0, 0, 0]),
        ])
    func invalidBodies(_ name: String, _ signature: String, _ body: [UInt8]) throws {
        #expect(throws: DBusWireError.self, "\(name)") { try DBusMessage.decode(Self.reply(signature: signature, body: body)) }
    }

    @Test(
        "invalid signatures are refused",
        arguments: [
            "a", "(", ")", "()", "{ss}", "a{vs}", "a{s}", "a{sss}", "(s", "z",
            String(repeating: "a", count: 33) + "y",
            String(repeating: "(", count: 33) + "y" + String(repeating: ")", count: 33),
            String(repeating: "y", count: 256),
        ])
    func invalidSignatures(_ signature: String) {
        #expect(throws: DBusWireError.self) { try DBusType.parse(signature) }
    }

    @Test(
        "valid signatures parse and spell themselves back",
        arguments: [
            "", "y", "a{sv}", "(oayays)", "aoao", "a{oa{sa{sv}}}",
            String(repeating: "a", count: 32) + "y", "v", "a(yv)",
        ])
    func validSignatures(_ signature: String) throws {
        #expect(try DBusType.parse(signature).map(\.signature).joined() == signature)
    }

    @Test("variants nested past 64 are refused, and below it read")
    func variantDepth() throws {
        func nested(_ depth: Int) -> [UInt8] {
            // depth variants, each "v" signature, around a byte: signature bytes are 1-aligned.
            Array(repeating: [1, UInt8(ascii: "v"), 0] as [UInt8], count: depth - 1).flatMap { $0 } + [1, UInt8(ascii: "y"), 0, 42]
        }
        #expect(throws: Never.self) { try DBusMessage.decode(Self.reply(signature: "v", body: nested(60))) }
        #expect(throws: DBusWireError.self) { try DBusMessage.decode(Self.reply(signature: "v", body: nested(70))) }
        // Deep enough to overflow the stack if the depth were not bounded.
        #expect(throws: DBusWireError.self) { try DBusMessage.decode(Self.reply(signature: "v", body: nested(100_000))) }
    }

    @Test("headers the specification forbids are refused")
    func invalidHeaders() throws {
        let valid = Self.reply(signature: "", body: [])
        #expect(throws: Never.self) { try DBusMessage.decode(valid) }
        func changed(_ index: Int, _ value: UInt8) -> [UInt8] {
            var bytes = valid
            bytes[index] = value
            return bytes
        }
        #expect(throws: DBusWireError.self, "byte order") { try DBusMessage.decode(changed(0, UInt8(ascii: "x"))) }
        #expect(throws: DBusWireError.self, "message type") { try DBusMessage.decode(changed(1, 9)) }
        #expect(throws: DBusWireError.self, "version") { try DBusMessage.decode(changed(3, 2)) }
        #expect(throws: DBusWireError.self, "serial 0") { try DBusMessage.decode(changed(8, 0)) }
        #expect(throws: DBusWireError.self, "reply serial of type s") { try DBusMessage.decode(changed(18, UInt8(ascii: "s"))) }
        #expect(throws: DBusWireError.self, "body length") { try DBusMessage.decode(changed(4, 1) + [0]) }
        // A method return without a reply serial (its field renumbered to an unknown one).
        #expect(throws: DBusWireError.self, "no reply serial") { try DBusMessage.decode(changed(16, 200)) }
        // A field twice.
        #expect(throws: DBusWireError.self, "field twice") {
            try DBusMessage.decode(Self.reply(signature: "", body: [], fields: [5, 1, UInt8(ascii: "u"), 0, 1, 0, 0, 0]))
        }
        // File descriptors.
        #expect(throws: DBusWireError.self, "fds") {
            try DBusMessage.decode(Self.reply(signature: "", body: [], fields: [9, 1, UInt8(ascii: "u"), 0, 1, 0, 0, 0]))
        }
        // Field 0, which the specification calls invalid.
        #expect(throws: DBusWireError.self, "field 0") {
            try DBusMessage.decode(Self.reply(signature: "", body: [], fields: [0, 1, UInt8(ascii: "y"), 0, 1]))
        }
        // Unknown fields are skipped.
        #expect(throws: Never.self) {
            try DBusMessage.decode(Self.reply(signature: "", body: [], fields: [100, 1, UInt8(ascii: "y"), 0, 1]))
        }
    }

    @Test("every prefix of a message is incomplete or refused, never a trap")
    func truncated() throws {
        let bytes = try Self.everything.encoded()
        for count in 0..<bytes.count {
            let prefix = Array(bytes[0..<count])
            if count < 16 { #expect(try DBusMessage.length(startingWith: prefix[...]) == nil) }
            #expect(throws: DBusWireError.self) { try DBusMessage.decode(prefix) }
        }
    }

    /// Damaged bytes either read, and then write back to bytes that read the same, or are
    /// refused; a trap fails the whole run.
    @Test("damaged messages read consistently or are refused")
    func damaged() throws {
        let original = try Self.everything.encoded()
        var generator = SystemRandomNumberGenerator()
        var readCount = 0
        for _ in 0..<20_000 {
            var bytes = original
            for _ in 0...Int.random(in: 0..<4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            guard let message = try? DBusMessage.decode(bytes) else { continue }
            readCount += 1
            let again = try DBusMessage.decode(try message.encoded())
            #expect(again == message)
        }
        #expect(readCount > 0, "no damaged message read at all, so the property was never checked")
    }

    @Test("the writer refuses values that would make an invalid message")
    func writerRefuses() {
        for value: DBusValue in [.string("a\u{0}b"), .objectPath("relative"), .signature("a"), .array(.string, [.uint32(1)])] {
            #expect(throws: DBusWireError.self, "\(value)") {
                try DBusMessage(kind: .methodReturn, serial: 1, replySerial: 1, body: [value]).encoded()
            }
        }
    }
}
