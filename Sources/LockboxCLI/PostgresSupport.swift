import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The PostgreSQL store as the commands reach it (`--store postgres`, `migrate --from/--to
/// postgres`). `lockbox-postgres` (Sources/LockboxPostgresCLI) provides it; `lockbox` has none and
/// hands the whole command line over to `lockbox-postgres` beside it (``PostgresCommands/provider()``),
/// so that `lockbox` links no SwiftNIO and its start-up does not pay for it.
package protocol PostgresCommandSupport: Sendable {
    /// The PostgreSQL store's provider (`PostgresStoreProvider`) for the database `connection`
    /// names: the commands open and create the store through it, as through every store's.
    func provider(_ connection: PostgresConnectionSource) throws -> any StoreProvider
    /// Closes the connections of every store opened, once the command is done.
    func closeAll()
}

/// Where the connection URL comes from: a file (`--postgres-url-file`, `LOCKBOX_POSTGRES_URL_FILE`)
/// or the environment variable `LOCKBOX_POSTGRES_URL`. Never an argument: the URL may hold a password.
package enum PostgresConnectionSource: Sendable, Equatable {
    case file(FilePath)
    case environment(name: String)
}

package enum PostgresCommands {
    /// Set once by `lockbox-postgres` before it runs the command.
    package static let support = Locked<(any PostgresCommandSupport)?>(nil)

    /// The name of the program that opens the PostgreSQL store, installed beside `lockbox`.
    static let programName = "lockbox-postgres"

    /// The PostgreSQL support of this program. In `lockbox`, which has none, this replaces the
    /// process with `lockbox-postgres` from the same folder, given the same arguments, environment
    /// and descriptors (so a passphrase on a descriptor or a secret on standard input, not yet
    /// read, reaches it); it returns only in `lockbox-postgres`, and throws if the program is
    /// missing or cannot run.
    static func provider() throws -> any PostgresCommandSupport {
        if let support = support.withLock({ $0 }) { return support }
        let path = try siblingProgram()
        Trace.log("store: PostgreSQL; handing the command over to \(path)")
        var arguments: [UnsafeMutablePointer<CChar>?] = [strdup(path)]
        for index in 1..<max(1, Int(CommandLine.argc)) { arguments.append(CommandLine.unsafeArgv[index].flatMap { strdup($0) }) }
        arguments.append(nil)
        fflush(nil)
        execv(path, arguments)
        let code = errno
        for pointer in arguments { free(pointer) }
        throw LockboxError.io(operation: "starting \(programName) for the PostgreSQL store", path: path, errno: Errno(rawValue: code))
    }

    /// `lockbox-postgres` in the folder of the running executable (/proc/self/exe, so a symbolic
    /// link to `lockbox` elsewhere still finds the real folder).
    private static func siblingProgram() throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else {
            throw LockboxError.io(operation: "finding the running program", path: "/proc/self/exe", errno: Errno(rawValue: errno))
        }
        let executable = FilePath(String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        let sibling = executable.removingLastComponent().appending(programName).string
        guard access(sibling, X_OK) == 0 else {
            throw PostgresProgramMissing(path: sibling)
        }
        return sibling
    }
}

/// `lockbox-postgres` is not where `lockbox` looks for it (the CLI's error, exit 27).
struct PostgresProgramMissing: LockboxCodedError {
    var path: String
    var description: String {
        "the PostgreSQL store is opened by \(PostgresCommands.programName), which is not installed beside this lockbox (looked for \(path)); "
            + "install it with `make install-postgres`, or build it with `swift build --traits PostgreSQL --product \(PostgresCommands.programName)`"
    }
    var code: LockboxError.Code { .postgresProgramMissing }
    var category: LockboxError.Category { .noStorageAccess }
}
