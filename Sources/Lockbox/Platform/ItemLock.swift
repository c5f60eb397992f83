import Foundation
import SystemPackage

/// A cross-process lock per item: `flock` on a file named after the item's address in a folder
/// every process that can reach the store shares (``defaultDirectory(_:for:)``). It serialises
/// read-check-write sequences that one store call cannot do atomically on every store — PIN
/// attempts, token refreshes, first-use device IDs.
struct ItemLock: Sendable {
    let directory: FilePath
    let timeout: Duration

    init(directory: FilePath, timeout: Duration) {
        self.directory = directory
        self.timeout = timeout
    }

    /// The default folder for a kind of lock (`pin-locks`, `token-locks`, …) over `store`. It never
    /// depends on environment variables, so every process that reaches the store meets the same
    /// lock whatever its `XDG_RUNTIME_DIR` or `HOME`:
    /// - the file vault: beside the vault, `VAULT.locks/NAME` (the vault's resolved path, like
    ///   its `VAULT.lock`);
    /// - any other store: `/run/user/UID/lockbox/NAME` when that folder is the user's, else
    ///   `.local/state/lockbox/NAME` in the home folder of the user's password entry.
    static func defaultDirectory(_ name: String, for store: any SecretStore) -> FilePath {
        if let file = store as? EncryptedFileStore { return FilePath(file.path.string + ".locks").appending(name) }
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

    /// The lock file's base name: a hash, so item names never appear on disk.
    private func name(for key: ItemKey) -> String {
        Array("\(key.service)\u{0}\(key.account)".utf8).withUnsafeBytes {
            Sodium.blake2b($0, length: 16).hexString
        }
    }

    private func prepare(_ key: ItemKey) throws -> (VaultLock, String) {
        do {
            try directory.createDirectories(permissions: .ownerReadWriteExecute)
        } catch {
            throw LockboxError.io(operation: "creating the lock folder", path: directory.string, errno: error.asErrno)
        }
        let base = name(for: key)
        return (VaultLock(vaultPath: directory.appending(base), timeout: timeout), base)
    }

    /// Runs `body` holding the item's lock (threads of this process queue on an in-process lock
    /// first, so they do not poll the file lock against each other).
    func withLock<T>(_ key: ItemKey, _ body: () throws -> T) throws -> T {
        let (lock, base) = try prepare(key)
        let threadLock = Self.threadLocks.withLock { locks in
            if let existing = locks[base] { return existing }
            let created = NSLock()
            locks[base] = created
            return created
        }
        threadLock.lock()
        defer { threadLock.unlock() }
        return try lock.withLock { try body() }
    }

    /// Takes the item's lock without blocking a thread while waiting; release it with
    /// ``HeldLock/release()`` (or let it go out of scope).
    ///
    /// Tasks of this process queue first on an in-process FIFO per item (suspended, holding no
    /// thread; cancelling a waiting task takes it out of the queue with `CancellationError`); the
    /// task at its head then polls the `flock` between short sleeps, which only another process
    /// can be holding. The timeout counts from the call.
    func acquire(_ key: ItemKey) async throws -> HeldLock {
        let (lock, base) = try prepare(key)
        let clock = ContinuousClock()
        let start = clock.now
        try await Self.taskQueues.enter(base)
        do {
            let fd: FileDescriptor
            do {
                fd = try FileDescriptor.open(lock.path, .readWrite, options: [.create, .closeOnExec], permissions: .ownerReadWrite)
            } catch {
                throw LockboxError.io(operation: "opening the lock file", path: lock.path.string, errno: error.asErrno)
            }
            while true {
                do {
                    if try fd.tryLockExclusive() { return HeldLock(fd) { Self.taskQueues.leave(base) } }
                } catch {
                    try? fd.close()
                    throw LockboxError.io(operation: "locking", path: lock.path.string, errno: error.asErrno)
                }
                if clock.now - start >= timeout {
                    try? fd.close()
                    throw LockboxError.vaultBusy(path: lock.path.string, waitedSeconds: (clock.now - start).seconds)
                }
                do {
                    try await Task.sleep(for: .milliseconds(5))
                } catch {
                    try? fd.close()
                    throw error
                }
            }
        } catch {
            Self.taskQueues.leave(base)
            throw error
        }
    }

    private static let threadLocks = Locked<[String: NSLock]>([:])
    private static let taskQueues = TaskQueues()
}

/// One FIFO of waiting tasks per lock name: the in-process half of ``ItemLock/acquire(_:)``.
private final class TaskQueues: Sendable {
    private struct Queue {
        var held = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    }

    private let queues = Locked<(byName: [String: Queue], nextID: UInt64)>(([:], 0))

    /// Returns once this task holds `name` in this process (in arrival order).
    func enter(_ name: String) async throws {
        try Task.checkCancellation()
        let id = queues.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let enteredNow = queues.withLock { state -> Bool in
                    var queue = state.byName[name, default: Queue()]
                    defer { state.byName[name] = queue }
                    if !queue.held {
                        queue.held = true
                        return true
                    }
                    queue.waiters.append((id, continuation))
                    return false
                }
                if enteredNow { continuation.resume() }
            }
        } onCancel: {
            let cancelled = queues.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard var queue = state.byName[name], let index = queue.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                let waiter = queue.waiters.remove(at: index)
                state.byName[name] = queue
                return waiter.continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Hands `name` to the next waiting task, or frees it.
    func leave(_ name: String) {
        let next = queues.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var queue = state.byName[name] else { return nil }
            if queue.waiters.isEmpty {
                state.byName[name] = nil
                return nil
            }
            let waiter = queue.waiters.removeFirst()
            state.byName[name] = queue
            return waiter.continuation
        }
        next?.resume()
    }
}

/// A held ``ItemLock``; closing the descriptor releases the `flock`, and the next task of this
/// process waiting for the item gets it.
final class HeldLock: Sendable {
    private let descriptor: Locked<FileDescriptor?>
    private let onRelease: @Sendable () -> Void

    init(_ fd: FileDescriptor, onRelease: @escaping @Sendable () -> Void) {
        descriptor = Locked(fd)
        self.onRelease = onRelease
    }

    func release() {
        let wasHeld = descriptor.withLock { fd -> Bool in
            guard let held = fd else { return false }
            try? held.close()
            fd = nil
            return true
        }
        if wasHeld { onRelease() }
    }

    deinit { release() }
}
