import Foundation
import LockboxSecretService
import Testing

@testable import LockboxTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Lockbox's own session-bus connection (DBusConnection.swift): addresses, the real bus the test
/// command starts, and fake buses that refuse, stall, hang up or send garbage.
@Suite("D-Bus connection")
struct DBusConnectionTests {
    @Test("addresses: unix:path= and unix:abstract= in order, escapes decoded, other transports skipped")
    func addresses() {
        #expect(DBusConnection.parse(address: "unix:path=/run/user/1000/bus") == [.path("/run/user/1000/bus")])
        #expect(DBusConnection.parse(address: "unix:abstract=/tmp/dbus-XYZ,guid=0123") == [.abstract("/tmp/dbus-XYZ")])
        #expect(
            DBusConnection.parse(address: "tcp:host=localhost,port=1;unix:path=/a%20b;unix:abstract=c")
                == [.path("/a b"), .abstract("c")])
        #expect(DBusConnection.parse(address: "unix:path=/bad%2") == [])
        #expect(DBusConnection.parse(address: "unix:path=/nul%00") == [])
        #expect(DBusConnection.parse(address: "unix:tmpdir=/tmp") == [])
        #expect(DBusConnection.parse(address: "") == [])
    }

    @Test("without DBUS_SESSION_BUS_ADDRESS, $XDG_RUNTIME_DIR/bus if it is a socket, else a clear error")
    func runtimeDirectoryBus() throws {
        let folder = try TemporaryFolder()
        let runtime = folder.path.string
        func targets(_ variables: [String: String]) throws(DBusConnectionError) -> [DBusConnection.Target] {
            try DBusConnection.targets { variables[$0] }
        }
        #expect(throws: DBusConnectionError.self) { try targets([:]) }
        #expect(throws: DBusConnectionError.self) { try targets(["XDG_RUNTIME_DIR": runtime]) }
        #expect(FileManager.default.createFile(atPath: runtime + "/bus", contents: Data()))
        #expect(throws: DBusConnectionError.self, "a regular file is not a bus") { try targets(["XDG_RUNTIME_DIR": runtime]) }
        try FileManager.default.removeItem(atPath: runtime + "/bus")
        let server = try FakeBus(path: runtime + "/bus") { _ in }
        defer { server.stop() }
        #expect(try targets(["XDG_RUNTIME_DIR": runtime]) == [.path(runtime + "/bus")])
        #expect(try targets(["XDG_RUNTIME_DIR": runtime, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]) == [.path("/x")])
        #expect(throws: DBusConnectionError.self) { try targets(["DBUS_SESSION_BUS_ADDRESS": "tcp:host=localhost,port=1"]) }
    }

    @Test("the session bus the test command starts: Hello, calls, errors, a reply of the wrong type", .enabled(if: keyringAvailable))
    func realBus() throws {
        let connection = try DBusConnection(deadline: Deadline(seconds: 5)) { keyringEnvironment[$0] }
        #expect(connection.uniqueName.hasPrefix(":"))
        func bus(_ member: String, _ signature: String, _ body: [DBusValue] = []) throws(DBusConnectionError) -> [DBusValue] {
            try connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: member, body: body, replySignature: signature, deadline: Deadline(seconds: 5))
        }
        // The bus's NameAcquired signal came after Hello's reply and is skipped by these calls.
        let id = try bus("GetId", "s")
        #expect((id.first?.text ?? "").count == 32)
        #expect(try bus("GetNameOwner", "s", [.string(connection.uniqueName)]) == [.string(connection.uniqueName)])
        #expect(try bus("NameHasOwner", "b", [.string("org.freedesktop.secrets")]) == [.boolean(true)])
        do throws(DBusConnectionError) {
            _ = try bus("GetId", "u")
            Issue.record("a reply of type s was taken for u")
        } catch .unexpectedReply(let detail) {
            #expect(detail.contains("'s'"))
        } catch {
            Issue.record("wrong error \(error)")
        }
        do throws(DBusConnectionError) {
            _ = try bus("NoSuchMethod", "")
            Issue.record("an unknown method answered")
        } catch {
            #expect(error.remoteName == "org.freedesktop.DBus.Error.UnknownMethod", "\(error)")
        }
        // The connection is still usable after the errors.
        #expect(try bus("GetId", "s") == id)
        // Outside the environment the test command sets: no DBUS_SESSION_BUS_ADDRESS, the same bus
        // found as $XDG_RUNTIME_DIR/bus (the test command's runtime folder holds it).
        let runtime = try #require(keyringEnvironment["XDG_RUNTIME_DIR"])
        #expect(keyringEnvironment["DBUS_SESSION_BUS_ADDRESS"]?.hasPrefix("unix:path=\(runtime)/bus") == true)
        let other = try DBusConnection(deadline: Deadline(seconds: 5)) { ["XDG_RUNTIME_DIR": runtime][$0] }
        #expect(other.uniqueName.hasPrefix(":") && other.uniqueName != connection.uniqueName)
    }

    @Test("a bus that never answers fails at the deadline, not later")
    func stalledBus() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let server = try FakeBus(path: path) { client in
            FakeBus.drain(client)  // reads, never answers
        }
        defer { server.stop() }
        let started = Date()
        #expect(throws: DBusConnectionError.self) {
            try DBusConnection(deadline: Deadline(seconds: 0.3), environment: FakeBus.environment(path))
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.25 && elapsed < 3, "\(elapsed) s")
    }

    @Test(
        "a bus that refuses authentication, hangs up, or sends garbage is a clear error",
        arguments: [
            ("REJECTED EXTERNAL\r\n", "refused"),
            ("", "closed"),
            ("OK 0123456789abcdef0123456789abcdef\r\nxxxxxxxxxxxxxxxxxxxxxxxx", "malformed"),
            ("OK 0123456789abcdef0123456789abcdef\r\n", "closed"),
        ])
    func misbehavingBus(_ answer: String, _ expected: String) throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let server = try FakeBus(path: path) { client in
            var buffer = [UInt8](repeating: 0, count: 256)
            _ = read(client, &buffer, buffer.count)  // the NUL and AUTH line
            _ = Array(answer.utf8).withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            usleep(50_000)  // then hang up
        }
        defer { server.stop() }
        do throws(DBusConnectionError) {
            _ = try DBusConnection(deadline: Deadline(seconds: 5), environment: FakeBus.environment(path))
            Issue.record("connected to a bus that answered '\(answer)'")
        } catch {
            switch (expected, error) {
            case ("refused", .noBus(let detail)): #expect(detail.contains("refused"), "\(detail)")
            case ("closed", .closed): break
            case ("malformed", .malformed): break
            default: Issue.record("expected \(expected), got \(error)")
            }
        }
    }

    /// What another program on the bus may send this connection before its reply: a signal, a
    /// message of a type the specification does not define, a reply to another call whose body
    /// does not read, and a large one. All are skipped; the reply after them is taken.
    @Test("messages that are not the reply are skipped, however large or damaged")
    func unrelatedMessagesSkipped() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let server = try FakeBus(path: path) { client in
            guard FakeBus.handshake(client) else { return }
            var unknownType =
                (try? DBusMessage(kind: .signal, serial: 90, path: "/a", interface: "a.b", member: "C", body: [.uint32(1)]).encoded()) ?? []
            unknownType[1] = 5
            var otherSerial =
                (try? DBusMessage(kind: .methodReturn, serial: 92, replySerial: 77, body: [.string("not yours")]).encoded()) ?? []
            otherSerial[otherSerial.count - 2] = 0xFF  // not UTF-8: would fail if it were read
            let large =
                (try? DBusMessage(
                    kind: .signal, serial: 93, path: "/a", interface: "a.b", member: "Big",
                    body: [.bytes([UInt8](repeating: 7, count: 8 << 20))]
                ).encoded()) ?? []
            let signal =
                (try? DBusMessage(
                    kind: .signal, serial: 94, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "NameAcquired", body: [.string(":1.5")]
                ).encoded()) ?? []
            let hello = (try? DBusMessage(kind: .methodReturn, serial: 95, replySerial: 1, body: [.string(":1.5")]).encoded()) ?? []
            for message in [unknownType, otherSerial, large, signal, hello] { FakeBus.write(client, message) }
            FakeBus.drain(client)
        }
        defer { server.stop() }
        let connection = try DBusConnection(deadline: Deadline(seconds: 10), environment: FakeBus.environment(path))
        #expect(connection.uniqueName == ":1.5")
    }

    @Test("a reply whose body does not read fails the call as malformed; its error text loses control characters")
    func damagedReply() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let server = try FakeBus(path: path) { client in
            guard FakeBus.handshake(client) else { return }
            var reply = (try? DBusMessage(kind: .methodReturn, serial: 2, replySerial: 1, body: [.string("ok")]).encoded()) ?? []
            reply[reply.count - 2] = 0xFF
            FakeBus.write(client, reply)
            FakeBus.drain(client)
        }
        defer { server.stop() }
        do throws(DBusConnectionError) {
            _ = try DBusConnection(deadline: Deadline(seconds: 5), environment: FakeBus.environment(path))
            Issue.record("a damaged reply was taken")
        } catch .malformed {
        } catch {
            Issue.record("wrong error \(error)")
        }
        #expect(DBusConnection.printable("a\u{1B}[31mred\u{7}") == "a\u{FFFD}[31mred\u{FFFD}")
    }

    @Test("a reply over the 32 MiB Lockbox accepts fails the call as malformed, before it is read")
    func oversizedReply() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let server = try FakeBus(path: path) { client in
            guard FakeBus.handshake(client) else { return }
            let reply =
                (try? DBusMessage(kind: .methodReturn, serial: 2, replySerial: 1, body: [.bytes([UInt8](repeating: 1, count: 33 << 20))])
                    .encoded()) ?? []
            FakeBus.write(client, reply)
            FakeBus.drain(client)
        }
        defer { server.stop() }
        do throws(DBusConnectionError) {
            _ = try DBusConnection(deadline: Deadline(seconds: 30), environment: FakeBus.environment(path))
            Issue.record("a 33 MiB reply was taken")
        } catch .malformed(let error) {
            #expect(error.reason.contains("over the"), "\(error)")
        } catch {
            Issue.record("wrong error \(error)")
        }
    }

    @Test("a bus whose listen queue is full fails at the deadline, not later")
    func fullListenQueue() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("bus").string
        let listener = try FakeBus.listeningSocket(path: path, backlog: 0)
        defer { close(listener) }
        var address = FakeBus.socketAddress(path)
        // Fill the queue: non-blocking connects until one is refused for want of room.
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<8 {
            let filler = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            fillers.append(filler)
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if result != 0 { break }
        }
        let started = Date()
        #expect(throws: DBusConnectionError.self) {
            try DBusConnection(deadline: Deadline(seconds: 0.3), environment: FakeBus.environment(path))
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.25 && elapsed < 3, "\(elapsed) s")
    }

    @Test("no socket at the address is a no-bus error naming it")
    func nothingListening() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("none").string
        do throws(DBusConnectionError) {
            _ = try DBusConnection(deadline: Deadline(seconds: 1), environment: FakeBus.environment(path))
            Issue.record("connected to nothing")
        } catch .noBus(let detail) {
            #expect(detail.contains(path))
        } catch {
            Issue.record("wrong error \(error)")
        }
    }
}

/// A Unix socket server on `path` that runs `handle` on each connection it accepts, on its own
/// thread, until stopped.
final class FakeBus: @unchecked Sendable {
    private let listener: Int32
    private let path: String

    init(path: String, handle: @escaping @Sendable (Int32) -> Void) throws {
        self.path = path
        listener = try Self.listeningSocket(path: path, backlog: 4)
        // The thread owns the listening socket and closes it itself once accept fails (after
        // stop's shutdown): were stop to close it, its number could be reused by another test's
        // socket before this thread's next accept, which would then serve that test's client.
        let descriptor = listener
        Thread.detachNewThread {
            while true {
                let client = accept(descriptor, nil, nil)
                guard client >= 0 else { break }
                handle(client)
                close(client)
            }
            close(descriptor)
        }
    }

    /// `sockaddr_un` for the socket file `path`.
    static func socketAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        return address
    }

    /// A Unix stream socket bound to `path` and listening with `backlog`.
    static func listeningSocket(path: String, backlog: Int32) throws -> Int32 {
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = socketAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, backlog) == 0 else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        return listener
    }

    /// An environment whose `DBUS_SESSION_BUS_ADDRESS` is the socket at `path`, and nothing else.
    static func environment(_ path: String) -> @Sendable (String) -> String? {
        { $0 == "DBUS_SESSION_BUS_ADDRESS" ? "unix:path=\(path)" : nil }
    }

    /// Reads from `client` until it hangs up, answering nothing.
    static func drain(_ client: Int32) {
        var byte: UInt8 = 0
        while read(client, &byte, 1) == 1 {}
    }

    /// The server's side of authentication and Hello: reads the NUL and AUTH line, answers OK,
    /// then reads BEGIN and the Hello call. False if the client went away.
    static func handshake(_ client: Int32) -> Bool {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        func readMore() -> Bool {
            let count = read(client, &chunk, chunk.count)
            guard count > 0 else { return false }
            received += chunk[0..<count]
            return true
        }
        while !received.contains(UInt8(ascii: "\n")) { guard readMore() else { return false } }
        write(client, Array("OK 0123456789abcdef0123456789abcdef\r\n".utf8))
        received = []
        let begin = Array("BEGIN\r\n".utf8)
        while true {
            if received.count >= begin.count, Array(received[0..<begin.count]) == begin,
                let length = try? DBusMessage.length(startingWith: received[begin.count...]), received.count - begin.count >= length
            {
                return true
            }
            guard readMore() else { return false }
        }
    }

    /// Writes `bytes` to `client`, stopping if it hung up (no SIGPIPE: a client that refuses a
    /// message closes before reading it all).
    static func write(_ client: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(client, $0.baseAddress.map { $0 + sent }, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        unlink(path)
    }
}
