import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxCLI
@testable import LockboxTestSupport

/// `set --expires`, `get --allow-expired`, `list --expired`, `wipe --expired`, `set
/// --keep-previous`, `get --previous`, `restore`, and git's `oauth_refresh_token`, through the
/// real binary on a key-file vault (format 2).
@Suite("CLI: expiry, previous versions, git refresh tokens")
struct ExpiryCLITests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        environment = try keyFileVaultEnvironment(in: folder)
    }

    private func lockbox(_ arguments: [String], _ stdin: String = "") throws -> ProcessResult {
        try runLockbox(arguments, stdin: Data(stdin.utf8), environment: environment)
    }

    @Test("an item set with --expires 2s: readable at once, refused with exit 16 three seconds later, removed by wipe --expired")
    func expiresTwoSeconds() throws {
        var result = try lockbox(["set", "--expires", "2s", "ci", "token"], "short-lived")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try lockbox(["set", "ci", "other"], "stays").status == 0)
        result = try lockbox(["get", "ci", "token"])
        #expect(result.status == 0 && result.stdoutString == "short-lived", "\(result.stderr)")
        result = try lockbox(["list", "--json", "--service", "ci"])
        let listed = try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]]
        #expect(listed?.first { $0["account"] as? String == "token" }?["expires"] is String, "list shows the expiry")
        #expect(listed?.first { $0["account"] as? String == "other" }?["expires"] == nil)
        #expect(try lockbox(["list", "--expired"]).stdoutString.isEmpty, "nothing expired yet")

        Thread.sleep(forTimeInterval: 3)
        result = try lockbox(["get", "ci", "token"])
        #expect(result.status == 16 && result.errorCode == .itemExpired, "\(result.stderr)")
        #expect(result.stdout.isEmpty && !result.stderr.contains("short-lived"), "nothing of the secret is printed")
        #expect(result.stderr.contains("--allow-expired"), "says how to read it anyway")
        result = try lockbox(["get", "--allow-expired", "ci", "token"])
        #expect(result.status == 0 && result.stdoutString == "short-lived")
        // exec refuses it the same way, before the program starts.
        let marker = folder.file("ran").string
        result = try lockbox(["exec", "--env", "TOKEN=ci/token", "--", "/bin/sh", "-c", "touch '\(marker)'"])
        #expect(result.status == 16 && !FileManager.default.fileExists(atPath: marker), "\(result.stderr)")
        result = try lockbox(["list", "--expired"])
        #expect(result.stdoutString.contains("token") && !result.stdoutString.contains("other"), "\(result.stdoutString)")
        #expect(result.stdoutString.contains("EXPIRES") && result.stdoutString.contains("expired "))

        result = try lockbox(["wipe", "--expired"])
        #expect(result.status == 0 && result.stderr.contains("Removed 1 expired item"), "\(result.stderr)")
        #expect(try lockbox(["get", "--allow-expired", "ci", "token"]).status == 2, "removed")
        #expect(try lockbox(["get", "ci", "other"]).stdoutString == "stays", "the other item is kept")
    }

    @Test("bad --expires and --grace values are usage errors (exit 64) and store nothing")
    func badDurations() throws {
        for value in ["-5s", "0s", "nan", "inf", "1e9s", "5x", "1h30", "", "99999999999999w", "2001-01-01", "yesterday", "2026-13-45"] {
            let result = try lockbox(["set", "--expires=\(value)", "bad", "a"], "v")
            #expect(result.status == 64, "--expires '\(value)': \(result.stderr)")
        }
        #expect(try lockbox(["set", "--keep-previous", "--grace=-1m", "bad", "a"], "v").status == 64)
        #expect(try lockbox(["set", "--grace", "1m", "bad", "a"], "v").status == 64, "--grace needs --keep-previous")
        #expect(try lockbox(["get", "bad", "a"]).status == 2, "nothing stored")
        #expect(try lockbox(["set", "--expires", "2099-12-31", "bad", "a"], "v").status == 0, "a date is taken")
        #expect(try lockbox(["set", "--expires", "1h30m", "bad", "b"], "v").status == 0, "combined units are taken")
        #expect(try lockbox(["wipe", "--expired", "--all"]).status == 64)
    }

    @Test("set --keep-previous: both values readable during the grace period, only the new one after; restore swaps them")
    func keepPrevious() throws {
        #expect(try lockbox(["set", "db", "app"], "old-password").status == 0)
        var result = try lockbox(["get", "--previous", "db", "app"])
        #expect(result.status == 17 && result.errorCode == .noPreviousVersion, "\(result.stderr)")
        #expect(try lockbox(["set", "--keep-previous", "--grace", "3s", "db", "app"], "new-password").status == 0)
        #expect(try lockbox(["get", "db", "app"]).stdoutString == "new-password")
        #expect(try lockbox(["get", "--previous", "db", "app"]).stdoutString == "old-password")
        result = try lockbox(["list", "--service", "db"])
        #expect(result.stdoutString.contains("+previous until"), "\(result.stdoutString)")
        #expect(!result.stdoutString.contains("lockbox.previous"), "the previous value is not listed as an item")
        let json = try JSONSerialization.jsonObject(with: try lockbox(["list", "--json", "--service", "db"]).stdout) as? [[String: Any]]
        #expect(json?.count == 1 && json?.first?["previousUntil"] is String)

        Thread.sleep(forTimeInterval: 4)
        result = try lockbox(["get", "--previous", "db", "app"])
        #expect(result.status == 17, "the grace period ended: \(result.stderr)")
        #expect(try lockbox(["get", "db", "app"]).stdoutString == "new-password")

        // restore puts the previous value back; the replaced one becomes the previous.
        #expect(try lockbox(["set", "--keep-previous", "db", "app"], "newest").status == 0)
        result = try lockbox(["restore", "db", "app"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try lockbox(["get", "db", "app"]).stdoutString == "new-password")
        #expect(try lockbox(["get", "--previous", "db", "app"]).stdoutString == "newest")
        // A plain rotation drops it; restore then has nothing to put back.
        #expect(try lockbox(["set", "db", "app"], "plain").status == 0)
        #expect(try lockbox(["restore", "db", "app"]).status == 17)
        #expect(try lockbox(["restore", "db", "nobody"]).status == 2)
    }

    @Test("the git helper keeps oauth_refresh_token with the credential, returns it on get, erases it with it")
    func gitRefreshToken() throws {
        var result = try lockbox(
            ["git-credential", "store"],
            "protocol=https\nhost=forge.example\nusername=alice\npassword=access-1\npassword_expiry_utc=4102444800\noauth_refresh_token=refresh-1\n\n"
        )
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(["git-credential", "get"], "protocol=https\nhost=forge.example\n\n")
        #expect(
            result.stdoutString == "username=alice\npassword=access-1\npassword_expiry_utc=4102444800\noauth_refresh_token=refresh-1\n",
            "\(result.stdoutString)")
        // One item is listed; its expiry is password_expiry_utc.
        let listed =
            try JSONSerialization.jsonObject(with: try lockbox(["list", "--json", "--service", "git:https://forge.example"]).stdout)
            as? [[String: Any]]
        #expect(listed?.count == 1 && listed?.first?["expires"] as? String == "2100-01-01T00:00:00Z", "\(String(describing: listed))")

        // A new password without a refresh token drops the old token.
        #expect(
            try lockbox(["git-credential", "store"], "protocol=https\nhost=forge.example\nusername=alice\npassword=access-2\n\n").status
                == 0)
        result = try lockbox(["git-credential", "get"], "protocol=https\nhost=forge.example\nusername=alice\n\n")
        #expect(result.stdoutString == "username=alice\npassword=access-2\n")

        #expect(
            try lockbox(
                ["git-credential", "store"],
                "protocol=https\nhost=forge.example\nusername=alice\npassword=access-3\noauth_refresh_token=refresh-3\n\n"
            ).status == 0)
        #expect(
            try lockbox(["git-credential", "get"], "protocol=https\nhost=forge.example\n\n").stdoutString.hasSuffix(
                "oauth_refresh_token=refresh-3\n"))
        result = try lockbox(["git-credential", "erase"], "protocol=https\nhost=forge.example\nusername=alice\n\n")
        #expect(result.status == 0)
        #expect(try lockbox(["git-credential", "get"], "protocol=https\nhost=forge.example\n\n").stdout.isEmpty)
        #expect(try lockbox(["list", "--json-lines"]).stdoutString.isEmpty, "the refresh token went with the credential")
        #expect(try lockbox(["get", "git:https://forge.example", "lockbox.oauth-refresh-token:alice"]).status == 2)
    }
}
