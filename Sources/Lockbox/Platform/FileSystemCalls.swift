import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The POSIX calls swift-system does not wrap (yet), written the way it writes its own:
// Swift types in, `Errno` out, EINTR retried in one place, one doc line naming the C call.

/// Runs `body` until it does not fail with EINTR; turns -1 into the current `Errno`.
@inline(__always)
func retryingOnInterrupt(_ body: () -> Int32) throws {
    while true {
        if body() != -1 { return }
        let error = Errno(rawValue: errno)
        if error != .interrupted { throw error }
    }
}

extension FileDescriptor {
    /// Flushes the file's data and metadata to stable storage.
    ///
    /// The corresponding C function is `fsync`.
    func sync() throws {
        try retryingOnInterrupt { fsync(rawValue) }
    }

    /// Whether the file system the file is on is mounted read-only.
    ///
    /// The corresponding C function is `fstatvfs` (the `ST_RDONLY` flag).
    func isOnReadOnlyFileSystem() throws -> Bool {
        var status = statvfs()
        try retryingOnInterrupt { fstatvfs(rawValue, &status) }
        return status.f_flag & UInt(ST_RDONLY) != 0
    }

    /// Tries to take an exclusive advisory lock without waiting; returns `false` if another open
    /// file description holds it.
    ///
    /// The corresponding C function is `flock` with `LOCK_EX | LOCK_NB`.
    func tryLockExclusive() throws -> Bool {
        do {
            try retryingOnInterrupt { flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch let error as Errno where error == .wouldBlock {
            return false
        }
    }

    /// Releases an advisory lock.
    ///
    /// The corresponding C function is `flock` with `LOCK_UN`.
    func unlock() throws {
        try retryingOnInterrupt { flock(rawValue, LOCK_UN) }
    }

    /// Reads until end of file, refusing files longer than `limit` bytes.
    ///
    /// `expectedSize` (from `fstat`) sizes the buffer up front, so a file that does not change
    /// while it is read is read straight into place; one that grows is still read to its end.
    package func readToEnd(limit: Int, expectedSize: Int = 0) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: max(0, min(expectedSize, limit)) + 1)
        var filled = 0
        while true {
            if filled == result.count {
                if result.count > limit { throw Errno.fileTooLarge }
                result.append(contentsOf: repeatElement(0, count: min(max(result.count, 64 * 1024), limit + 1 - result.count)))
            }
            let count = try result.withUnsafeMutableBytes { buffer in
                try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            }
            if count == 0 { break }
            filled += count
        }
        if filled > limit { throw Errno.fileTooLarge }
        result.removeLast(result.count - filled)
        return result
    }
}

extension FilePath {
    /// Atomically replaces `target` with the file at `self`.
    ///
    /// The corresponding C function is `rename`.
    func rename(to target: FilePath) throws {
        try withPlatformString { from in
            try target.withPlatformString { to in
                try retryingOnInterrupt { Glibc.rename(from, to) }
            }
        }
    }

    /// Removes the file at `self`; a missing file is not an error.
    ///
    /// The corresponding C function is `unlink`.
    func unlinkIfPresent() throws {
        do {
            try withPlatformString { path in
                try retryingOnInterrupt { unlink(path) }
            }
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            return
        }
    }

    /// Creates the directory, and any missing parents, with `permissions`; existing ones are
    /// left as they are.
    ///
    /// The corresponding C function is `mkdir`.
    func createDirectories(permissions: FilePermissions) throws {
        if isEmpty || (try? stat())?.type == .directory { return }
        let parent = removingLastComponent()
        if !parent.isEmpty && parent != self { try parent.createDirectories(permissions: permissions) }
        do {
            try withPlatformString { path in
                try retryingOnInterrupt { mkdir(path, permissions.rawValue) }
            }
        } catch let error as Errno where error == .fileExists {
            return
        }
    }

    /// The absolute path with every symbolic link resolved, or `nil` if it does not exist.
    ///
    /// The corresponding C function is `realpath`.
    func resolvingSymlinks() -> FilePath? {
        withPlatformString { path in
            guard let resolved = realpath(path, nil) else { return nil }
            defer { free(resolved) }
            return FilePath(platformString: resolved)
        }
    }

    /// Whether a file (of any type) exists at the path, without following a final symlink.
    func exists() -> Bool {
        (try? stat(followTargetSymlink: false)) != nil
    }
}

/// The effective user ID of this process.
///
/// The corresponding C function is `geteuid`.
func effectiveUserID() -> UInt32 { geteuid() }

extension Error {
    /// The `Errno` behind an error from a system call, or `EIO` for anything else.
    package var asErrno: Errno { self as? Errno ?? .ioError }
}
