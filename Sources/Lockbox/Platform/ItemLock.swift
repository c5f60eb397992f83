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
