import CSodium

#if canImport(Glibc)
    import Glibc
#endif

/// Where ``SecretBytes`` keep their bytes: memory from libsodium's guarded allocator
/// (`sodium_malloc`), which is locked into RAM (`mlock`, so it is never written to swap),
/// excluded from core dumps (`MADV_DONTDUMP`) and surrounded by inaccessible guard pages.
///
/// `sodium_malloc` spends at least three pages of address space and two committed pages on
/// every allocation, and each allocation splits the process's memory map into three more
/// mappings: one call per secret would make a vault of 10,000 items cost ~80 MiB and run into
/// the kernel's mapping limit. So, like OpenSSL's secure heap, small secrets share guarded
/// *slabs*: secrets of up to ``largestChunk`` bytes come from 64 KiB slabs allocated with
/// `sodium_malloc` and cut into chunks of one size class each (16 to 4096 bytes); larger ones get
/// a `sodium_malloc` allocation of their own. The guard pages are around each slab, not each
/// chunk. Chunks are zeroed by their owner before they are returned (``SecretBytes`` does it with
/// `sodium_memzero`) and reused; slabs are kept for the life of the process.
///
/// If the process may not lock more memory (`RLIMIT_MEMLOCK`), libsodium still hands out the
/// memory (it ignores the `mlock` failure): unlocked, but still excluded from dumps and guarded.
enum SecureHeap {
    /// Chunk sizes, smallest first. Every size is a multiple of 16, so chunks are 16-byte aligned.
    static let chunkSizes = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    /// The largest secret a slab chunk holds; larger ones are allocated on their own.
    static var largestChunk: Int { chunkSizes[chunkSizes.count - 1] }
    /// The size of one slab.
    static let slabBytes = 64 * 1024

    private struct State {
        /// Free chunk addresses per size class.
        var free: [[UInt]] = Array(repeating: [], count: SecureHeap.chunkSizes.count)
        /// Start addresses of every slab, for ``contains(_:)``.
        var slabs: [UInt] = []
    }

    private static let state = Locked(State())

    /// A zero-filled block of at least `count` bytes (`count` > 0), 16-byte aligned.
    static func allocate(_ count: Int) -> UnsafeMutableRawPointer {
        precondition(count > 0)
        Sodium.ensureInitialized()
        guard let sizeClass = chunkSizes.firstIndex(where: { $0 >= count }) else {
            // Rounded up to 16 bytes: sodium_malloc places the block right before the trailing
            // guard page, so the block is aligned when its size is.
            let rounded = (count + 15) & ~15
            guard let block = sodium_malloc(rounded) else { fatalError("out of guarded memory (sodium_malloc of \(rounded) bytes)") }
            sodium_memzero(block, rounded)
            return block
        }
        let address = state.withLock { state -> UInt in
            if state.free[sizeClass].isEmpty { addSlab(for: sizeClass, to: &state) }
            return state.free[sizeClass].removeLast()
        }
        guard let pointer = UnsafeMutableRawPointer(bitPattern: address) else { fatalError("SecureHeap: a null chunk") }
        AddressSanitizer.unpoison(pointer, chunkSizes[sizeClass])
        return pointer
    }

    /// Returns a block from ``allocate(_:)`` of the same `count`. The caller has zeroed it.
    static func deallocate(_ pointer: UnsafeMutableRawPointer, count: Int) {
        guard let sizeClass = chunkSizes.firstIndex(where: { $0 >= count }) else {
            sodium_free(pointer)  // also zeroes
            return
        }
        let address = UInt(bitPattern: pointer)
        AddressSanitizer.poison(pointer, chunkSizes[sizeClass])
        state.withLock { $0.free[sizeClass].append(address) }
    }

    /// Cuts a new guarded slab into chunks of `sizeClass`'s size (lock held).
    private static func addSlab(for sizeClass: Int, to state: inout State) {
        guard let slab = sodium_malloc(slabBytes) else { fatalError("out of guarded memory (a \(slabBytes)-byte slab)") }
        sodium_memzero(slab, slabBytes)
        AddressSanitizer.poison(slab, slabBytes)  // free chunks: any access is a use-after-free
        let size = chunkSizes[sizeClass]
        let start = UInt(bitPattern: slab)
        state.slabs.append(start)
        // Handed out from the low end first (removeLast pops the lowest address).
        state.free[sizeClass].append(contentsOf: stride(from: start + UInt(slabBytes - size), through: start, by: -size))
    }

    /// For tests: runs `body` with the chunk for `count` bytes at `address` and its size, under
    /// the heap's lock, if that chunk is free (still poisoned under AddressSanitizer); `nil` if
    /// it is not free (handed out again meanwhile).
    static func withFreeChunk<T>(at address: UInt, count: Int, _ body: (UnsafeMutableRawPointer, Int) -> T) -> T? {
        guard let sizeClass = chunkSizes.firstIndex(where: { $0 >= count }),
            let pointer = UnsafeMutableRawPointer(bitPattern: address)
        else { return nil }
        return state.withLock { state -> T? in
            guard state.free[sizeClass].contains(address) else { return nil }
            return body(pointer, chunkSizes[sizeClass])
        }
    }

    /// Whether `pointer` lies in one of the slabs (for tests and `lockbox doctor`).
    static func contains(_ pointer: UnsafeRawPointer) -> Bool {
        let address = UInt(bitPattern: pointer)
        return state.withLock { state in
            state.slabs.contains { address >= $0 && address < $0 + UInt(slabBytes) }
        }
    }
}

/// AddressSanitizer's manual poisoning, when the process runs under it (scripts/ci/sanitizers.sh,
/// the fuzzers): free slab chunks are poisoned, so a read or write of a released secret's
/// memory is reported like any use-after-free. Looked up at run time, so normal builds carry
/// no dependency on the sanitizer runtime; without it these do nothing.
enum AddressSanitizer {
    private typealias RegionFunction = @convention(c) (UnsafeRawPointer?, Int) -> Void

    private static let poisonFunction: RegionFunction? = lookUp("__asan_poison_memory_region")
    private static let unpoisonFunction: RegionFunction? = lookUp("__asan_unpoison_memory_region")

    private static func lookUp(_ name: String) -> RegionFunction? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name).map { unsafeBitCast($0, to: RegionFunction.self) }
    }

    static func poison(_ pointer: UnsafeRawPointer, _ count: Int) { poisonFunction?(pointer, count) }
    static func unpoison(_ pointer: UnsafeRawPointer, _ count: Int) { unpoisonFunction?(pointer, count) }
}
