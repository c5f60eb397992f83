import CSQLite
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Lets a ``SQLiteConnection`` use a descriptor Lockbox has already opened and checked, so a vault
/// file is opened once per command and SQLite reads the very
/// file that was found to be a regular file owned by the user — not whatever is at the path a
/// moment later.
///
/// SQLite opens a database itself, by path. Its Unix VFS makes every system call through a table
/// that `xSetSystemCall` can redirect (the interface SQLite's own tests use to inject faults);
/// Lockbox redirects `open` once per process to ``open(_:_:_:)``, which hands over a descriptor
/// offered for that path by the same thread and calls the previous `open` for everything else. So
/// other SQLite users in the process (GRDB, say) are unaffected: their paths are never offered.
///
/// The redirection is installed on first use, through a Swift global's one-time initialisation.
/// SQLite documents system-call overrides as not thread-safe against concurrent opens; the switch
/// is one pointer-sized store, and a concurrent open sees either the previous `open` or the hook,
/// which falls through to it. Where the VFS has no system-call table (not SQLite's Unix VFS),
/// nothing is redirected and the connection opens the file by path as before: correct, only one
/// open more.
enum SQLiteFileAdoption {
    private typealias OpenCall = @convention(c) (UnsafePointer<CChar>?, Int32, Int32) -> Int32

    private struct Offer {
        let token: UInt64
        let path: String
        let descriptor: Int32
        let readWrite: Bool
        let thread: pthread_t
    }

    private struct Offers {
        var nextToken: UInt64 = 1
        var pending: [Offer] = []
        var takenOver: [String: Int] = [:]
    }

    private static let offers = Locked(Offers())

    /// The `open` SQLite called before the hook was installed; nil where it could not be installed.
    private static let previousOpen: OpenCall? = install()

    private static func install() -> OpenCall? {
        guard let vfs = sqlite3_vfs_find("unix"), vfs.pointee.iVersion >= 3,
            let get = vfs.pointee.xGetSystemCall, let set = vfs.pointee.xSetSystemCall,
            let current = get(vfs, "open")
        else { return nil }
        let previous = unsafeBitCast(current, to: OpenCall.self)
        let hook: OpenCall = { path, flags, mode in SQLiteFileAdoption.open(path, flags, mode) }
        guard set(vfs, "open", unsafeBitCast(hook, to: sqlite3_syscall_ptr.self)) == SQLITE_OK else { return nil }
        return previous
    }

    /// Whether descriptors can be handed to SQLite in this process.
    static var isAvailable: Bool { previousOpen != nil }

    /// How many descriptors offered for `path` SQLite has taken over in this process (for tests;
    /// per path, so tests running beside each other do not count each other's).
    package static func takenOverCount(path: FilePath) -> Int { offers.withLock { $0.takenOver[path.string] ?? 0 } }

    /// Offers `descriptor` (open on `path`, which must be the path SQLite will open) to the next
    /// `open` of `path` on this thread; returns a token for ``withdraw(_:)``, or nil when nothing
    /// can be handed over (the caller then closes the descriptor and SQLite opens the path).
    static func offer(_ descriptor: FileDescriptor, path: FilePath, readWrite: Bool) -> UInt64? {
        guard isAvailable else { return nil }
        return offers.withLock { offers in
            let token = offers.nextToken
            offers.nextToken += 1
            offers.pending.append(
                Offer(
                    token: token, path: path.string, descriptor: descriptor.rawValue,
                    readWrite: readWrite, thread: pthread_self()))
            return token
        }
    }

    /// Ends an offer after `sqlite3_open_v2` returned: true if SQLite took the descriptor (it owns
    /// it now); false if it did not, in which case the descriptor is closed here.
    @discardableResult
    static func withdraw(_ token: UInt64) -> Bool {
        let left = offers.withLock { offers -> Offer? in
            guard let index = offers.pending.firstIndex(where: { $0.token == token }) else { return nil }
            return offers.pending.remove(at: index)
        }
        guard let left else { return true }
        DatabaseFileDescriptors.close(FileDescriptor(rawValue: left.descriptor), readWrite: left.readWrite)
        return false
    }

    /// SQLite's `open`: the offered descriptor when this thread offered one for `path` with the
    /// access SQLite asks for, else the previous `open`. Asked for read-write access to a file
    /// offered read-only, it fails with EACCES, as `open` itself would: SQLite then asks again for
    /// read-only access, and gets the descriptor.
    private static func open(_ path: UnsafePointer<CChar>?, _ flags: Int32, _ mode: Int32) -> Int32 {
        if let path {
            let name = String(cString: path)
            let thread = pthread_self()
            let wantsWrite = flags & O_ACCMODE != O_RDONLY
            let answer = offers.withLock { offers -> Int32? in
                guard flags & O_CREAT == 0,
                    let index = offers.pending.firstIndex(where: { $0.path == name && pthread_equal($0.thread, thread) != 0 })
                else { return nil }
                if wantsWrite && !offers.pending[index].readWrite { return -1 }
                offers.takenOver[name, default: 0] += 1
                return offers.pending.remove(at: index).descriptor
            }
            if let answer {
                if answer < 0 { errno = EACCES }
                return answer
            }
        }
        guard let previousOpen else {
            errno = ENOSYS
            return -1
        }
        return previousOpen(path, flags, mode)
    }
}

/// A format-2 vault file that Lockbox opened and checked (a regular file, ours, mode 0600 or
/// tighter, a SQLite header) and whose descriptor the ``SQLiteConnection`` opening it takes over,
/// so the file is opened once (``VaultFile/probe(at:)``). Closed when dropped unused (through
/// ``DatabaseFileDescriptors``, which keeps it while connections of this process use the file).
package final class OpenedDatabaseFile {
    /// The file's resolved path, the one SQLite is given.
    package let path: FilePath
    /// Whether the descriptor was opened read-write (read-only where writing is not allowed).
    let readWrite: Bool
    private var descriptor: FileDescriptor?

    init(path: FilePath, descriptor: FileDescriptor, readWrite: Bool) {
        self.path = path
        self.descriptor = descriptor
        self.readWrite = readWrite
    }

    /// The descriptor, once: ownership passes to the caller.
    func take() -> FileDescriptor? {
        defer { descriptor = nil }
        return descriptor
    }

    deinit {
        if let descriptor { DatabaseFileDescriptors.close(descriptor, readWrite: readWrite) }
    }
}

/// Keeps this process's SQLite locks on a vault: no descriptor of a database file is closed while
/// a ``SQLiteConnection`` of this process has that file open.
///
/// POSIX record locks — the ones SQLite's Unix VFS takes — belong to a process and a file, not to
/// a descriptor: closing *any* descriptor of the file drops every lock the process holds on it.
/// SQLite guards its own descriptors against this (a connection closed while another holds locks
/// leaves its descriptor open, and the next open of the file reuses it instead of calling `open`).
/// Lockbox's descriptors need the same care: the probe of ``VaultFile/probe(at:)`` is not taken
/// over when SQLite reuses one of its own, and `VaultFileFormat.detect(at:)` reads a few bytes by path. Closing
/// such a descriptor beside an open connection dropped that connection's shared lock; another
/// process closing the vault then found itself its last user, folded the write-ahead log in and
/// deleted it under the open connection (a later write failed with a disk I/O error, or the
/// database was damaged).
///
/// So every such descriptor is closed through ``close(_:readWrite:)``: while connections of this
/// process have the file open it is parked instead, and closed when the last of them closes. The
/// next probe of the file takes a parked descriptor before opening a new one, so at most one is
/// parked per file and access mode however often handles are opened and closed.
package enum DatabaseFileDescriptors {
    struct FileID: Hashable {
        var device: UInt64
        var inode: UInt64

        init(_ status: stat) {
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
        }

        init?(descriptor: Int32) {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { return nil }
            self.init(status)
        }

        init?(path: FilePath) {
            var status = stat()
            guard path.withPlatformString({ lstat($0, &status) }) == 0 else { return nil }
            self.init(status)
        }
    }

    private struct Parked {
        var descriptor: Int32
        var readWrite: Bool
    }

    private struct File {
        var connections = 0
        var parked: [Parked] = []
    }

    private static let files = Locked([FileID: File]())

    /// Closes `descriptor`, a descriptor of a (possible) database file — or parks it while
    /// connections of this process have that file open.
    static func close(_ descriptor: FileDescriptor, readWrite: Bool) {
        if let id = FileID(descriptor: descriptor.rawValue) {
            let parked = files.withLock { files -> Bool in
                guard var file = files[id], file.connections > 0 else { return false }
                file.parked.append(Parked(descriptor: descriptor.rawValue, readWrite: readWrite))
                files[id] = file
                return true
            }
            if parked { return }
        }
        try? descriptor.close()
    }

    /// A parked descriptor of the file now at `path`, taken out of the park (the caller owns it,
    /// positioned at the start), and whether it is open read-write; nil if there is none. With
    /// `writable`, only a read-write one; else any, a read-only one first.
    static func takeParked(path: FilePath, writable: Bool) -> (descriptor: FileDescriptor, readWrite: Bool)? {
        guard let id = FileID(path: path) else { return nil }
        let taken = files.withLock { files -> Parked? in
            guard var file = files[id] else { return nil }
            let index =
                writable
                ? file.parked.firstIndex(where: \.readWrite)
                : file.parked.firstIndex(where: { !$0.readWrite }) ?? file.parked.indices.first
            guard let index else { return nil }
            let parked = file.parked.remove(at: index)
            files[id] = file
            return parked
        }
        guard let taken else { return nil }
        _ = lseek(taken.descriptor, 0, SEEK_SET)
        return (FileDescriptor(rawValue: taken.descriptor), taken.readWrite)
    }

    /// Counts a connection to the file `id` as open (before it opens, so that descriptors closed
    /// meanwhile are parked).
    static func connectionOpening(_ id: FileID) {
        files.withLock { $0[id, default: File()].connections += 1 }
    }

    /// Counts a connection to the file `id` as closed (after SQLite closed it); the last one
    /// closes the file's parked descriptors.
    static func connectionClosed(_ id: FileID) {
        let release = files.withLock { files -> [Int32] in
            guard var file = files[id] else { return [] }
            file.connections -= 1
            if file.connections > 0 {
                files[id] = file
                return []
            }
            files[id] = nil
            return file.parked.map(\.descriptor)
        }
        for descriptor in release { _ = Glibc.close(descriptor) }
    }

    /// How many descriptors of the file at `path` are parked now (for tests).
    package static func parkedCount(path: FilePath) -> Int {
        guard let id = FileID(path: path) else { return 0 }
        return files.withLock { $0[id]?.parked.count ?? 0 }
    }
}
