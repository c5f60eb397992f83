#if PostgreSQL
    import Foundation
    import Lockbox
    import SystemPackage
    #if canImport(Glibc)
        import Glibc
    #endif

    /// Where a ``PostgresStore`` connects: a libpq-style URL,
    /// `postgresql://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=MODE&connect_timeout=SECONDS`, or with
    /// several hosts for failover, `postgresql://USER:PASSWORD@HOST1:PORT1,HOST2:PORT2/DATABASE?target_session_attrs=read-write`.
    ///
    /// The URL holds a password, so it is read from a file (``read(fromFile:)``, mode 0600 or
    /// tighter) or an environment variable the caller names (``read(fromEnvironment:)``), never
    /// from a command line. ``description`` leaves the password out; no error carries it.
    ///
    /// Understood parameters: `sslmode` (`disable`, `prefer` — the default, as libpq's — or
    /// `require`), `connect_timeout` (whole seconds, 1-3600; default 10: how long one connection
    /// attempt to one host may take) and `target_session_attrs` (`any` — the default — `read-write`
    /// or `primary`, as libpq's: which server of the list the store uses; or `prefer-standby`: reads
    /// that may be stale on a standby, everything else on the primary). Others are refused, so a
    /// setting the store would not honour is never silently dropped.
    ///
    /// Hosts are tried in the order given (up to ``maximumHosts``); the store uses the first that
    /// accepts the connection and matches `target_session_attrs`, and chooses again when that
    /// connection is lost or the server turns read-only (a standby promoted, the old primary
    /// demoted). With several hosts, give a `connect_timeout` well below the store's operation
    /// timeout, so that one host that does not answer leaves time to try the next.
    public struct PostgresConnectionURL: Sendable, CustomStringConvertible {
        /// One server of the URL's host list.
        public struct Host: Sendable, Equatable, CustomStringConvertible {
            /// The server's host name or IP address.
            public var name: String
            /// The server's TCP port (5432 unless the URL says otherwise).
            public var port: Int

            /// Names a server.
            public init(_ name: String, port: Int = 5432) {
                self.name = name
                self.port = port
            }

            /// `NAME:PORT` (`[NAME]:PORT` for an IPv6 address).
            public var description: String { name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)" }
        }

        /// Which of the listed servers the store may use (libpq's `target_session_attrs`).
        public enum TargetSessionAttributes: String, Sendable {
            /// The first server that accepts the connection.
            case any
            /// The first server that accepts writes: not in recovery (a standby), and
            /// `transaction_read_only` off.
            case readWrite = "read-write"
            /// The first server that is not in recovery (not a standby).
            case primary
            /// Reads on a hot standby, writes on the primary, within one store handle. Reads that may
            /// be stale (``Lockbox/ReadFreshness/replicaAllowed``: a ``Lockbox/Vault``'s `get`,
            /// `metadata` and `list`) go to the first server in recovery, or to the first that
            /// accepts the connection while none is; everything else — writes, PIN attempt counts,
            /// refresh leases, conditional writes and the reads they decide on, opening the vault —
            /// goes to the first server that accepts writes, as with ``readWrite``. Unlike libpq,
            /// whose `prefer-standby` sends a whole session to the standby, writes never go there.
            case preferStandby = "prefer-standby"
        }

        /// The most hosts one URL may list.
        public static let maximumHosts = 16

        /// How the connection uses TLS.
        public enum TLSMode: String, Sendable {
            /// Plain TCP.
            case disable
            /// TLS when the server offers it, plain TCP otherwise (libpq's default).
            case prefer
            /// TLS or no connection.
            case require
        }

        /// The servers, in the order they are tried (at least one).
        public var hosts: [Host]
        /// The first server's host name or IP address.
        public var host: String {
            get { hosts[0].name }
            set { hosts[0].name = newValue }
        }
        /// The first server's TCP port.
        public var port: Int {
            get { hosts[0].port }
            set { hosts[0].port = newValue }
        }
        /// The role to log in as.
        public var user: String
        /// The role's password, if the URL has one. Never printed.
        public var password: String?
        /// The database holding the vault.
        public var database: String
        /// The `sslmode` parameter.
        public var tlsMode: TLSMode
        /// The `connect_timeout` parameter: how long one connection attempt to one host may take.
        public var connectTimeout: Duration
        /// The `target_session_attrs` parameter.
        public var targetSessionAttributes: TargetSessionAttributes

        /// The URL without its password, for messages: `postgresql://USER@HOST:PORT[,HOST:PORT…]/DATABASE`.
        public var description: String {
            "postgresql://\(user)@\(hosts.map(\.description).joined(separator: ","))/\(database)"
        }

        /// Parses `url`. Throws ``LockboxError/invalidArgument(_:)`` (naming the part, never the
        /// password) when it is not a URL this store can use.
        public init(parsing url: String) throws {
            func refuse(_ reason: String) -> LockboxError { .invalidArgument("the PostgreSQL URL \(reason)") }
            let trimmed = url.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let schemeEnd = trimmed.range(of: "://"),
                ["postgresql", "postgres"].contains(trimmed[..<schemeEnd.lowerBound].lowercased())
            else {
                throw refuse("must start with postgresql://")
            }
            var rest = Substring(trimmed[schemeEnd.upperBound...])
            var query = Substring("")
            if let mark = rest.firstIndex(of: "?") {
                query = rest[rest.index(after: mark)...]
                rest = rest[..<mark]
            }
            guard let slash = rest.firstIndex(of: "/") else { throw refuse("names no database (postgresql://HOST/DATABASE)") }
            let authority = rest[..<slash]
            guard let database = String(rest[rest.index(after: slash)...]).removingPercentEncoding, !database.isEmpty,
                !database.contains("/")
            else {
                throw refuse("names no database (postgresql://HOST/DATABASE)")
            }
            guard let at = authority.lastIndex(of: "@") else { throw refuse("names no user (postgresql://USER@HOST/DATABASE)") }
            let userInfo = authority[..<at]
            let hostList = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                guard let user = String(userInfo[..<colon]).removingPercentEncoding,
                    let password = String(userInfo[userInfo.index(after: colon)...]).removingPercentEncoding
                else {
                    throw refuse("has a malformed user or password (bad percent-encoding)")
                }
                self.user = user
                self.password = password
            } else {
                guard let user = String(userInfo).removingPercentEncoding else {
                    throw refuse("has a malformed user (bad percent-encoding)")
                }
                self.user = user
                self.password = nil
            }
            guard !user.isEmpty else { throw refuse("names no user (postgresql://USER@HOST/DATABASE)") }
            let elements = hostList.split(separator: ",", omittingEmptySubsequences: false)
            guard elements.count <= Self.maximumHosts else {
                throw refuse("names \(elements.count) hosts; at most \(Self.maximumHosts)")
            }
            hosts = try elements.map { element in
                guard !element.isEmpty else {
                    throw refuse(
                        elements.count > 1
                            ? "has an empty entry in its host list (HOST1:PORT1,HOST2:PORT2)"
                            : "names no host (postgresql://USER@HOST/DATABASE)")
                }
                return try Self.host(element)
            }
            self.database = database
            tlsMode = .prefer
            connectTimeout = .seconds(10)
            targetSessionAttributes = .any
            for pair in query.split(separator: "&") where !pair.isEmpty {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(parts[0])
                let value = parts.count > 1 ? String(parts[1]) : ""
                switch name {
                case "sslmode":
                    guard let mode = TLSMode(rawValue: value) else { throw refuse("has sslmode=\(value); use disable, prefer or require") }
                    tlsMode = mode
                case "connect_timeout":
                    guard let seconds = Int(value), (1...3600).contains(seconds) else {
                        throw refuse("has connect_timeout=\(value); use whole seconds from 1 to 3600")
                    }
                    connectTimeout = .seconds(seconds)
                case "target_session_attrs":
                    guard let attributes = TargetSessionAttributes(rawValue: value) else {
                        throw refuse("has target_session_attrs=\(value); use any, read-write, primary or prefer-standby")
                    }
                    targetSessionAttributes = attributes
                default:
                    throw refuse(
                        "has the parameter '\(name)', which this store does not understand (sslmode, connect_timeout, target_session_attrs)"
                    )
                }
            }
        }

        /// One entry of the host list: `HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT`.
        private static func host(_ text: Substring) throws -> Host {
            var name = text
            var port = 5432
            if name.hasPrefix("[") {
                guard let close = name.firstIndex(of: "]") else {
                    throw LockboxError.invalidArgument("the PostgreSQL URL has an unclosed [IPv6 address]")
                }
                let after = name[name.index(after: close)...]
                if after.hasPrefix(":") {
                    port = try Self.port(after.dropFirst())
                } else if !after.isEmpty {
                    throw LockboxError.invalidArgument("the PostgreSQL URL has text after its [IPv6 address]")
                }
                name = name[name.index(after: name.startIndex)..<close]
            } else if let colon = name.lastIndex(of: ":") {
                port = try Self.port(name[name.index(after: colon)...])
                name = name[..<colon]
            }
            guard !name.isEmpty else {
                throw LockboxError.invalidArgument("the PostgreSQL URL has a host list entry with no host name ('\(text)')")
            }
            return Host(String(name), port: port)
        }

        private static func port(_ text: Substring) throws -> Int {
            guard let port = Int(text), (1...65535).contains(port) else {
                throw LockboxError.invalidArgument("the PostgreSQL URL has port '\(text)'; use 1 to 65535")
            }
            return port
        }

        /// The URL in the file at `path`: its first line. The file must be a regular file that only
        /// its owner may read (it holds a password): anything else is refused before it is read.
        public static func read(fromFile path: FilePath) throws -> PostgresConnectionURL {
            let fd: FileDescriptor
            do {
                fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking, .noFollow])
            } catch let error as Errno {
                if error == .noSuchFileOrDirectory { throw LockboxError.invalidArgument("no PostgreSQL URL file at \(path.string)") }
                if error == .tooManySymbolicLinkLevels {
                    throw LockboxError.invalidArgument("\(path.string) is a symbolic link; give the PostgreSQL URL file itself")
                }
                throw LockboxError.io(operation: "opening the PostgreSQL URL file", path: path.string, errno: error)
            } catch {
                throw LockboxError.io(operation: "opening the PostgreSQL URL file", path: path.string, errno: .ioError)
            }
            let text: String = try fd.closeAfter {
                var status = stat()
                guard fstat(fd.rawValue, &status) == 0 else {
                    throw LockboxError.io(operation: "checking the PostgreSQL URL file", path: path.string, errno: Errno(rawValue: errno))
                }
                guard status.st_mode & S_IFMT == S_IFREG else {
                    throw LockboxError.invalidArgument("\(path.string) is not a regular file, so it cannot hold a PostgreSQL URL")
                }
                guard status.st_mode & 0o077 == 0 else {
                    throw LockboxError.insecurePermissions(
                        path: path.string,
                        detail: String(format: "mode %04o lets others read the database password; use chmod 600", status.st_mode & 0o7777))
                }
                guard status.st_size <= 4096 else {
                    throw LockboxError.invalidArgument("\(path.string) is \(status.st_size) bytes; a PostgreSQL URL file holds one line")
                }
                var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
                let count = try bytes.withUnsafeMutableBytes { buffer in
                    do { return try fd.read(into: buffer) } catch {
                        throw LockboxError.io(
                            operation: "reading the PostgreSQL URL file", path: path.string, errno: (error as? Errno) ?? .ioError)
                    }
                }
                defer { for index in bytes.indices { bytes[index] = 0 } }
                guard let text = String(validating: bytes[..<count], as: UTF8.self) else {
                    throw LockboxError.invalidArgument("\(path.string) is not UTF-8 text, so it cannot hold a PostgreSQL URL")
                }
                return text
            }
            let firstLine = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            return try PostgresConnectionURL(parsing: firstLine)
        }

        /// The URL in the environment variable `name` (which the caller chooses; none is read by
        /// default). Throws ``LockboxError/invalidArgument(_:)`` when it is unset or empty.
        public static func read(fromEnvironment name: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws
            -> PostgresConnectionURL
        {
            guard let value = environment[name], !value.isEmpty else {
                throw LockboxError.invalidArgument("the environment variable \(name) holds no PostgreSQL URL")
            }
            return try PostgresConnectionURL(parsing: value)
        }
    }
#endif
