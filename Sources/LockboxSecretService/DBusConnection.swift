import Lockbox

#if canImport(Glibc)
    import Glibc
#endif

/// Why a call on the session bus failed.
package enum DBusConnectionError: Error, CustomStringConvertible {
    /// No session bus to connect to: no usable address, the socket refused the connection, or the
    /// bus refused to authenticate Lockbox.
    case noBus(String)
    /// The deadline passed before the reply came.
    case timedOut
    /// The bus closed the connection, or reading or writing it failed.
    case closed(String)
    /// The bus sent bytes that are not a valid message (the connection cannot be read further).
    case malformed(DBusWireError)
    /// The peer answered with a D-Bus error.
    case remote(name: String, message: String)
    /// The peer answered with values of another signature than the method's.
    case unexpectedReply(String)

    /// The D-Bus error name, for ``remote(name:message:)``.
    package var remoteName: String? {
        if case .remote(let name, _) = self { return name }
        return nil
    }

    package var description: String {
        switch self {
        case .noBus(let detail), .closed(let detail), .unexpectedReply(let detail): detail
        case .timedOut: "no reply before the deadline"
        case .malformed(let error): error.description
        case .remote(let name, let message): message.isEmpty ? name : message
        }
    }
}

/// A connection of Lockbox's own to the D-Bus session bus: a Unix socket, `EXTERNAL`
/// authentication, `Hello`, then method calls that wait for their reply under a ``Deadline``.
/// No GIO, no thread, no match rules: messages that are not the awaited reply (the bus's
/// `NameAcquired` signal, say) are read and dropped.
///
/// The address is `DBUS_SESSION_BUS_ADDRESS`'s first `unix:path=` or `unix:abstract=` entry that
/// accepts a connection, or `$XDG_RUNTIME_DIR/bus` when the variable is not set (as GIO and
/// sd-bus do). Other transports (`tcp:`, `autolaunch:`) are refused with
/// ``DBusConnectionError/noBus(_:)``, which names them.
///
/// Not thread-safe: ``SecretServiceClient`` serialises its use.
package final class DBusConnection {
    private let socket: Int32
    private var nextSerial: UInt32 = 1
    /// Bytes read and not yet consumed: `buffer[consumed...]`.
    private var buffer: [UInt8] = []
    private var consumed = 0
    /// The name the bus gave this connection (`Hello`'s reply).
    package private(set) var uniqueName = ""

    /// The process environment, where the session bus's address is read by default.
    package static let processEnvironment: @Sendable (String) -> String? = { getenv($0).map { String(cString: $0) } }

    /// Connects, authenticates and says `Hello`, all before `deadline`; the address comes from
    /// `environment`.
    package init(deadline: Deadline, environment: (String) -> String? = DBusConnection.processEnvironment) throws(DBusConnectionError) {
        let targets = try Self.targets(environment: environment)
        var failures: [String] = []
        var connected: Int32 = -1
        for target in targets {
            let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw .noBus("could not make a socket: \(Self.errorText(errno))") }
            // A bus whose listen queue is full makes connect wait; the send timeout bounds that
            // wait (Linux's unix_stream_connect), and the calls below never block (MSG_DONTWAIT).
            var limit = timeval(
                tv_sec: Int(deadline.remainingMilliseconds / 1000), tv_usec: Int(deadline.remainingMilliseconds % 1000) * 1000)
            if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1 }
            _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            if Self.connect(descriptor, to: target) {
                connected = descriptor
                break
            }
            failures.append("\(target.description): \(Self.errorText(errno))")
            close(descriptor)
        }
        guard connected >= 0 else { throw .noBus("could not connect to the session bus (\(failures.joined(separator: "; ")))") }
        socket = connected
        try authenticate(deadline: deadline)
        let reply = try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "Hello", body: [], replySignature: "s", deadline: deadline)
        uniqueName = reply.first?.text ?? ""
    }

    deinit { close(socket) }

    /// Calls `member` and returns the reply's values, which have the signature `replySignature`
    /// (anything else is ``DBusConnectionError/unexpectedReply(_:)``); a D-Bus error reply is
    /// ``DBusConnectionError/remote(name:message:)``.
    package func call(
        destination: String, path: String, interface: String, member: String, body: [DBusValue], replySignature: String,
        deadline: Deadline
    ) throws(DBusConnectionError) -> [DBusValue] {
        let serial = nextSerial
        nextSerial = nextSerial == UInt32.max ? 1 : nextSerial + 1
        let bytes: [UInt8]
        do {
            bytes = try DBusMessage.methodCall(
                serial: serial, destination: destination, path: path, interface: interface, member: member,
                body: body
            ).encoded()
        } catch {
            throw .malformed(error)
        }
        try send(bytes, deadline: deadline)
        while true {
            guard !deadline.expired else { throw .timedOut }
            let (header, bodyBytes) = try receiveReply(to: serial, deadline: deadline)
            guard header.message.kind == .methodReturn else {
                // An error's text, when it has one (a leading string), and nothing else of it.
                var text = ""
                if header.signature.hasPrefix("s"), bodyBytes.count <= 65536,
                    let first = try? DBusMessage.decodeBody(bodyBytes, signature: header.signature, bigEndian: header.frame.bigEndian).first
                {
                    text = first.text ?? ""
                }
                throw .remote(name: Self.printable(header.message.errorName ?? ""), message: Self.printable(text))
            }
            guard header.signature == replySignature else {
                throw .unexpectedReply(
                    "\(interface).\(member) answered with values of type '\(Self.printable(header.signature))', not '\(replySignature)'")
            }
            do {
                return try DBusMessage.decodeBody(bodyBytes, signature: header.signature, bigEndian: header.frame.bigEndian)
            } catch {
                throw .malformed(error)
            }
        }
    }

    /// The most a reply Lockbox waits for may be: secrets are at most 16 MiB, so a reply with
    /// one, encrypted, is well under this.
    static let maximumReplyLength = 1 << 25

    /// `text` from a peer with its control characters (terminal escapes among them) replaced,
    /// for error messages.
    package static func printable(_ text: String) -> String {
        let limited = text.unicodeScalars.prefix(1000)
        return String(String.UnicodeScalarView(limited.map { $0.properties.generalCategory == .control ? "\u{FFFD}" : $0 }))
    }

    // MARK: Address

    /// Where a session bus may listen.
    package enum Target: Equatable, CustomStringConvertible {
        case path(String)
        case abstract(String)
        package var description: String {
            switch self {
            case .path(let path): "unix:path=\(path)"
            case .abstract(let name): "unix:abstract=\(name)"
            }
        }
    }

    /// The sockets to try, in order.
    package static func targets(environment: (String) -> String?) throws(DBusConnectionError) -> [Target] {
        guard let address = environment("DBUS_SESSION_BUS_ADDRESS"), !address.isEmpty else {
            guard let runtime = environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") else {
                throw .noBus("DBUS_SESSION_BUS_ADDRESS is not set, nor XDG_RUNTIME_DIR (where a session bus's socket would be)")
            }
            let path = runtime + "/bus"
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else {
                throw .noBus("DBUS_SESSION_BUS_ADDRESS is not set and \(path) is not a socket")
            }
            return [.path(path)]
        }
        let targets = parse(address: address)
        guard !targets.isEmpty else {
            throw .noBus("DBUS_SESSION_BUS_ADDRESS names no unix:path= or unix:abstract= address, the kinds Lockbox connects to")
        }
        return targets
    }

    /// The `unix:path=` and `unix:abstract=` entries of a D-Bus address list (entries split by
    /// `;`, keys by `,`, values %-escaped); other entries are skipped.
    package static func parse(address: String) -> [Target] {
        address.split(separator: ";").compactMap { entry -> Target? in
            guard let colon = entry.firstIndex(of: ":"), entry[..<colon] == "unix" else { return nil }
            var keys: [Substring: String] = [:]
            for pair in entry[entry.index(after: colon)...].split(separator: ",") {
                guard let equals = pair.firstIndex(of: "="), let value = unescape(pair[pair.index(after: equals)...]) else { return nil }
                keys[pair[..<equals]] = value
            }
            if let path = keys["path"], !path.isEmpty { return .path(path) }
            if let name = keys["abstract"], !name.isEmpty { return .abstract(name) }
            return nil
        }
    }

    /// A value with its `%XX` escapes decoded; `nil` if an escape is malformed or the result is
    /// not UTF-8 or holds a NUL.
    private static func unescape(_ value: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = value.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next()?.hexDigitValue, let low = iterator.next()?.hexDigitValue else { return nil }
            bytes.append(high << 4 | low)
        }
        guard !bytes.contains(0) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func connect(_ descriptor: Int32, to target: Target) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name: [UInt8]
        switch target {
        case .path(let path): name = Array(path.utf8)
        case .abstract(let abstract): name = [0] + Array(abstract.utf8)
        }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs room for its NUL; an abstract name is exactly its bytes.
        guard name.count < capacity || (name.first == 0 && name.count <= capacity) else {
            errno = ENAMETOOLONG
            return false
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let length =
            MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path).map { $0 + name.count + (name.first == 0 ? 0 : 1) }
            ?? MemoryLayout<sockaddr_un>.size
        while true {
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(length)) }
            }
            if result == 0 || errno == EISCONN { return true }
            if errno != EINTR { return false }
        }
    }

    // MARK: Authentication

    /// `EXTERNAL` authentication with this process's user ID (the bus checks it against the
    /// socket's peer credentials), then `BEGIN`.
    private func authenticate(deadline: Deadline) throws(DBusConnectionError) {
        let uid = String(getuid())
        try send([0] + Array("AUTH EXTERNAL \(Array(uid.utf8).hexString)\r\n".utf8), deadline: deadline)
        let line = try readLine(deadline: deadline)
        guard line.hasPrefix("OK ") else {
            if line.hasPrefix("REJECTED") {
                throw .noBus("the session bus refused Lockbox's EXTERNAL authentication for user \(uid) (it offers: \(line.dropFirst(8)))")
            }
            throw .noBus("the session bus answered authentication with '\(line.prefix(80))'")
        }
        try send(Array("BEGIN\r\n".utf8), deadline: deadline)
    }

    /// One line of the authentication exchange, without its `\r\n`; at most 16 KiB.
    private func readLine(deadline: Deadline) throws(DBusConnectionError) -> String {
        while true {
            if let end = buffer[consumed...].firstIndex(of: UInt8(ascii: "\n")) {
                var line = buffer[consumed..<end]
                if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                consumed = end + 1
                return String(decoding: line, as: UTF8.self)
            }
            guard buffer.count - consumed < 16384 else { throw .noBus("the session bus sent an authentication line longer than 16 KiB") }
            try fill(deadline: deadline)
        }
    }

    // MARK: Bytes

    /// The header and body bytes of the method return or error replying to `serial`. Every
    /// other message is skipped unread past its header, as are messages with a header Lockbox
    /// cannot read or over 64 KiB (no reply has one) and messages of types the specification
    /// does not define: another program on the bus may send anything to this connection, and
    /// none of it may cost more than reading past it. Only bytes that break the stream's framing
    /// fail the call (``DBusConnectionError/malformed(_:)``), and a reply over
    /// ``maximumReplyLength``.
    private func receiveReply(to serial: UInt32, deadline: Deadline) throws(DBusConnectionError) -> (DBusMessage.Header, [UInt8]) {
        while true {
            guard !deadline.expired else { throw .timedOut }
            try fill(atLeast: 16, deadline: deadline)
            let frame: DBusMessage.Frame
            do {
                guard let framed = try DBusMessage.frame(startingWith: buffer[consumed...]) else { continue }
                frame = framed
            } catch {
                throw .malformed(error)
            }
            guard frame.headerLength <= 65536 + 16 else {
                try skip(frame.length, deadline: deadline)
                continue
            }
            try fill(atLeast: frame.headerLength, deadline: deadline)
            guard let header = try? DBusMessage.decodeHeader(buffer[consumed..<consumed + frame.headerLength]),
                header.message.replySerial == serial, header.message.kind == .methodReturn || header.message.kind == .error
            else {
                try skip(frame.length, deadline: deadline)
                continue
            }
            guard frame.length <= Self.maximumReplyLength else {
                throw .malformed(DBusWireError("a reply of \(frame.length) bytes, over the \(Self.maximumReplyLength) Lockbox accepts"))
            }
            try fill(atLeast: frame.length, deadline: deadline)
            let body = Array(buffer[consumed + frame.headerLength..<consumed + frame.length])
            consume(frame.length)
            return (header, body)
        }
    }

    /// Reads until `count` unconsumed bytes are buffered.
    private func fill(atLeast count: Int, deadline: Deadline) throws(DBusConnectionError) {
        while buffer.count - consumed < count { try fill(deadline: deadline) }
    }

    /// Consumes `count` bytes, reading and dropping those not yet buffered without keeping them.
    private func skip(_ count: Int, deadline: Deadline) throws(DBusConnectionError) {
        var left = count
        while true {
            let available = min(left, buffer.count - consumed)
            consume(available)
            left -= available
            if left == 0 { return }
            try fill(deadline: deadline)
        }
    }

    private func consume(_ count: Int) {
        consumed += count
        if consumed == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
            consumed = 0
        }
    }

    /// Reads what the socket has (at least one byte), waiting no later than `deadline`.
    private func fill(deadline: Deadline) throws(DBusConnectionError) {
        if consumed > 0 {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        try wait(for: Int16(POLLIN), deadline: deadline)
        // Received into uninitialised memory: only the bytes the socket has are written (a
        // zero-filled 64 KiB chunk per read was most of a `get`'s memset and fresh pages).
        var count = 0
        var failure: Int32 = 0
        let chunk = [UInt8](unsafeUninitializedCapacity: 65536) { bytes, initialized in
            count = recv(socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT))
            failure = count < 0 ? errno : 0
            initialized = max(count, 0)
        }
        if count > 0 {
            buffer.append(contentsOf: chunk)
        } else if count == 0 {
            throw .closed("the session bus closed the connection")
        } else if failure != EAGAIN && failure != EINTR && failure != EWOULDBLOCK {
            throw .closed("reading from the session bus failed: \(Self.errorText(failure))")
        }
    }

    private func send(_ bytes: [UInt8], deadline: Deadline) throws(DBusConnectionError) {
        var sent = 0
        while sent < bytes.count {
            try wait(for: Int16(POLLOUT), deadline: deadline)
            let count = bytes.withUnsafeBytes { buffer in
                Glibc.send(socket, buffer.baseAddress.map { $0 + sent }, buffer.count - sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if count > 0 {
                sent += count
            } else if count < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK {
                throw .closed("writing to the session bus failed: \(Self.errorText(errno))")
            }
        }
    }

    /// Waits until the socket is ready for `events`, or throws ``DBusConnectionError/timedOut``
    /// at the deadline; a hung-up socket counts as ready (the read or write then says why).
    private func wait(for events: Int16, deadline: Deadline) throws(DBusConnectionError) {
        while true {
            let milliseconds = deadline.remainingMilliseconds
            guard milliseconds > 0 else { throw .timedOut }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw .closed("waiting on the session bus failed: \(Self.errorText(errno))") }
        }
    }

    private static func errorText(_ code: Int32) -> String {
        strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}
