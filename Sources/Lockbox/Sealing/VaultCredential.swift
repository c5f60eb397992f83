import CSodium
import SystemPackage

/// Something that opens a key slot of an ``EncryptedFileStore``.
public enum VaultCredential: Sendable, CustomStringConvertible {
    /// A passphrase; opens passphrase slots (Argon2id).
    case passphrase(SecretBytes)
    /// A key file on disk (32 raw bytes, or 64 hexadecimal digits); opens key-file slots.
    /// The file must not be readable by group or others.
    case keyFile(FilePath)
    /// A 32-byte key already in memory (e.g. read from a file descriptor); opens key-file slots.
    case key(SecretBytes)
    /// A sealer (a TPM); creates and opens TPM2 key slots, whose secret it keeps.
    case sealed(any KeySlotSealer)

    /// Names the kind of credential, never its value.
    public var description: String {
        switch self {
        case .passphrase: return "passphrase"
        case .keyFile(let path): return "key file \(path)"
        case .key: return "key"
        case .sealed: return "TPM"
        }
    }
}

/// Key files: 32 random bytes that open a key-file slot — what a service receives from systemd
/// credentials (`LoadCredential=`), a secrets mount, or a hardware-backed unlock script.
public enum KeyFile {
    /// The size of a key, in bytes.
    public static let keyBytes = 32

    /// Writes 32 fresh random bytes to a new file at `path` (mode 0600; fails if it exists).
    @discardableResult
    public static func generate(at path: FilePath) throws -> SecretBytes {
        let key = SecretBytes.random(count: keyBytes)
        do {
            try path.removingLastComponent().createDirectories(permissions: .ownerReadWriteExecute)
            let fd = try FileDescriptor.open(
                path, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec], permissions: .ownerReadWrite)
            try fd.closeAfter { () throws in
                _ = try key.withUnsafeBytes { bytes in try fd.writeAll(bytes) }
                try fd.sync()
            }
        } catch let error as Errno where error == .fileExists {
            throw LockboxError.invalidKeyFile(path: path.string, reason: "a file already exists there; refusing to overwrite it")
        } catch {
            throw LockboxError.io(operation: "creating the key file", path: path.string, errno: error.asErrno)
        }
        return key
    }

    /// What a key file's fingerprint is derived under (docs/FORMAT.md section 18.1.1).
    package static let fingerprintContext = Array("lockbox.v2.keyfile-fingerprint".utf8)

    /// The fingerprint of the key file at `path`, as ``KeySlotInfo/keyFileFingerprint`` shows the
    /// one a key-file slot records: 32 lowercase hexadecimal digits, so a person can tell which key
    /// file a slot is for without the vault. The file is read as ``read(at:access:)`` reads it.
    ///
    /// The fingerprint is 16 bytes of keyed BLAKE2b of the 32-byte key under a context of its own
    /// (docs/FORMAT.md section 18.1.1): it says nothing that helps find a key of 256 random bits,
    /// and the same key in either encoding (raw or hexadecimal) has the same fingerprint.
    ///
    /// - Parameters:
    ///   - path: The key file.
    ///   - access: Which permissions of the file are accepted (see ``read(at:access:)``).
    public static func fingerprint(at path: FilePath, access: KeyFileAccess = .ownerOnly) throws -> String {
        fingerprint(of: try read(at: path, access: access)).hexString
    }

    /// The fingerprint of a 32-byte key: `crypto_generichash(outlen: 16, in: "lockbox.v2.keyfile-fingerprint", key: key)`.
    package static func fingerprint(of key: SecretBytes) -> [UInt8] {
        Sodium.keyedBlake2b(fingerprintContext, key: key, length: KeySlot.fingerprintBytes).withUnsafeBytes { Array($0) }
    }

    /// Reads a key file: exactly 32 raw bytes, or 64 hexadecimal digits with an optional
    /// trailing newline. Refuses what is not a regular file before reading it (opened without
    /// blocking, so a FIFO cannot hang it), and a file that group or others can read or write
    /// (with advice to `chmod` it only if its contents are a key) unless `access` accepts it
    /// (``KeyFileAccess/readOnlyMount``: a Kubernetes secret volume).
    public static func read(at path: FilePath, access: KeyFileAccess = .ownerOnly) throws -> SecretBytes {
        let raw: SecretBytes
        var looseMode: UInt32?
        do {
            let fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking])
            raw = try fd.closeAfter { () throws -> SecretBytes in
                let status = try fd.stat()
                guard status.type == .regular else {
                    throw LockboxError.invalidKeyFile(
                        path: path.string, reason: "it is \(describe(status.type)), not a regular file, so it is not a key file")
                }
                if status.permissions.rawValue & 0o077 != 0 {
                    looseMode = status.permissions.rawValue
                    if access == .readOnlyMount {
                        try access.acceptMountedKeyFile(path: path, status: status, readOnly: fd.isOnReadOnlyFileSystem())
                        looseMode = nil
                    }
                }
                var bytes = try fd.readToEnd(limit: 4096)
                defer { bytes.withUnsafeMutableBytes { $0.zeroize() } }
                return SecretBytes(copying: bytes)
            }
        } catch let error as LockboxError {
            throw error
        } catch let error as Errno where error == .permissionDenied {
            if let status = try? path.stat(), status.permissions.rawValue & 0o077 != 0 {
                throw LockboxError.insecurePermissions(
                    path: path.string,
                    detail:
                        "the key file is accessible by group or others (mode \(octal(status.permissions.rawValue))). Fix it with `chmod 600 \(path.string)`."
                )
            }
            throw LockboxError.io(operation: "reading the key file", path: path.string, errno: error.asErrno)
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            throw LockboxError.invalidKeyFile(path: path.string, reason: "no such file")
        } catch let error as Errno where error == .fileTooLarge {
            throw LockboxError.invalidKeyFile(
                path: path.string, reason: "it is larger than a key file can be (expected 32 bytes or 64 hex digits)")
        } catch {
            throw LockboxError.io(operation: "reading the key file", path: path.string, errno: error.asErrno)
        }
        guard let key = decode(raw) else {
            throw LockboxError.invalidKeyFile(
                path: path.string, reason: "expected 32 raw bytes or 64 hexadecimal digits, found \(raw.count) bytes of something else")
        }
        if let looseMode {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail: "the key file is accessible by group or others (mode \(octal(looseMode))). Fix it with `chmod 600 \(path.string)`.")
        }
        return key
    }

    /// 32 raw bytes as they are; 64 hex digits (plus an optional newline) decoded; else `nil`.
    /// The digits are secret, so they are decoded by libsodium's `sodium_hex2bin`, whose work
    /// depends on no digit's value (a branching decoder would take a different path for `a`-`f`
    /// than for `0`-`9`); only whether the file is 64 hex digits comes out.
    package static func decode(_ raw: SecretBytes) -> SecretBytes? {
        if raw.count == keyBytes { return raw }
        return raw.withUnsafeBytes { bytes -> SecretBytes? in
            var digits = bytes.count
            if digits > 0 && bytes[digits - 1] == UInt8(ascii: "\n") { digits -= 1 }
            if digits > 0 && bytes[digits - 1] == UInt8(ascii: "\r") { digits -= 1 }
            guard digits == keyBytes * 2, let start = bytes.baseAddress else { return nil }
            struct NotHex: Error {}
            return try? SecretBytes(count: keyBytes) { out in
                guard let target = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw NotHex() }
                var decoded = 0
                var end: UnsafePointer<CChar>?
                let hex = start.assumingMemoryBound(to: CChar.self)
                // Every digit must be decoded: sodium_hex2bin stops at the first non-digit.
                guard sodium_hex2bin(target, keyBytes, hex, digits, nil, &decoded, &end) == 0, decoded == keyBytes,
                    end == hex + digits
                else { throw NotHex() }
            }
        }
    }
}

/// What a file that is not a regular one is, for messages: "a directory", "a FIFO", ….
func describe(_ type: FileType) -> String {
    switch type {
    case .directory: return "a directory"
    case .fifo: return "a FIFO (named pipe)"
    case .characterSpecial: return "a character device"
    case .blockSpecial: return "a block device"
    case .socket: return "a socket"
    case .symbolicLink: return "a symbolic link"
    case .regular: return "a regular file"
    default: return "a special file"
    }
}

/// `0o644` as the string `0644`.
func octal(_ mode: UInt32) -> String {
    let digits = String(mode & 0o7777, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

extension UnsafeMutableRawBufferPointer {
    /// Overwrites every byte with zero in a way the optimiser keeps (`sodium_memzero`).
    package func zeroize() {
        if let base = baseAddress, count > 0 { sodium_memzero(base, count) }
    }
}
