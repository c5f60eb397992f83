import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A cross-process lock per item: `flock` on a file named after the item's address in a folder
/// every process that can reach the store shares (``defaultDirectory(_:for:)``). It serialises
/// read-check-write sequences that one store call cannot do atomically on every store — PIN
/// attempts, token refreshes, first-use device IDs.
struct ItemLock: Sendable {
    /// Where the lock files live; `nil` for a store no other process can reach
    /// (``SecretStore/isReachableFromOtherProcesses``): then the lock is this process's queue alone
    /// and no file is written.
    let directory: FilePath?
    let timeout: Duration
    /// Without a folder, what tells this store's locks from another store's in this process.
    private let storeIdentity: String

    /// A lock over the items of `access`'s store, with its files in `directory` (none: in-process only).
    init(directory: FilePath?, timeout: Duration, access: StoreAccess) {
        self.directory = directory
        self.timeout = timeout
        // Two MemoryStores in one process are two stores: the same item address in each must not
        // share a lock. A store that is a value (no identity) gets one per ItemLock.
        if let object = access.object {
            storeIdentity = "\(ObjectIdentifier(object).hashValue)"
        } else {
            storeIdentity = UUID().uuidString
        }
    }

    /// The default folder for a kind of lock (`pin-locks`, `token-locks`, …) over `store`, or `nil`
    /// (no lock files at all) for a store only this process reaches, such as ``MemoryStore``. It
    /// never depends on environment variables, so every process that reaches the store meets the
    /// same lock whatever its `XDG_RUNTIME_DIR` or `HOME`:
    /// - the file vault (format 1 or 2): beside the vault, `VAULT.locks/NAME` (the vault's resolved path, like
    ///   its `VAULT.lock`);
    /// - any other store: `/run/user/UID/lockbox/NAME` when that folder is the user's, else
    ///   `.local/state/lockbox/NAME` in the home folder of the user's password entry.
    static func defaultDirectory(_ name: String, for access: StoreAccess) -> FilePath? {
        guard access.isReachableFromOtherProcesses else { return nil }
        if let file = access.blockingStore as? EncryptedFileStore { return FilePath(file.path.string + ".locks").appending(name) }
        if let file = access.blockingStore as? SQLiteVaultStore { return FilePath(file.path.string + ".locks").appending(name) }
        let uid = effectiveUserID()
        let runtime = FilePath("/run/user/\(uid)")
        if let status = try? runtime.stat(), status.type == .directory, UInt32(status.userID.rawValue) == uid {
            return runtime.appending("lockbox/\(name)")
        }
        return FilePath(passwordEntryHome() ?? "/").appending(".local/state/lockbox/\(name)")
    }

    /// The home folder in the user's password entry (not `$HOME`).
    private static func passwordEntryHome() -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(geteuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let home = entry.pw_dir else {
            return nil
        }
        return String(cString: home)
    }

    /// The lock's name: a hash, so item names never appear on disk.
    private func name(for key: ItemKey) -> String {
        Array("\(key.service)\u{0}\(key.account)".utf8).withUnsafeBytes {
            Sodium.blake2b($0, length: 16).hexString
        }
    }

    /// The lock's name, qualified by its folder (so two folders' locks are two queues), and its
    /// file lock if it has one.
    private func prepare(_ key: ItemKey) throws -> (queue: String, file: VaultLock?) {
        let base = name(for: key)
        guard let directory else { return ("memory/\(storeIdentity)/" + base, nil) }
        try Self.createFolder(directory)
        let path = directory.appending(base)
        return (path.string, VaultLock(vaultPath: path, timeout: timeout))
    }

    /// Creates the lock folder (and its parents) if it is not there, again if a parent is removed
    /// while it is being made.
    private static func createFolder(_ directory: FilePath) throws {
        var attempts = 0
        while true {
            do {
                return try directory.createDirectories(permissions: .ownerReadWriteExecute)
            } catch let error as Errno where error == .noSuchFileOrDirectory && attempts < 16 {
                attempts += 1
            } catch {
                throw LockboxError.io(operation: "creating the lock folder", path: directory.string, errno: error.asErrno)
            }
        }
    }

    /// Opens (creating) the lock file at `path`. A lock folder removed meanwhile is made again: the
    /// lock only makes waiting polite — what must not interleave is joined by the store's own
    /// transaction — so a missing folder is never a reason to fail.
    private static func openLockFile(_ path: FilePath) throws -> FileDescriptor {
        var attempts = 0
        while true {
            do {
                return try FileDescriptor.open(path, .readWrite, options: [.create, .closeOnExec], permissions: .ownerReadWrite)
            } catch let error as Errno where error == .noSuchFileOrDirectory && attempts < 16 {
                attempts += 1
                try? createFolder(path.removingLastComponent())
            } catch {
                throw LockboxError.io(operation: "opening the lock file", path: path.string, errno: error.asErrno)
            }
        }
    }

    /// Takes the item's lock without blocking a thread while waiting; release it with
    /// ``HeldLock/release()`` (or let it go out of scope).
    ///
    /// Tasks of this process queue first on an in-process FIFO per item (suspended, holding no
    /// thread; the blocking API's operations are tasks too, run on their caller's thread; cancelling a waiting task takes it out of the queue with
    /// `CancellationError`); the one at its head then polls the `flock` between short sleeps,
    /// which only another process can be holding. The timeout counts from the call.
    func acquire(_ key: ItemKey) async throws -> HeldLock {
        let (queue, file) = try prepare(key)
        let clock = ContinuousClock()
        let start = clock.now
        try await Self.queues.enter(queue)
        guard let file else { return HeldLock(nil) { Self.queues.leave(queue) } }
        do {
            let fd = try Self.openLockFile(file.path)
            while true {
                do {
                    if try fd.tryLockExclusive() { return HeldLock(fd) { Self.queues.leave(queue) } }
                } catch {
                    try? fd.close()
                    throw LockboxError.io(operation: "locking", path: file.path.string, errno: error.asErrno)
                }
                if clock.now - start >= timeout {
                    try? fd.close()
                    throw LockboxError.vaultBusy(path: file.path.string, waitedSeconds: (clock.now - start).seconds)
                }
                do {
                    try await Task.sleep(for: .milliseconds(5))
                } catch {
                    try? fd.close()
                    throw error
                }
            }
        } catch {
            Self.queues.leave(queue)
            throw error
        }
    }

    private static let queues = ItemQueues()
}

/// One FIFO per lock name of the tasks of this process waiting for it: the in-process
/// half of ``ItemLock``. A waiting task is suspended on a continuation.
private final class ItemQueues: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Queue {
        var waiters: [Waiter] = []
    }

    private struct State {
        /// A name is held while it has an entry; its queue holds who waits.
        var held: [String: Queue] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    /// Returns once this task holds `name` in this process (in arrival order).
    func enter(_ name: String) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let enteredNow = state.withLock { state -> Bool in
                    guard var queue = state.held[name] else {
                        state.held[name] = Queue()
                        return true
                    }
                    queue.waiters.append(Waiter(id: id, continuation: continuation))
                    state.held[name] = queue
                    return false
                }
                if enteredNow { continuation.resume() }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard var queue = state.held[name], let index = queue.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                let waiter = queue.waiters.remove(at: index)
                state.held[name] = queue
                return waiter.continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Hands `name` to the next waiter, or frees it.
    func leave(_ name: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var queue = state.held[name] else { return nil }
            guard !queue.waiters.isEmpty else {
                state.held[name] = nil
                return nil
            }
            let waiter = queue.waiters.removeFirst()
            state.held[name] = queue
            return waiter.continuation
        }
        next?.resume()
    }
}

/// A held ``ItemLock``; closing the descriptor releases the `flock`, and the next task of this
/// process waiting for the item gets it.
final class HeldLock: Sendable {
    /// The locked file (none for a process-local lock) while held; `nil` once released.
    private let descriptor: Locked<FileDescriptor??>
    private let onRelease: @Sendable () -> Void

    init(_ fd: FileDescriptor?, onRelease: @escaping @Sendable () -> Void) {
        descriptor = Locked(.some(fd))
        self.onRelease = onRelease
    }

    func release() {
        let wasHeld = descriptor.withLock { fd -> Bool in
            guard case .some(let held) = fd else { return false }
            try? held?.close()
            fd = .none
            return true
        }
        if wasHeld { onRelease() }
    }

    deinit { release() }
}
