import ArgumentParser
import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `lockbox docker-credential store|get|erase|list|version`: the docker-credential-helpers
/// protocol (what `docker login`, podman, skopeo and buildah run as `docker-credential-NAME`)
/// over the store this invocation opens, so registry passwords stay out of `config.json` and
/// `auth.json`.
///
/// The credential of a registry is the item with service `docker:` + the server URL exactly as
/// the client sends it (`docker:https://index.docker.io/v1/`, `docker:registry.example:5000`)
/// and account = the user name; one per server.
struct DockerCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "Be a container registry's credential helper (docker, podman, skopeo): store, get, erase or list.",
        discussion: """
            Set up: link docker-credential-lockbox to lockbox on PATH (`make install` does), then name \
            it per registry in the client's auth file, "credHelpers": {"registry.example:5000": \
            "lockbox"} (~/.docker/config.json for docker; containers-auth.json(5), e.g. \
            $XDG_RUNTIME_DIR/containers/auth.json or --authfile, for podman, skopeo and buildah), or \
            for every registry with docker's "credsStore": "lockbox". The client then keeps no \
            password in that file.

            The protocol: `store` reads {"ServerURL": …, "Username": …, "Secret": …} on standard input; \
            `get` reads a server URL and prints that JSON object, or prints "credentials not found in \
            native keychain" and exits 1; `erase` reads a server URL and removes its credential (the \
            same message and exit 1 when there is none); `list` prints a JSON object of server URL to \
            user name; `version` prints the helper's version. Failures of the protocol print their \
            message on standard output with exit 1, as clients expect; failures of the vault keep \
            lockbox's message (on standard error, and on standard output for the client to show) \
            and exit code.

            The credential of a server is the item with service docker:SERVER_URL (the URL exactly as \
            the client sends it, e.g. docker:https://index.docker.io/v1/ or docker:localhost:5000) \
            and account USERNAME, kind password; storing one replaces any other user's credential for \
            that server. One stored with `lockbox set --protected` stays protected.

            Unlocking without a prompt: open a window (`lockbox unlock`), or set LOCKBOX_KEY_FILE in \
            the client's environment; on a desktop the Secret Service needs nothing.

            Example: lockbox docker-credential list
            Example, one server's credential as a client asks for it: lockbox docker-credential get <<< localhost:5000
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The action the client names: store, get, erase, list or version.") var action: String

    /// The actions of the protocol.
    enum Action: String {
        case store, get, erase, list, version
    }

    /// The name under which clients find the helper for `"credsStore": "lockbox"`.
    static let helperProgramName = "docker-credential-lockbox"
    /// Services of registry credentials start with this.
    static let servicePrefix = "docker:"
    /// What the protocol prints (on standard output, with exit 1) when a server has no credential;
    /// clients compare it exactly.
    static let notFoundMessage = "credentials not found in native keychain"
    /// The longest input read: a secret of the largest size, JSON-escaped, plus the other fields.
    static let inputLimit = ItemLimits.maxSecretBytes * 6 + 64 * 1024

    func run() throws {
        guard let action = Action(rawValue: action) else {
            throw ProtocolFailure(message: "\(Self.helperProgramName): unknown action: \(action)")
        }
        Trace.log("docker-credential \(action.rawValue)")
        do {
            switch action {
            case .store: try store()
            case .get: try get()
            case .erase: try erase()
            case .list: try list()
            case .version: print("\(Self.helperProgramName) (lockbox) \(LockboxCommand.version)")
            }
        } catch let error as ProtocolFailure {
            throw error
        } catch let error as any LockboxCodedError {
            // The client shows what the helper printed on standard output; lockbox's own report
            // still goes to standard error with its exit code.
            let text = "lockbox: error[\(error.code)]: " + ErrorTable.message(for: RecordedSecretService.translating(error)) + "\n"
            _ = try? FileDescriptor.standardOutput.writeAll(text.utf8)
            throw error
        }
    }

    /// The server URL the client wrote on standard input, without surrounding white space.
    private func readServerURL() throws -> String {
        let bytes = try SecretInput.read(
            from: .standardInput, limit: 64 * 1024, stopAtNewline: false, what: "server URL",
            dropTrailingNewline: false)
        let text = (bytes.stringValue() ?? "").unicodeScalars
        let url = String(
            String.UnicodeScalarView(text.drop { $0.properties.isWhitespace }.reversed().drop { $0.properties.isWhitespace }.reversed()))
        guard !url.isEmpty else { throw ProtocolFailure(message: "no credentials server URL") }
        return url
    }

    private func store() throws {
        let input = try SecretInput.read(
            from: .standardInput, limit: Self.inputLimit, stopAtNewline: false, what: "credential",
            dropTrailingNewline: false)
        let fields: [String: SecretBytes]
        do {
            fields = try FlatJSONObject.parse(input)
        } catch let error as FlatJSONObject.Malformed {
            throw ProtocolFailure(message: "the credential on standard input is not a JSON object of strings: \(error.reason)")
        }
        guard let serverURL = fields["ServerURL"]?.stringValue(), !serverURL.isEmpty else {
            throw ProtocolFailure(message: "no credentials server URL")
        }
        guard let username = fields["Username"]?.stringValue(), !username.isEmpty else {
            throw ProtocolFailure(message: "no credentials username")
        }
        let secret = fields["Secret"] ?? SecretBytes(count: 0) { _ in }
        let service = Self.servicePrefix + serverURL
        let vault = try vaultOptions.storeOpener().openVault()
        let existing = try vault.metadata(service: service, account: username)
        try vault.set(
            secret, service: service, account: username, kind: .password, label: "Registry credential for \(serverURL)",
            attributes: ["server": serverURL], access: existing?.access ?? .always)
        // One credential per server: `get` answers with one user.
        for other in try vault.list(service: service) where other.key.account != username {
            _ = try vault.delete(service: service, account: other.key.account)
        }
        Trace.log("docker-credential: stored the credential of '\(serverURL)'")
    }

    private func get() throws {
        let serverURL = try readServerURL()
        let service = Self.servicePrefix + serverURL
        let vault = try vaultOptions.storeOpener().openVault()
        guard let item = try vault.list(service: service).max(by: { $0.modified < $1.modified }),
            let secret = try vault.get(service: service, account: item.key.account)
        else { throw ProtocolFailure(message: Self.notFoundMessage) }
        guard secret.isValidUTF8 else {
            throw ProtocolFailure(message: "the secret stored for \(serverURL) is not UTF-8 text, which the protocol's JSON cannot carry")
        }
        let output = FlatJSONObject.encode([
            ("ServerURL", .text(serverURL)), ("Username", .text(item.key.account)), ("Secret", .secret(secret)),
        ])
        _ = try output.withUnsafeBytes { try FileDescriptor.standardOutput.writeAll($0) }
    }

    private func erase() throws {
        let serverURL = try readServerURL()
        let service = Self.servicePrefix + serverURL
        let vault = try vaultOptions.storeOpener().openStore()
        let items = try Vault(store: vault).list(service: service)
        guard !items.isEmpty else { throw ProtocolFailure(message: Self.notFoundMessage) }
        for item in items { _ = try Vault(store: vault).delete(service: service, account: item.key.account) }
        Trace.log("docker-credential: erased the credential of '\(serverURL)'")
    }

    private func list() throws {
        var servers: [(String, FlatJSONObject.Value)] = []
        for item in try Vault(store: try vaultOptions.storeOpener().openStore()).list() where item.key.service.hasPrefix(Self.servicePrefix)
        {
            servers.append((String(item.key.service.dropFirst(Self.servicePrefix.count)), .text(item.key.account)))
        }
        let output = FlatJSONObject.encode(servers.sorted { $0.0 < $1.0 })
        _ = try output.withUnsafeBytes { try FileDescriptor.standardOutput.writeAll($0) }
    }
}

/// A failure the protocol reports on standard output with exit 1 (clients read that message,
/// e.g. ``DockerCredential/notFoundMessage``).
struct ProtocolFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }

    /// Prints the message and a newline on standard output and exits 1.
    func report() -> Never {
        Trace.log("failed: exit 1: \(message)")
        _ = try? FileDescriptor.standardOutput.writeAll((message + "\n").utf8)
        Glibc.exit(ExitStatus.failure.rawValue)
    }
}

/// A JSON object whose values are strings (or null), read and written without putting a secret
/// into a `String`: each value is decoded into ``SecretBytes``.
enum FlatJSONObject {
    /// Why input is not such an object.
    struct Malformed: Error {
        var reason: String
    }

    /// A value to write.
    enum Value {
        case text(String)
        case secret(SecretBytes)
    }

    /// The members of the object in `input`; null members are left out. A key given twice keeps its last value.
    static func parse(_ input: SecretBytes) throws -> [String: SecretBytes] {
        try input.withUnsafeBytes { bytes in
            var parser = Parser(bytes: bytes)
            return try parser.object()
        }
    }

    /// `members` as a JSON object and a newline, in a buffer that is wiped when released.
    static func encode(_ members: [(String, Value)]) -> SecretBytes {
        func writeAll(_ sink: (UInt8) -> Void) {
            sink(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { sink(UInt8(ascii: ",")) }
                writeString(Array(key.utf8)[...], sink)
                sink(UInt8(ascii: ":"))
                switch value {
                case .text(let text): writeString(Array(text.utf8)[...], sink)
                case .secret(let secret): secret.withUnsafeBytes { writeString($0, sink) }
                }
            }
            sink(UInt8(ascii: "}"))
            sink(UInt8(ascii: "\n"))
        }
        var count = 0
        writeAll { _ in count += 1 }
        return SecretBytes(count: count) { buffer in
            var offset = 0
            writeAll { byte in
                buffer[offset] = byte
                offset += 1
            }
        }
    }

    /// Writes `bytes` (UTF-8) as a JSON string: quotes, backslashes and control characters escaped.
    private static func writeString<Bytes: Collection>(_ bytes: Bytes, _ sink: (UInt8) -> Void) where Bytes.Element == UInt8 {
        let hex = Array("0123456789abcdef".utf8)
        sink(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                sink(UInt8(ascii: "\\"))
                sink(byte)
            case UInt8(ascii: "\n"):
                sink(UInt8(ascii: "\\"))
                sink(UInt8(ascii: "n"))
            case UInt8(ascii: "\t"):
                sink(UInt8(ascii: "\\"))
                sink(UInt8(ascii: "t"))
            case UInt8(ascii: "\r"):
                sink(UInt8(ascii: "\\"))
                sink(UInt8(ascii: "r"))
            case 0..<0x20:
                for escaped in Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]] { sink(escaped) }
            default:
                sink(byte)
            }
        }
        sink(UInt8(ascii: "\""))
    }

    /// A strict reader of one object of string members (RFC 8259), nothing after it but white space.
    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func object() throws -> [String: SecretBytes] {
            var members: [String: SecretBytes] = [:]
            try expect(UInt8(ascii: "{"))
            skipSpace()
            if peek() == UInt8(ascii: "}") {
                position += 1
            } else {
                while true {
                    skipSpace()
                    let key = try string()
                    guard let name = key.stringValue() else { throw Malformed(reason: "a key is not UTF-8") }
                    try expect(UInt8(ascii: ":"))
                    skipSpace()
                    if bytes[position...].starts(with: "null".utf8) {
                        position += 4
                        members[name] = nil
                    } else {
                        members[name] = try string()
                    }
                    skipSpace()
                    guard let next = peek() else { throw Malformed(reason: "the input ends inside the object") }
                    position += 1
                    if next == UInt8(ascii: "}") { break }
                    guard next == UInt8(ascii: ",") else { throw Malformed(reason: "expected ',' or '}' at byte \(position - 1)") }
                }
            }
            skipSpace()
            guard position == bytes.count else { throw Malformed(reason: "more follows the object at byte \(position)") }
            return members
        }

        private func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

        private mutating func skipSpace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        private mutating func expect(_ byte: UInt8) throws {
            skipSpace()
            guard peek() == byte else { throw Malformed(reason: "expected '\(Character(Unicode.Scalar(byte)))' at byte \(position)") }
            position += 1
        }

        /// A JSON string, decoded into secret storage (two passes: its length, then its bytes).
        private mutating func string() throws -> SecretBytes {
            try expect(UInt8(ascii: "\""))
            let start = position
            var count = 0
            try decodeString { _ in count += 1 }
            position = start
            var failure: (any Error)?
            let value = SecretBytes(count: count) { buffer in
                var offset = 0
                do {
                    try decodeString { byte in
                        buffer[offset] = byte
                        offset += 1
                    }
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            return value
        }

        /// Decodes from `position` up to and past the closing quote, handing each byte to `sink`.
        private mutating func decodeString(_ sink: (UInt8) -> Void) throws {
            while true {
                guard let byte = peek() else { throw Malformed(reason: "a string is not closed") }
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return
                case UInt8(ascii: "\\"):
                    guard let escape = peek() else { throw Malformed(reason: "a string is not closed") }
                    position += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): sink(escape)
                    case UInt8(ascii: "b"): sink(0x08)
                    case UInt8(ascii: "f"): sink(0x0C)
                    case UInt8(ascii: "n"): sink(0x0A)
                    case UInt8(ascii: "r"): sink(0x0D)
                    case UInt8(ascii: "t"): sink(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hexQuad()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard bytes[position...].starts(with: "\\u".utf8) else {
                                throw Malformed(reason: "a lone surrogate in a \\u escape")
                            }
                            position += 2
                            let low = try hexQuad()
                            guard (0xDC00..<0xE000).contains(low) else { throw Malformed(reason: "a lone surrogate in a \\u escape") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw Malformed(reason: "a lone surrogate in a \\u escape") }
                        UTF8.encode(unicode, into: sink)
                    default:
                        throw Malformed(reason: "an unknown escape at byte \(position - 1)")
                    }
                case 0..<0x20:
                    throw Malformed(reason: "a control character inside a string at byte \(position - 1)")
                default:
                    sink(byte)
                }
            }
        }

        private mutating func hexQuad() throws -> UInt32 {
            guard position + 4 <= bytes.count else { throw Malformed(reason: "a short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                position += 1
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw Malformed(reason: "a \\u escape that is not hexadecimal")
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}
