import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where secrets enter the CLI: a file descriptor, standard input, or a no-echo prompt on the
/// controlling terminal. Never an argument, never an environment variable.
enum SecretInput {
    /// Reads a passphrase from file descriptor `fd`: up to the first newline or end of input.
    static func passphrase(fromDescriptor fd: Int32, what: String) throws -> SecretBytes {
        let secret: SecretBytes
        do {
            secret = try read(from: FileDescriptor(rawValue: fd), limit: 4096, stopAtNewline: true, what: what)
        } catch let error as Errno {
            throw CLIError.noInput(
                "cannot read the \(what) from file descriptor \(fd): \(error). Open it in the shell, e.g. `--passphrase-fd 3 3<file`.")
        }
        guard secret.count > 0 else {
            throw CLIError.noInput("file descriptor \(fd) gave an empty \(what)")
        }
        return secret
    }

    /// Reads a secret from file descriptor `fd` to its end, dropping one trailing newline unless
    /// `raw` (as ``secretFromStandardInput(prompt:raw:allowEmpty:)`` reads a pipe).
    static func secret(fromDescriptor fd: Int32, what: String, raw: Bool) throws -> SecretBytes {
        do {
            return try read(
                from: FileDescriptor(rawValue: fd), limit: ItemLimits.maxSecretBytes + 2, stopAtNewline: false,
                what: what, dropTrailingNewline: !raw, statedLimit: ItemLimits.maxSecretBytes)
        } catch let error as Errno {
            throw CLIError.noInput(
                "cannot read \(what) from file descriptor \(fd): \(error). Open it in the shell, e.g. `--if-current-fd 3 3<file`.")
        }
    }

    /// Reads a secret from standard input. A terminal gets a no-echo prompt, asked twice;
    /// a pipe or file is read to the end, dropping one trailing newline unless `raw`; an empty
    /// one is refused unless `allowEmpty`.
    static func secretFromStandardInput(prompt: String, raw: Bool, allowEmpty: Bool = false) throws -> SecretBytes {
        if isatty(STDIN_FILENO) == 1 {
            return try promptTwice(prompt, what: "secret")
        }
        // Room for a trailing CR LF that is dropped; the limit named is the secret's own.
        let secret = try read(
            from: .standardInput, limit: ItemLimits.maxSecretBytes + 2, stopAtNewline: false,
            what: "secret", dropTrailingNewline: !raw, statedLimit: ItemLimits.maxSecretBytes)
        guard secret.count > 0 || allowEmpty else {
            throw CLIError.noInput(
                "standard input was empty, so nothing was stored. Pipe the secret in, run from a terminal to be prompted, or pass --allow-empty to store an empty secret."
            )
        }
        return secret
    }

    /// Asks on the terminal, without echo, twice; throws if the entries differ or there is no terminal.
    static func promptTwice(_ prompt: String, what: String) throws -> SecretBytes {
        guard let first = try Terminal.readHidden(prompt: prompt) else {
            throw CLIError.noTerminal(what)
        }
        guard let second = try Terminal.readHidden(prompt: "Repeat to confirm: ") else {
            throw CLIError.noTerminal(what)
        }
        guard first == second else { throw CLIError.mismatch(what) }
        guard first.count > 0 else { throw CLIError.noInput("the \(what) was empty") }
        return first
    }

    /// Reads into a fixed secret buffer, zeroing every scratch byte.
    static func read(
        from fd: FileDescriptor, limit: Int, stopAtNewline: Bool, what: String, dropTrailingNewline: Bool = true,
        statedLimit: Int? = nil
    ) throws -> SecretBytes {
        var buffer = SecretScratch(capacity: 4096)
        while buffer.count <= limit {
            let reached = try buffer.fill(from: fd, stopAtNewline: stopAtNewline)
            if reached { break }
        }
        guard buffer.count <= limit else {
            throw LockboxError.invalidArgument("the \(what) is longer than \(statedLimit ?? limit) bytes")
        }
        return buffer.take(droppingTrailingNewline: stopAtNewline || dropTrailingNewline)
    }
}

/// A growable scratch buffer for secrets that zeroes old storage when it grows and when done.
struct SecretScratch: ~Copyable {
    private var storage: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    init(capacity: Int) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        storage.deallocate()
    }

    /// Reads once; returns `true` at end of input or, with `stopAtNewline`, after a newline.
    mutating func fill(from fd: FileDescriptor, stopAtNewline: Bool) throws -> Bool {
        if count == storage.count { grow() }
        if stopAtNewline {
            // One byte at a time, so nothing past the newline is consumed from a shared pipe.
            let n = try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: storage[count..<count + 1]))
            if n == 0 { return true }
            count += 1
            return storage[count - 1] == UInt8(ascii: "\n")
        }
        let n = try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: storage[count...]))
        count += n
        return n == 0
    }

    private mutating func grow() {
        let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: storage.count * 2, alignment: 1)
        bigger.initializeMemory(as: UInt8.self, repeating: 0)
        bigger.copyMemory(from: UnsafeRawBufferPointer(storage))
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        storage.deallocate()
        storage = bigger
    }

    /// Copies the bytes into a ``SecretBytes``, without one trailing `\n` or `\r\n` if asked.
    consuming func take(droppingTrailingNewline: Bool) -> SecretBytes {
        var length = count
        if droppingTrailingNewline && length > 0 && storage[length - 1] == UInt8(ascii: "\n") {
            length -= 1
            if length > 0 && storage[length - 1] == UInt8(ascii: "\r") { length -= 1 }
        }
        return SecretBytes(copying: UnsafeRawBufferPointer(rebasing: storage[0..<length]))
    }
}

/// The controlling terminal, for prompts that must not echo.
enum Terminal {
    nonisolated(unsafe) private static var savedSettings = termios()
    nonisolated(unsafe) private static var savedDescriptor: Int32 = -1

    /// Prompts on `/dev/tty` with echo off and reads one line; `nil` if there is no terminal.
    static func readHidden(prompt: String) throws -> SecretBytes? {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        write(tty, prompt)
        var settings = termios()
        guard tcgetattr(tty, &settings) == 0 else { return nil }
        savedSettings = settings
        savedDescriptor = tty
        // Restore echo if the user presses Ctrl-C at the prompt.
        let previous = signal(SIGINT) { _ in
            tcsetattr(Terminal.savedDescriptor, TCSAFLUSH, &Terminal.savedSettings)
            _exit(130)
        }
        settings.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(tty, TCSAFLUSH, &settings)
        defer {
            tcsetattr(tty, TCSAFLUSH, &savedSettings)
            signal(SIGINT, previous)
            write(tty, "\n")
        }
        return try SecretInput.read(from: FileDescriptor(rawValue: tty), limit: 4096, stopAtNewline: true, what: "input")
    }

    /// Asks a yes/no question on the terminal; `nil` if there is no terminal.
    static func confirm(_ question: String) -> Bool? {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        write(tty, question + " [y/N] ")
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while Glibc.read(tty, &byte, 1) == 1 && byte != UInt8(ascii: "\n") && answer.count < 16 { answer.append(byte) }
        let text = String(decoding: answer, as: UTF8.self).lowercased()
        return text == "y" || text == "yes"
    }

    private static func write(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }
}
