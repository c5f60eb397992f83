import CLinux
import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The vault file on disk: where it really is, reading it once (refusing what is not a regular
/// file, or not ours with mode 0600), parsing its header, and replacing it atomically.
package enum VaultFile {
    /// The largest vault file Lockbox reads (1 GiB).
    package static let maximumBytes = 1 << 30

    /// The vault's real location: symbolic links in the path are resolved once, so writes replace
    /// the target file (not the link) and every path to one vault shares one lock file.
    package static func resolvedPath(_ path: FilePath) -> FilePath {
        if let resolved = path.resolvingSymlinks() { return resolved }
        guard let name = path.lastComponent else { return path }
        let folder = path.removingLastComponent()
        return (folder.isEmpty ? FilePath(".") : folder).resolvingSymlinks()?.appending(name) ?? path
    }

    /// What creating a vault of either format starts with: at least one credential, the folder
    /// made (mode 0700), nothing at `path` (``EncryptedFileStore/checkCanCreate(at:)``); returns
    /// the resolved path the vault goes to.
    static func prepareNewVault(at path: FilePath, credentials: [VaultCredential]) throws -> FilePath {
        guard !credentials.isEmpty else {
            throw LockboxError.invalidArgument("a new vault needs at least one credential: a passphrase or a key file")
        }
        do {
            try path.removingLastComponent().createDirectories(permissions: .ownerReadWriteExecute)
        } catch {
            throw LockboxError.io(operation: "creating the vault's folder", path: path.removingLastComponent().string, errno: error.asErrno)
        }
        try FileVault.checkCanCreate(at: path)
        return resolvedPath(path)
    }

    /// The vault file at `path` (symbolic links resolved), read once and its header parsed.
    package static func snapshot(at path: FilePath) throws -> VaultFileSnapshot {
        try snapshot(resolved: resolvedPath(path))
    }

    /// What the file at `path` is, decided from one open of it: a format-1 vault, read once and
    /// its header parsed, or a format-2 vault (SQLite; only its first 72 bytes were read), which
    /// the caller opens as ``SQLiteVaultStore`` through the same descriptor.
    package enum Probe {
        case format1(VaultFileSnapshot)
        case format2(OpenedDatabaseFile)
    }

    /// ``Probe`` of the vault file at `path` (symbolic links resolved).
    package static func probe(at path: FilePath) throws -> Probe {
        try load(resolvedPath(path), expecting: .either)
    }

    /// The file at `path`, already resolved (a handle's own path), read once and its header parsed.
    static func snapshot(resolved path: FilePath) throws -> VaultFileSnapshot {
        // A format-2 vault is refused inside `load`, before it is read.
        guard case .format1(let snapshot) = try load(path, expecting: .format1) else {
            throw LockboxError.unsupportedFormatVersion(
                path: path.string, found: Int(VaultRecords.formatVersion), supported: Int(VaultHeader.currentVersion))
        }
        return snapshot
    }

    /// The SQLite database at `path` (already resolved), opened and checked like a format-1 vault
    /// (a regular file, ours, mode 0600 or tighter) for ``SQLiteConnection`` to use; a file that is
    /// not a SQLite database is refused as corrupt without being read further.
    static func openDatabase(resolved path: FilePath) throws -> OpenedDatabaseFile {
        guard case .format2(let file) = try load(path, expecting: .database) else {
            throw LockboxError.corruptVault(path: path.string, reason: "not a format-2 Lockbox vault (not a SQLite database)")
        }
        return file
    }

    /// What a caller of ``load(_:expecting:)`` takes.
    private enum Expectation {
        /// A format-1 vault; a format-2 vault is refused without reading it.
        case format1
        /// Either format, told apart by the first bytes.
        case either
        /// Any SQLite database (``SQLiteVaultStore`` checks its identity); nothing else is read.
        case database
    }

    /// Opens the file at `path` (already resolved) once, refusing what is not a regular file
    /// before reading it, and either reads it whole as a format-1 vault or keeps the descriptor
    /// of a format-2 vault for SQLite. Opened read-write when SQLite may take the descriptor
    /// (read-only if writing is not allowed, as SQLite itself falls back).
    private static func load(_ path: FilePath, expecting: Expectation) throws -> Probe {
        do {
            let forDatabase = expecting != .format1
            var readWrite = forDatabase
            if forDatabase {
                // Only a regular file is opened for writing (opening some devices has effects);
                // the descriptor's own fstat below decides, in case the path changes meanwhile.
                let status = try path.stat()
                guard status.type == .regular else { throw notRegular(path, status) }
            }
            let options: FileDescriptor.OpenOptions = [.closeOnExec, .nonBlocking]
            let fd: FileDescriptor
            if forDatabase, let parked = DatabaseFileDescriptors.takeParked(path: path, writable: true) {
                // A descriptor of this file kept while a connection of this process uses it.
                fd = parked.descriptor
            } else if readWrite {
                do {
                    fd = try FileDescriptor.open(path, .readWrite, options: options)
                } catch let error as Errno where error == .permissionDenied || error == .readOnlyFileSystem || error == .notPermitted {
                    readWrite = false
                    if let parked = DatabaseFileDescriptors.takeParked(path: path, writable: false) {
                        (fd, readWrite) = parked
                    } else {
                        fd = try FileDescriptor.open(path, .readOnly, options: options)
                    }
                }
            } else {
                // Without blocking: a FIFO at the vault's path must be refused, not waited on.
                fd = try FileDescriptor.open(path, .readOnly, options: options)
            }
            var handedOver = false
            // Closed through DatabaseFileDescriptors: a connection of this process may have the
            // file open, and closing any descriptor of it would drop that connection's locks.
            defer { if !handedOver { DatabaseFileDescriptors.close(fd, readWrite: readWrite) } }
            let status: Stat
            do { status = try fd.stat() } catch {
                throw LockboxError.io(operation: "checking the vault", path: path.string, errno: error.asErrno)
            }
            guard status.type == .regular else { throw notRegular(path, status) }
            do {
                // A format-2 vault (SQLite) is not read whole: its first bytes say what it is
                // (read with pread, so the whole-file read below still starts at 0).
                var start = [UInt8](repeating: 0, count: VaultFileFormat.headerBytes)
                let peeked = try start.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
                let format = VaultFileFormat.detect(header: start.prefix(peeked))
                if format == .format2 || (expecting == .database && format.isDatabase) {
                    guard expecting != .format1 else {
                        throw LockboxError.unsupportedFormatVersion(
                            path: path.string, found: Int(VaultRecords.formatVersion), supported: Int(VaultHeader.currentVersion))
                    }
                    try checkOwnership(status, path: path)
                    try checkSingleName(fd, status, path: path)
                    handedOver = true
                    return .format2(OpenedDatabaseFile(path: path, descriptor: fd, readWrite: readWrite))
                }
                guard expecting != .database else {
                    throw LockboxError.corruptVault(path: path.string, reason: "not a format-2 Lockbox vault (not a SQLite database)")
                }
                let bytes = try fd.readToEnd(limit: maximumBytes, expectedSize: Int(status.size))
                // Permission advice only for a file that is a vault; anything else (a link to
                // /etc/passwd, say) is reported as not a vault when its header is parsed.
                if VaultFileFormat.detect(header: bytes.prefix(VaultFileFormat.headerBytes)) == .format1 {
                    try checkOwnership(status, path: path)
                }
                let (vaultHeader, headerLength) = try parseHeader(bytes, path: path)
                return .format1(
                    VaultFileSnapshot(
                        path: path, bytes: bytes, identity: FileIdentity(status), header: vaultHeader, headerLength: headerLength))
            } catch let error as LockboxError {
                throw error
            } catch {
                if error.asErrno == .fileTooLarge {
                    throw LockboxError.corruptVault(path: path.string, reason: "larger than the 1 GiB a vault can be")
                }
                throw LockboxError.io(operation: "reading the vault", path: path.string, errno: error.asErrno)
            }
        } catch let error as LockboxError {
            throw error
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            throw LockboxError.vaultNotFound(path: path.string)
        } catch {
            throw LockboxError.io(operation: "opening the vault", path: path.string, errno: error.asErrno)
        }
    }

    /// Refuses a format-2 vault that has a second name. SQLite keeps a database's write-ahead log
    /// and its index beside the name it is opened by (`NAME-wal`, `NAME-shm`), and two names of
    /// one file have two of each: writes made through one name are then lost, or damage the
    /// database, when it is opened through the other. Two cases give a file a second name that
    /// shares no folder with the first: a hard link, and the file bind-mounted on its own (`docker
    /// run -v FILE:FILE`, systemd's `BindPaths=`). A folder bind-mounted keeps one folder, so one
    /// log: that is how a vault is shared with a container.
    ///
    /// A vault being created is linked into place and its temporary name removed just after
    /// (``SQLiteVaultStore``'s `place`): a second name seen for a moment is waited out.
    static func checkSingleName(_ fd: FileDescriptor, _ status: Stat, path: FilePath) throws {
        var links = status.linkCount
        var waits = 0
        while links > 1, waits < 10 {
            usleep(10_000)
            waits += 1
            links = (try? fd.stat().linkCount) ?? links
        }
        guard links <= 1 else {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail:
                    "the vault file has \(links) names (hard links). SQLite keeps the vault's write-ahead log beside the name it is opened by, so writes through one name would be lost or damage the vault through another. Keep one name (remove the other links), and make copies with `cp` or `lockbox export`, never `cp -l` or `cp -al`."
            )
        }
        let folder = path.removingLastComponent()
        let ownMount = lockbox_mount_id_of_descriptor(fd.rawValue)
        let folderMount = lockbox_mount_id_of_path(folder.isEmpty ? "." : folder.string)
        guard ownMount == 0 || folderMount == 0 || ownMount == folderMount else {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail:
                    "the vault file is mounted on its own (a single file bind-mounted, as `docker run -v FILE:FILE` or systemd's BindPaths= do). SQLite keeps the vault's write-ahead log beside it, where the other name cannot see it, so writes could be lost or damage the vault. Mount the vault's folder instead."
            )
        }
    }

    private static func notRegular(_ path: FilePath, _ status: Stat) -> LockboxError {
        LockboxError.invalidArgument("\(path.string) is \(describe(status.type)), not a regular file, so it cannot be a vault")
    }

    /// The identity of the file at `path` now (one `stat`), to tell whether it changed.
    static func identity(_ path: FilePath) throws -> FileIdentity {
        do {
            return FileIdentity(try path.stat())
        } catch {
            if error == .noSuchFileOrDirectory { throw LockboxError.vaultNotFound(path: path.string) }
            throw LockboxError.io(operation: "checking the vault", path: path.string, errno: error.asErrno)
        }
    }

    /// Refuses a vault that is not ours with mode 0600 or tighter.
    static func checkOwnership(_ status: Stat, path: FilePath) throws {
        let mode = status.permissions.rawValue
        if mode & 0o077 != 0 {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail:
                    "the vault is accessible by group or others (mode \(octal(mode))). If nobody else could have read or changed it, fix it with `chmod 600 \(path.string)`."
            )
        }
        let owner = UInt32(status.userID.rawValue)
        if owner != effectiveUserID() {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail:
                    "the vault is owned by user ID \(owner), not by you (user ID \(effectiveUserID())). Copy it to a file you own, or run as its owner."
            )
        }
    }

    /// The header at the start of `bytes` and its length, or the typed error for `path`.
    static func parseHeader(_ bytes: [UInt8], path: FilePath) throws -> (VaultHeader, Int) {
        do {
            return try bytes.withUnsafeBytes { buffer throws in try VaultHeader.parse(buffer) }
        } catch let reason as LockboxErrorReason {
            throw reason.error(path: path.string)
        }
    }

    /// Replaces the file at `path` with `header` (its generation advanced) and `entries` sealed
    /// under `dataKey`, atomically and durably. Call it only under the vault's ``VaultLock``.
    static func write(
        header: VaultHeader, entries: [ItemKey: VaultEntry], dataKey: SecretBytes, to path: FilePath
    ) throws -> (VaultHeader, FileIdentity) {
        let (header, chunks) = try VaultBodyCodec.seal(entries, header: header, dataKey: dataKey)
        let identity = try AtomicFileWriter.write(chunks, to: path)
        return (header, identity)
    }
}

/// A vault file read once (``EncryptedFileStore/readSnapshot(at:)``): its bytes (ciphertext),
/// identity and parsed header.
package struct VaultFileSnapshot {
    /// The vault's real path (symbolic links resolved).
    package let path: FilePath
    let bytes: [UInt8]
    let identity: FileIdentity
    let header: VaultHeader
    let headerLength: Int

    /// The vault's ID, from the header.
    package var vaultID: [UInt8] { header.vaultID }
}
