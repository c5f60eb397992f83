import SystemPackage

/// What a file's first bytes say it is: the one place that tells Lockbox's vault formats apart.
///
/// Everything else goes through ``FileVault`` (which opens whichever format it finds) or asks
/// ``detect(at:)``; nothing outside this type compares magic numbers or SQLite headers.
/// docs/FORMAT.md describes both signatures: format 1 starts with `LOCKBOX\0`; format 2 is a
/// SQLite database (`SQLite format 3\0`) whose `application_id` (bytes 68-71, big-endian) is
/// Lockbox's.
package enum VaultFileFormat: Equatable, Sendable {
    /// A format-2 vault: a SQLite database whose `application_id` is a Lockbox vault's.
    case format2
    /// A SQLite database that is not a Lockbox vault (another program's, or one too short to
    /// carry an `application_id`).
    case foreignDatabase
    /// A format-1 vault: the file starts with format 1's magic.
    case format1
    /// Anything else: another kind of file, an empty or unreadable one, or none at all.
    case unknown

    /// How many bytes ``detect(header:)`` needs to tell every case apart.
    package static let headerBytes = 72

    /// Whether the file is a SQLite database (a format-2 vault or another program's database):
    /// what SQLite, not the format-1 reader, should open.
    package var isDatabase: Bool { self == .format2 || self == .foreignDatabase }

    /// What the first bytes of a file say (at least ``headerBytes`` of them when the file has
    /// that many).
    package static func detect(header start: ArraySlice<UInt8>) -> VaultFileFormat {
        if start.count >= sqliteMagic.count, start.prefix(sqliteMagic.count).elementsEqual(sqliteMagic) {
            guard start.count >= headerBytes else { return .foreignDatabase }
            let id = start.dropFirst(68).prefix(4).reduce(Int64(0)) { $0 << 8 | Int64($1) }
            return id == SQLiteVaultStore.applicationID ? .format2 : .foreignDatabase
        }
        if start.count >= VaultHeader.magic.count, start.prefix(VaultHeader.magic.count).elementsEqual(VaultHeader.magic) {
            return .format1
        }
        return .unknown
    }

    /// What the first bytes of the file at `path` say; ``unknown`` when it cannot be read.
    /// Never blocks on a FIFO.
    package static func detect(at path: FilePath) -> VaultFileFormat {
        var start = [UInt8](repeating: 0, count: headerBytes)
        // A descriptor kept while a connection of this process has the file open is reused; this
        // one is closed through DatabaseFileDescriptors too, which keeps it in that case.
        let reused = DatabaseFileDescriptors.takeParked(path: path, writable: false)
        guard let fd = reused?.descriptor ?? (try? FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking])) else {
            return .unknown
        }
        defer { DatabaseFileDescriptors.close(fd, readWrite: reused?.readWrite ?? false) }
        let count = (try? start.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }) ?? 0
        return detect(header: start.prefix(count))
    }

    private static let sqliteMagic = Array("SQLite format 3".utf8) + [0]
}
