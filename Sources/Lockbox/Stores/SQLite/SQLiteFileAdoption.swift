import CSQLite
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// Lets a ``SQLiteConnection`` use a descriptor Lockbox has already opened and checked, so a vault
/// file is opened once per command (issue 14: `get` opens the vault once) and SQLite reads the very
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
        var takenOver = 0
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

    /// How many offered descriptors SQLite has taken over in this process (for tests).
    package static var takenOverCount: Int { offers.withLock { $0.takenOver } }

    /// Offers `descriptor` (open on `path`, which must be the path SQLite will open) to the next
    /// `open` of `path` on this thread; returns a token for ``withdraw(_:)``, or nil when nothing
    /// can be handed over (the caller then closes the descriptor and SQLite opens the path).
    static func offer(_ descriptor: FileDescriptor, path: FilePath, readWrite: Bool) -> UInt64? {
        guard isAvailable else { return nil }
        return offers.withLock { offers in
            let token = offers.nextToken
            offers.nextToken += 1
            offers.pending.append(Offer(token: token, path: path.string, descriptor: descriptor.rawValue,
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
        _ = Glibc.close(left.descriptor)
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
                offers.takenOver += 1
                return offers.pending.remove(at: index).descriptor
            }
            if let answer {
                if answer < 0 { errno = EACCES }
                return answer
            }
        }
        guard let previousOpen else { errno = ENOSYS; return -1 }
        return previousOpen(path, flags, mode)
    }
}

/// A format-2 vault file that Lockbox opened and checked (a regular file, ours, mode 0600 or
/// tighter, a SQLite header) and whose descriptor the ``SQLiteConnection`` opening it takes over,
/// so the file is opened once (``VaultFile/probe(at:)``). Closed when dropped unused.
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

    deinit { try? descriptor?.close() }
}
