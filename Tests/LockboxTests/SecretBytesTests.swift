import Foundation
import Testing
@testable import Lockbox

@Suite("SecretBytes")
struct SecretBytesTests {
    @Test("never prints its contents")
    func redacted() {
        let value = secret("hunter2-very-secret")
        #expect(value.description == "<redacted>")
        #expect(value.debugDescription == "SecretBytes(<redacted>)")
        #expect(!"\(value)".contains("hunter2"))
        #expect(!String(reflecting: value).contains("hunter2"))
        var dumped = ""
        dump(value, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!dumped.contains("104"))  // 'h' as a byte value
    }

    @Test("round-trips bytes and UTF-8")
    func roundTrip() {
        let bytes: [UInt8] = [0, 1, 2, 255, 0]
        let value = SecretBytes(copying: bytes)
        #expect(value.count == 5)
        #expect(value.withUnsafeBytes { Array($0) } == bytes)
        #expect(value.stringValue() == nil)  // 0xFF is not UTF-8
        #expect(SecretBytes(copying: [0x61, 0x00, 0x62]).stringValue() == "a\u{0}b")
        #expect(SecretBytes(copying: [0xff, 0xfe]).stringValue() == nil)
        #expect(secret("päss").stringValue() == "päss")
        #expect(SecretBytes(copying: []).count == 0)
    }

    @Test("compares by content")
    func equality() {
        #expect(secret("abc") == secret("abc"))
        #expect(secret("abc") != secret("abd"))
        #expect(secret("abc") != secret("abcd"))
        #expect(SecretBytes(copying: []) == SecretBytes(copying: []))
    }

    @Test("random values differ and have the requested size")
    func random() {
        let a = SecretBytes.random(count: 32), b = SecretBytes.random(count: 32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test("a throwing initialiser leaves nothing behind")
    func throwingInit() {
        struct Stop: Error {}
        #expect(throws: Stop.self) { try SecretBytes(count: 8) { _ in throw Stop() } }
    }
}
