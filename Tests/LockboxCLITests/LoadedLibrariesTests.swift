import Foundation
import Testing

@testable import LockboxTestSupport

/// A file-vault command loads neither the Secret Service client's libraries (libcrypto for the
/// session, libsecret and GLib for the fallback) nor tpm2-tss (and its libcrypto): each is loaded
/// with dlopen only when used (docs/PERFORMANCE.md). Read from the dynamic loader's own record of every object it maps (LD_DEBUG=files), on
/// the real binary.
@Suite("Shared libraries a command loads")
struct LoadedLibrariesTests {
    /// The libraries that must stay out of a command that does not use them.
    static let lazyLibraries = ["libsecret-1", "libglib-2.0", "libgio-2.0", "libgcrypt", "libtss2-", "libcrypto"]

    /// The shared objects `lockbox ARGUMENTS` maps, at start-up and later with dlopen.
    func loadedLibraries(_ arguments: [String], stdin: Data = Data(), environment: [String: String]) throws -> (
        status: Int32, libraries: Set<String>
    ) {
        let folder = try TemporaryFolder()
        let log = folder.file("ld").string
        let result = try runLockbox(
            arguments, stdin: stdin,
            environment: environment.merging(["LD_DEBUG": "files", "LD_DEBUG_OUTPUT": log]) { _, new in new })
        var libraries = Set<String>()
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path.string) where name.hasPrefix("ld.") {
            let text = try String(contentsOfFile: folder.file(name).string, encoding: .utf8)
            for match in text.matches(of: /file=(\S+)/) where !match.output.1.isEmpty {
                libraries.insert(String(match.output.1))
            }
        }
        return (result.status, libraries)
    }

    @Test("a file-vault get loads no libcrypto, libsecret, GLib or tpm2-tss")
    func fileVaultGetLoadsNoLazyLibrary() throws {
        let folder = try TemporaryFolder()
        let vault = folder.file("v.lockbox").string
        let key = folder.file("k.key").string
        let environment = ["LOCKBOX_VAULT": vault, "LOCKBOX_KEY_FILE": key, "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(try runLockbox(["init", "--generate-key-file", key], environment: environment).status == 0)
        #expect(try runLockbox(["set", "svc", "acct"], stdin: Data("secret".utf8), environment: environment).status == 0)
        let get = try loadedLibraries(["get", "svc", "acct"], environment: environment)
        #expect(get.status == 0)
        // The loader did report: libc is always there.
        #expect(get.libraries.contains { $0.hasPrefix("libc.so") }, "LD_DEBUG reported no libraries: \(get.libraries)")
        for library in Self.lazyLibraries {
            #expect(!get.libraries.contains { $0.contains(library) }, "lockbox get on a file vault loaded \(library)")
        }
        let version = try loadedLibraries(["--version"], environment: [:])
        #expect(version.status == 0)
        for library in Self.lazyLibraries {
            #expect(!version.libraries.contains { $0.contains(library) }, "lockbox --version loaded \(library)")
        }
    }

    /// A secret crossing the bus in both directions loads no GIO, libsecret or libgcrypt: Lockbox
    /// speaks D-Bus itself (DBusConnection.swift) and makes the encrypted session itself
    /// (SessionCrypto.swift) with libcrypto, which it loads on the first session: `set` and `get`
    /// load it, `delete` (no secret crosses, so no session) does not.
    @Test(
        "a Secret Service set and get load libcrypto and no GIO, GLib, libsecret or libgcrypt; delete loads none",
        .enabled(if: keyringAvailable))
    func secretServiceLoadsNoGLib() throws {
        let arguments = ["--backend", "secret-service"]
        let set = try loadedLibraries(
            arguments + ["set", "loaded-libraries-probe", "somebody"], stdin: Data("probe-secret".utf8),
            environment: keyringEnvironment)
        let get = try loadedLibraries(arguments + ["get", "loaded-libraries-probe", "somebody"], environment: keyringEnvironment)
        let delete = try loadedLibraries(arguments + ["delete", "loaded-libraries-probe", "somebody"], environment: keyringEnvironment)
        #expect(set.status == 0 && get.status == 0 && delete.status == 0)
        for (name, result) in [("set", set), ("get", get), ("delete", delete)] {
            #expect(result.libraries.contains { $0.hasPrefix("libc.so") }, "LD_DEBUG reported no libraries: \(result.libraries)")
            for library in Self.lazyLibraries where library != "libcrypto" {
                #expect(!result.libraries.contains { $0.contains(library) }, "a Secret Service \(name) loaded \(library)")
            }
            let loadsLibcrypto = result.libraries.contains { $0.contains("libcrypto.so.3") }
            #expect(
                loadsLibcrypto == (name != "delete"), "a Secret Service \(name) \(loadsLibcrypto ? "loaded" : "did not load") libcrypto")
        }
    }

    /// The control: the same reading sees a library loaded with dlopen, so the tests above could
    /// fail. A TPM command with no TPM behind its TCTI loads tpm2-tss before it finds none.
    @Test("the reading sees tpm2-tss loaded when a TPM is asked for")
    func readingSeesALibraryLoadedLater() throws {
        let folder = try TemporaryFolder()
        let environment = ["LOCKBOX_TPM_TCTI": "swtpm:host=127.0.0.1,port=9", "XDG_CONFIG_HOME": folder.file("config").string]
        let result = try loadedLibraries(
            [
                "init", "--vault", folder.file("v.lockbox").string, "--tpm", "--generate-key-file",
                folder.file("k.key").string,
            ], environment: environment)
        #expect(result.status == 60)
        #expect(result.libraries.contains { $0.contains("libtss2-") }, "tpm2-tss was not seen loading: \(result.libraries)")
    }
}
