import Foundation
import SystemPackage

/// A cross-process lock per item: `flock` on a file named after the item's address in a folder
/// every process of the user shares (`$XDG_RUNTIME_DIR/lockbox/NAME`, else
/// `~/.local/state/lockbox/NAME`). It serialises read-check-write sequences that one store call
/// cannot do atomically on every store — PIN attempts, token refreshes, first-use device IDs.
struct ItemLock: Sendable {
    let directory: FilePath
    let timeout: Duration

    init(directory: FilePath, timeout: Duration) {
        self.directory = directory
        self.timeout = timeout
    }

    /// The default folder for a kind of lock (`pin-locks`, `token-locks`, …).
    static func defaultDirectory(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> FilePath {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return FilePath(runtime).appending("lockbox/\(name)")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return FilePath(home).appending(".local/state/lockbox/\(name)")
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
    func acquire(_ key: ItemKey) async throws -> HeldLock {
        let (lock, _) = try prepare(key)
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(lock.path, .readWrite, options: [.create, .closeOnExec], permissions: .ownerReadWrite)
        } catch {
            throw LockboxError.io(operation: "opening the lock file", path: lock.path.string, errno: error.asErrno)
        }
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            do {
                if try fd.tryLockExclusive() { return HeldLock(fd) }
            } catch {
                try? fd.close()
                throw LockboxError.io(operation: "locking", path: lock.path.string, errno: error.asErrno)
            }
            if clock.now - start >= timeout {
                try? fd.close()
                throw LockboxError.vaultBusy(path: lock.path.string, waitedSeconds: (clock.now - start).seconds)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    private static let threadLocks = Locked<[String: NSLock]>([:])
}

/// A held ``ItemLock``; closing the descriptor releases the `flock`.
final class HeldLock: Sendable {
    private let descriptor: Locked<FileDescriptor?>

    init(_ fd: FileDescriptor) { descriptor = Locked(fd) }

    func release() {
        descriptor.withLock { fd in
            try? fd?.close()
            fd = nil
        }
    }

    deinit { release() }
}
