import CSodium

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
        return pointer
    }

    /// Returns a block from ``allocate(_:)`` of the same `count`. The caller has zeroed it.
    static func deallocate(_ pointer: UnsafeMutableRawPointer, count: Int) {
        guard let sizeClass = chunkSizes.firstIndex(where: { $0 >= count }) else {
            sodium_free(pointer)  // also zeroes
            return
        }
        let address = UInt(bitPattern: pointer)
        state.withLock { $0.free[sizeClass].append(address) }
    }

    /// Cuts a new guarded slab into chunks of `sizeClass`'s size (lock held).
    private static func addSlab(for sizeClass: Int, to state: inout State) {
        guard let slab = sodium_malloc(slabBytes) else { fatalError("out of guarded memory (a \(slabBytes)-byte slab)") }
        sodium_memzero(slab, slabBytes)
        let size = chunkSizes[sizeClass]
        let start = UInt(bitPattern: slab)
        state.slabs.append(start)
        // Handed out from the low end first (removeLast pops the lowest address).
        state.free[sizeClass].append(contentsOf: stride(from: start + UInt(slabBytes - size), through: start, by: -size))
    }

    /// Whether `pointer` lies in one of the slabs (for tests and `lockbox doctor`).
    static func contains(_ pointer: UnsafeRawPointer) -> Bool {
        let address = UInt(bitPattern: pointer)
        return state.withLock { state in
            state.slabs.contains { address >= $0 && address < $0 + UInt(slabBytes) }
        }
    }
}
