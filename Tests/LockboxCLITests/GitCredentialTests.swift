import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxCLI
@testable import LockboxTestSupport

/// `lockbox git-credential` and `set --allow-empty` through the real binary on a key-file vault:
/// the protocol's edges. The round trips with the real `git` (approve/fill/reject, clones over
/// HTTP) and on gnome-keyring are in scripts/ci/test-integrations.sh, which the test command runs.
@Suite("git credential helper and empty secrets")
struct GitCredentialTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        environment = try keyFileVaultEnvironment(in: folder)
    }

    private func lockbox(_ arguments: [String], _ stdin: String = "") throws -> ProcessResult {
        try runLockbox(arguments, stdin: Data(stdin.utf8), environment: environment)
    }

    @Test("set --allow-empty stores an empty secret from a pipe; without it an empty pipe is a usage error")
    func emptySecret() throws {
        var result = try lockbox(["set", "--raw", "svc", "acct"])
        #expect(result.status == 64 && result.errorCode == .noInput, "\(result.stderr)")
        #expect(result.stderr.contains("--allow-empty"), "names the option that allows it")
        #expect(try lockbox(["get", "svc", "acct"]).status == 2, "nothing was stored")
        result = try lockbox(["set", "--raw", "--allow-empty", "svc", "acct"])
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(["get", "svc", "acct"])
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty)
        // Without --raw a lone newline is dropped, leaving an empty secret: allowed only with the switch.
        #expect(try lockbox(["set", "svc", "nl"], "\n").status == 64)
        #expect(try lockbox(["set", "--allow-empty", "svc", "nl"], "\n").status == 0)
        #expect(try lockbox(["get", "svc", "nl"]).stdout.isEmpty)
    }

    @Test("store, get and erase speak git's protocol: CRLF lines, ignored attributes, silence")
    func protocolRoundTrip() throws {
        var result = try lockbox(
            ["git-credential", "store"],
            "protocol=https\r\nhost=h.example:8443\r\nusername=u\r\npassword=a=b c\r\nurl=x\r\n\r\n")
        #expect(result.status == 0 && result.stdout.isEmpty, "\(result.stderr)")
        result = try lockbox(["list", "--json", "--service", "git:https://h.example:8443"])
        let items = try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]]
        #expect(items?.count == 1)
        #expect(items?.first?["account"] as? String == "u")
        #expect(items?.first?["kind"] as? String == "password")
        #expect((items?.first?["attributes"] as? [String: String])?["host"] == "h.example:8443")
        #expect(!result.stdoutString.contains("a=b c"))
        result = try lockbox(["git-credential", "get"], "protocol=https\nhost=h.example:8443\n")
        #expect(result.stdoutString == "username=u\npassword=a=b c\n")
        // Anything after the blank line is not read as part of the description.
        result = try lockbox(["git-credential", "get"], "protocol=https\nhost=other\n\nhost=h.example:8443\n")
        #expect(result.status == 0 && result.stdout.isEmpty)
        result = try lockbox(["git-credential", "erase"], "protocol=https\nhost=h.example:8443\nusername=u\npassword=a=b c\n")
        #expect(result.status == 0 && result.stdout.isEmpty)
        #expect(try lockbox(["get", "git:https://h.example:8443", "u"]).status == 2)
    }

    @Test("descriptions git could not act on are ignored; malformed input is a usage error")
    func incompleteAndMalformed() throws {
        var result = try lockbox(["git-credential", "store"], "protocol=https\nhost=h\npassword=p\n")
        #expect(result.status == 0 && result.stdout.isEmpty, "no user name: nothing to store")
        result = try lockbox(["git-credential", "store"], "protocol=https\nhost=h\nusername=\npassword=p\n")
        #expect(result.status == 0, "an empty user name is reported, not stored")
        result = try lockbox(["git-credential", "store"], "host=h\nusername=u\npassword=p\n")
        #expect(result.status == 0, "no protocol: nothing to do")
        #expect(!(try lockbox(["list", "--json"]).stdoutString.contains("git:")))
        result = try lockbox(["git-credential", "get"], "protocol=https\nhost h\n")
        #expect(result.status == 64, "a line without '=' is refused")
        #expect(result.stdout.isEmpty)
        result = try lockbox(["git-credential"])
        #expect(result.status == 64, "the operation is required")
    }

    @Test("a stored password git's protocol cannot carry (newline) is skipped, not sent cut short")
    func untransmittablePassword() throws {
        #expect(try lockbox(["set", "--raw", "git:https://nl.example", "u"], "line1\nline2").status == 0)
        let result = try lockbox(["git-credential", "get"], "protocol=https\nhost=nl.example\n")
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty)
        #expect(!result.stderr.contains("line1"), "the message never holds the secret")
    }

    @Test("without a user name, get answers the most recently stored one")
    func mostRecent() throws {
        #expect(try lockbox(["git-credential", "store"], "protocol=https\nhost=m\nusername=first\npassword=1\n").status == 0)
        Thread.sleep(forTimeInterval: 1.1)  // modification times have one-second resolution in listings
        #expect(try lockbox(["git-credential", "store"], "protocol=https\nhost=m\nusername=second\npassword=2\n").status == 0)
        let result = try lockbox(["git-credential", "get"], "protocol=https\nhost=m\n")
        #expect(result.stdoutString == "username=second\npassword=2\n")
    }

    @Test("git's approve after each use leaves an unchanged credential alone; a protected one stays protected")
    func storeKeepsWhatIsThere() throws {
        let description = "protocol=https\nhost=k\nusername=u\npassword=p\n"
        #expect(try lockbox(["git-credential", "store"], description).status == 0)
        let before = try lockbox(["list", "--json", "--service", "git:https://k"]).stdoutString
        Thread.sleep(forTimeInterval: 1.1)  // listings show modification times to the second
        #expect(try lockbox(["git-credential", "store"], description).status == 0)
        #expect(try lockbox(["list", "--json", "--service", "git:https://k"]).stdoutString == before, "not rewritten")

        #expect(try lockbox(["set", "--protected", "git:https://k", "u"], "p").status == 0)
        #expect(try lockbox(["git-credential", "store"], "protocol=https\nhost=k\nusername=u\npassword=new\n").status == 0)
        let listed =
            try JSONSerialization.jsonObject(with: try lockbox(["list", "--json", "--service", "git:https://k"]).stdout)
            as? [[String: Any]]
        #expect(listed?.first?["access"] as? String == "fresh-authentication")
        // Outside a window the protected credential is not handed to git (exit 40, nothing printed).
        let result = try lockbox(["git-credential", "get"], "protocol=https\nhost=k\n")
        #expect(result.status == 40)
        #expect(result.stdout.isEmpty)
    }

    @Test("inside an unlock window the helper needs no key file or passphrase; after lock it fails, never hangs")
    func unlockWindow() throws {
        let passFile = folder.file("pass").string
        try "vault pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let env = [
            "LOCKBOX_VAULT": folder.file("p.lockbox").string, "XDG_CONFIG_HOME": folder.file("config").string,
            "XDG_RUNTIME_DIR": runtime,
        ]
        let fd3 = "3<'\(passFile)'"
        #expect(try runLockbox(["init", "--passphrase-fd", "3", "--kdf", "interactive"], environment: env, shellRedirect: fd3).status == 0)
        var result = try runLockbox(
            ["git-credential", "--passphrase-fd", "3", "store"],
            stdin: Data("protocol=https\nhost=w\nusername=u\npassword=p\n".utf8), environment: env, shellRedirect: fd3)
        #expect(result.status == 0, "\(result.stderr)")
        result = try runLockbox(["unlock", "--for", "30s", "--passphrase-fd", "3"], environment: env, shellRedirect: fd3)
        #expect(result.status == 0, "\(result.stderr)")
        result = try runLockbox(["git-credential", "get"], stdin: Data("protocol=https\nhost=w\n".utf8), environment: env)
        #expect(result.stdoutString == "username=u\npassword=p\n", "\(result.stderr)")
        #expect(try runLockbox(["lock"], environment: env).status == 0)
        // Without a controlling terminal (setsid) there is no one to ask: exit 40, nothing printed.
        var detached = env.merging(["PATH": "/usr/bin:/bin", "HOME": folder.path.string]) { a, _ in a }
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { detached[name] = value }
        }
        let locked = try run(
            "/usr/bin/setsid", ["--wait", lockboxBinary.path, "git-credential", "get"],
            stdin: "protocol=https\nhost=w\n", environment: detached)
        #expect(locked.status == 40, "\(locked.stderr)")
        #expect(locked.stdout.isEmpty)
    }

    @Test("invoked through a link named git-credential-lockbox it is the helper")
    func linkName() throws {
        let link = folder.file("git-credential-lockbox").string
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: lockboxBinary.path)
        var env = environment
        env["PATH"] = "/usr/bin:/bin"
        // Under scripts/ci/sanitizers.sh the child keeps its report path and suppressions, as runLockbox does.
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
        }
        var result = try run(link, ["store"], stdin: "protocol=https\nhost=l\nusername=u\npassword=p\n", environment: env)
        #expect(result.status == 0, "\(result.stderr)")
        result = try run(link, ["get"], stdin: "protocol=https\nhost=l\n", environment: env)
        #expect(result.stdout == "username=u\npassword=p\n")
    }
}
