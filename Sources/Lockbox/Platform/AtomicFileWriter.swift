import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Which version of a file a path points at: if any of these change, the file was replaced.
///
/// Lockbox replaces vault files by rename, so every write gives a new inode; size and mtime
/// (nanoseconds) guard against the inode number being reused.
struct FileIdentity: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int
    var modifiedNanoseconds: Int

    init(_ status: Stat) {
        device = UInt64(status.deviceID.rawValue)
        inode = UInt64(status.inode.rawValue)
        size = status.size
        modifiedSeconds = Int(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int(status.st_mtim.tv_nsec)
    }
}

/// Replaces a file's contents atomically and durably: write a temporary file in the same folder,
/// fsync it, rename it over the target, fsync the folder. A crash at any point leaves either the
/// old file or the new one at the path, never a mix.
enum AtomicFileWriter {
    /// Writes `chunks` to `path` (mode 0600) and returns the new file's identity.
    ///
    /// Call it only while holding the path's ``VaultLock``: temporary files left by a writer
    /// that was killed are then known to be dead, and are removed first.
    static func write(_ chunks: [[UInt8]], to path: FilePath) throws -> FileIdentity {
        let folder = path.removingLastComponent()
        let name = path.lastComponent?.string ?? "vault"
        removeStaleTemporaries(in: folder, prefix: ".\(name).tmp-")
        let suffix = Sodium.randomBytes(temporarySuffixBytes).hexString
        let temporary = folder.appending(".\(name).tmp-\(suffix)")
        var renamed = false
        defer { if !renamed { try? temporary.unlinkIfPresent() } }
        do {
            let fd = try FileDescriptor.open(
                temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: .ownerReadWrite)
            let identity = try fd.closeAfter { () throws -> FileIdentity in
                for chunk in chunks {
                    _ = try fd.writeAll(chunk)
                }
                try fd.sync()
                return FileIdentity(try fd.stat())
            }
            try temporary.rename(to: path)
            renamed = true
            try syncDirectory(folder)
            return identity
        } catch {
            throw LockboxError.io(operation: "writing the vault", path: path.string, errno: error.asErrno)
        }
    }

    private static let temporarySuffixBytes = 6

    /// Removes temporary files a killed writer left behind (best effort).
    private static func removeStaleTemporaries(in folder: FilePath, prefix: String) {
        let directory = folder.isEmpty ? "." : folder.string
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        // Exactly our pattern: `.NAME.tmp-` and 12 hex digits, so another vault's temporaries
        // (say of a vault called `NAME.tmp-x`) are never touched.
        for name in names where name.hasPrefix(prefix) {
            let suffix = name.dropFirst(prefix.count)
            guard suffix.count == 2 * temporarySuffixBytes, suffix.allSatisfy(\.isHexDigit) else { continue }
            try? folder.appending(name).unlinkIfPresent()
        }
    }

    /// fsyncs a folder so a rename inside it survives a power cut.
    static func syncDirectory(_ folder: FilePath) throws {
        let fd = try FileDescriptor.open(
            folder.isEmpty ? "." : folder, .readOnly,
            options: [.directory, .closeOnExec])
        try fd.closeAfter { () throws in try fd.sync() }
    }
}

/// An exclusive, cross-process lock on a vault: `flock` on a sibling `NAME.lock` file.
///
/// The lock file is separate because the vault itself is replaced on every write, and a lock
/// on a replaced inode protects nothing. It is never deleted, so two processes always lock the
/// same inode. Waiting is bounded: after `timeout` the caller gets ``LockboxError/vaultBusy(path:waitedSeconds:)``.
struct VaultLock {
    let path: FilePath
    let vaultPath: FilePath
    let timeout: Duration

    init(vaultPath: FilePath, timeout: Duration) {
        self.vaultPath = vaultPath
        self.path = FilePath(vaultPath.string + ".lock")
        self.timeout = timeout
    }

    /// Runs `body` while holding the lock.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(
                path, .readWrite, options: [.create, .closeOnExec],
                permissions: .ownerReadWrite)
        } catch {
            throw LockboxError.io(operation: "opening the lock file", path: path.string, errno: error.asErrno)
        }
        defer { try? fd.close() }  // closing releases the flock too
        let clock = ContinuousClock()
        let start = clock.now
        var pause = Duration.microseconds(200)
        while true {
            do {
                if try fd.tryLockExclusive() { break }
            } catch {
                throw LockboxError.io(operation: "locking", path: path.string, errno: error.asErrno)
            }
            let waited = clock.now - start
            if waited >= timeout {
                let seconds = Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
                throw LockboxError.vaultBusy(path: vaultPath.string, waitedSeconds: seconds)
            }
            sleepBriefly(pause)
            pause = min(pause * 2, .milliseconds(20))
        }
        return try body()
    }

    private func sleepBriefly(_ duration: Duration) {
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }
}
