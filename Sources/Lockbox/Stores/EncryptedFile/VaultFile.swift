import Foundation
import SystemPackage

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
        try EncryptedFileStore.checkCanCreate(at: path)
        return resolvedPath(path)
    }

    /// The vault file at `path` (symbolic links resolved), read once and its header parsed.
    package static func snapshot(at path: FilePath) throws -> VaultFileSnapshot {
        try snapshot(resolved: resolvedPath(path))
    }

    /// What the file at `path` is, decided from one open of it: a format-1 vault, read once and
    /// its header parsed, or a format-2 vault (SQLite; only its first 72 bytes were read), which
    /// the caller opens as ``SQLiteVaultStore``.
    package enum Probe {
        case format1(VaultFileSnapshot)
        case format2(path: FilePath)
    }

    /// ``Probe`` of the vault file at `path` (symbolic links resolved).
    package static func probe(at path: FilePath) throws -> Probe {
        let path = resolvedPath(path)
        do {
            return .format1(try snapshot(resolved: path, format2: .stop))
        } catch is Format2Vault {
            return .format2(path: path)
        }
    }

    /// The first bytes of the file said it is a format-2 vault (only ``probe(at:)`` sees it).
    private struct Format2Vault: Error {}

    private enum Format2Handling { case refuse, stop }

    /// The file at `path`, already resolved (a handle's own path), read once and its header parsed.
    static func snapshot(resolved path: FilePath) throws -> VaultFileSnapshot {
        try snapshot(resolved: path, format2: .refuse)
    }

    private static func snapshot(resolved path: FilePath, format2: Format2Handling) throws -> VaultFileSnapshot {
        let file: (bytes: [UInt8], identity: FileIdentity)
        do {
            file = try read(path)
        } catch is Format2Vault where format2 == .refuse {
            throw LockboxError.unsupportedFormatVersion(
                path: path.string, found: Int(VaultRecords.formatVersion), supported: Int(VaultHeader.currentVersion))
        }
        let (header, headerLength) = try parseHeader(file.bytes, path: path)
        return VaultFileSnapshot(path: path, bytes: file.bytes, identity: file.identity, header: header, headerLength: headerLength)
    }

    /// The whole file at `path` (already resolved) and its identity, in one read.
    static func read(_ path: FilePath) throws -> (bytes: [UInt8], identity: FileIdentity) {
        do {
            // Without blocking: a FIFO at the vault's path must be refused, not waited on.
            let fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking])
            return try fd.closeAfter { () throws -> ([UInt8], FileIdentity) in
                let status: Stat
                do { status = try fd.stat() } catch {
                    throw LockboxError.io(operation: "checking the vault", path: path.string, errno: error.asErrno)
                }
                guard status.type == .regular else {
                    throw LockboxError.invalidArgument("\(path.string) is \(describe(status.type)), not a regular file, so it cannot be a vault")
                }
                do {
                    // A format-2 vault (SQLite) is not read whole: its first bytes say what it is
                    // (read with pread, so the whole-file read below still starts at 0). Callers
                    // that take either format open it as format 2 on this error.
                    var start = [UInt8](repeating: 0, count: SQLiteVaultStore.sqliteHeaderBytes)
                    let peeked = try start.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
                    if SQLiteVaultStore.sqliteHeader(start.prefix(peeked)).isVault { throw Format2Vault() }
                    let bytes = try fd.readToEnd(limit: maximumBytes, expectedSize: Int(status.size))
                    // Permission advice only for a file that is a vault; anything else (a link to
                    // /etc/passwd, say) is reported as not a vault when its header is parsed.
                    if bytes.starts(with: VaultHeader.magic) { try checkOwnership(status, path: path) }
                    return (bytes, FileIdentity(status))
                } catch let error as LockboxError {
                    throw error
                } catch let found as Format2Vault {
                    throw found
                } catch {
                    if error.asErrno == .fileTooLarge {
                        throw LockboxError.corruptVault(path: path.string, reason: "larger than the 1 GiB a vault can be")
                    }
                    throw LockboxError.io(operation: "reading the vault", path: path.string, errno: error.asErrno)
                }
            }
        } catch let error as LockboxError {
            throw error
        } catch let found as Format2Vault {
            throw found
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            throw LockboxError.vaultNotFound(path: path.string)
        } catch {
            throw LockboxError.io(operation: "opening the vault", path: path.string, errno: error.asErrno)
        }
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
                detail: "the vault is accessible by group or others (mode \(octal(mode))). If nobody else could have read or changed it, fix it with `chmod 600 \(path.string)`.")
        }
        let owner = UInt32(status.userID.rawValue)
        if owner != effectiveUserID() {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail: "the vault is owned by user ID \(owner), not by you (user ID \(effectiveUserID())). Copy it to a file you own, or run as its owner.")
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
