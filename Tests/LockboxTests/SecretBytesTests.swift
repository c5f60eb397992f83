import Foundation
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

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
        // The in-place UTF-8 check (the Secret Service store's, which makes no String) agrees.
        for sample in [bytes, [0x61, 0x00, 0x62], [0xff, 0xfe], Array("päss".utf8), [], [0xe2, 0x82], [0xed, 0xa0, 0x80]] {
            let value = SecretBytes(copying: sample)
            #expect(value.isValidUTF8 == (value.stringValue() != nil), "\(sample)")
        }
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
        let a = SecretBytes.random(count: 32)
        let b = SecretBytes.random(count: 32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test("a throwing initialiser leaves nothing behind: its chunk is free again and zeroed")
    func throwingInit() throws {
        struct Stop: Error {}
        // Other tests allocate concurrently and may take the freed chunk at once (last in, first
        // out); a few tries find it still free, and at least one must be checked.
        var checked = 0
        for _ in 0..<50 where checked < 5 {
            var address: UInt = 0
            #expect(throws: Stop.self) {
                try SecretBytes(count: 40) { buffer in
                    for index in buffer.indices { buffer[index] = 0xEE }
                    address = UInt(bitPattern: buffer.baseAddress)
                    throw Stop()
                }
            }
            let zeroed = freeChunkIsZeroed(at: address, count: 40)
            guard let zeroed else { continue }
            #expect(zeroed, "the partly written buffer was not zeroed")
            checked += 1
        }
        #expect(checked > 0, "the chunk of a throwing initialiser was never free again: it was not released")
    }

    /// This process's mappings; the suite cannot run without /proc.
    static func mappings() throws -> [ProcessHardening.Mapping] {
        let all = ProcessHardening.mappings()
        try #require(!all.isEmpty, "/proc/self/smaps listed no mappings")
        return all
    }

    @Test(
        "secrets live in guarded memory: locked, excluded from core dumps, followed by a guard page",
        arguments: [1, 32, 100, 4096, 5000, 70_000])
    func guardedMemory(size: Int) throws {
        let value = SecretBytes(count: size) { buffer in
            #expect(buffer.allSatisfy { $0 == 0 }, "a new buffer starts zeroed")
            for index in buffer.indices { buffer[index] = 0xA5 }
        }
        let address = try #require(value.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } })
        #expect(address % 16 == 0, "16-byte aligned")
        #expect(SecureHeap.contains(UnsafeRawPointer(bitPattern: address)!) == (size <= SecureHeap.largestChunk))
        let maps = try Self.mappings()
        let index = try #require(maps.firstIndex { $0.start <= address && address < $0.end }, "the secret's mapping is listed")
        let mapping = maps[index]
        #expect(mapping.permissions.hasPrefix("rw"))
        #expect(mapping.flags.contains("dd"), "MADV_DONTDUMP: not in core dumps (VmFlags \(mapping.flags.sorted()))")
        // mlock needs CAP_IPC_LOCK or room under RLIMIT_MEMLOCK; the suite runs as root in CI,
        // where not being root fails this test. ThreadSanitizer and AddressSanitizer intercept
        // mlock and do nothing (they cannot lock their shadow memory), so under
        // scripts/ci/sanitizers.sh there is no `lo` to see: the unsanitized run of the same
        // command (scripts/test.sh runs both) checks it.
        if runningUnderSanitizer {
            notTested("the mlock check (`lo` in VmFlags)", because: "sanitizers intercept mlock", requiredInCI: false)
        } else if prerequisiteMet(geteuid() == 0, "the mlock check (`lo` in VmFlags) needs root (CAP_IPC_LOCK)") {
            #expect(mapping.flags.contains("lo"), "mlock: never swapped (VmFlags \(mapping.flags.sorted()))")
        }
        // The secret's mapping ends where an inaccessible guard page starts.
        let next = maps.first { $0.start == mapping.end }
        #expect(next?.permissions.hasPrefix("---") == true, "a guard page follows (next: \(String(describing: next?.permissions)))")
    }

    @Test("a released secret's memory is wiped at once: a free chunk is always all zeros")
    func releasedMemoryIsWiped() throws {
        // Other tests allocate concurrently and may take the chunk back at once (the free list
        // is last-in, first-out); the heap's own check runs under its lock, so a chunk still
        // free is seen as it is. A few tries find one still free.
        var checked = 0
        for _ in 0..<50 where checked < 5 {
            var address: UInt = 0
            do {
                let value = SecretBytes(count: 48) { buffer in for index in buffer.indices { buffer[index] = 0xEE } }
                address = value.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
            }
            let zeroed = freeChunkIsZeroed(at: address, count: 48)
            guard let zeroed else { continue }
            #expect(zeroed, "a released chunk still holds data")
            checked += 1
        }
        #expect(checked > 0, "no released chunk was still free to check")
    }

    /// AddressSanitizer's own answer to "is this address poisoned?", when it is loaded.
    static let addressIsPoisoned: (@convention(c) (UnsafeRawPointer?) -> Int32)? =
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_address_is_poisoned")
        .map { unsafeBitCast($0, to: (@convention(c) (UnsafeRawPointer?) -> Int32).self) }

    @Test(
        "under AddressSanitizer, released secrets' memory is poisoned and live secrets' is not",
        .enabled(if: addressIsPoisoned != nil))
    func releasedMemoryIsPoisoned() throws {
        let isPoisoned = try #require(Self.addressIsPoisoned)
        // Checked under the heap's lock; another test may take the chunk back at once, so a few
        // tries find one still free, and at least one must be checked.
        var checked = 0
        for _ in 0..<50 where checked < 5 {
            var address: UInt = 0
            do {
                let value = SecretBytes(count: 48) { buffer in for index in buffer.indices { buffer[index] = 0xEE } }
                address = value.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
                #expect(isPoisoned(UnsafeRawPointer(bitPattern: address)) == 0)
            }
            guard let poisoned = SecureHeap.withFreeChunk(at: address, count: 48, { chunk, _ in isPoisoned(chunk) }) else { continue }
            #expect(poisoned == 1)
            checked += 1
        }
        #expect(checked > 0, "no released chunk was still free to check")
    }

    @Test("many small secrets share slabs: 20,000 of them add few mappings")
    func smallSecretsShareSlabs() throws {
        let before = try Self.mappings().count
        let values = (0..<20_000).map { SecretBytes(utf8: "token-\($0)") }
        let after = try Self.mappings().count
        #expect(values.count == 20_000)
        // One sodium_malloc per secret would add ~3 mappings each (60,000); slabs of 64 KiB hold
        // 4,096 such secrets, so a handful of slabs suffice.
        #expect(after - before < 100, "\(after - before) new mappings")
    }
}

/// Whether the released chunk of `count` bytes at `address` holds only zeros, read under the heap
/// lock (unpoisoned for the read under AddressSanitizer); `nil` if the chunk is no longer free.
private func freeChunkIsZeroed(at address: UInt, count: Int) -> Bool? {
    SecureHeap.withFreeChunk(at: address, count: count) { chunk, size in
        AddressSanitizer.unpoison(chunk, size)
        defer { AddressSanitizer.poison(chunk, size) }
        return UnsafeRawBufferPointer(start: chunk, count: size).allSatisfy { $0 == 0 }
    }
}
