import Foundation
import LockboxTesting
import Synchronization
import Testing

@testable import Lockbox

/// A clock the test moves by hand: wall time, boot ID and time since boot.
final class TestClock: PinClock {
    private let instant: Mutex<PinInstant>

    init(wall: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        instant = Mutex(PinInstant(wall: wall, bootID: "boot-1", sinceBoot: 1000))
    }

    func now() -> PinInstant { instant.withLock { $0 } }

    /// Real time passing: both clocks move.
    func advance(_ seconds: Double) {
        instant.withLock {
            $0.wall = $0.wall.addingTimeInterval(seconds)
            $0.sinceBoot += seconds
        }
    }

    /// Someone sets the wall clock; the boot clock is untouched.
    func setWall(by seconds: Double) { instant.withLock { $0.wall = $0.wall.addingTimeInterval(seconds) } }

    /// A reboot: new boot ID, boot clock restarts, wall clock as given.
    func reboot(wallBy seconds: Double) {
        instant.withLock {
            $0.bootID = "boot-\(UUID())"
            $0.sinceBoot = 5
            $0.wall = $0.wall.addingTimeInterval(seconds)
        }
    }
}

/// Cheap hashing, so tests run the real Argon2id code quickly.
let cheapHash: KDFParameters = { do { return try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024) } catch { fatalError() } }()

struct PinFixture {
    let folder: TemporaryFolder
    let clock = TestClock()
    let guardian: PinGuard
    let store: any SecretStore
    let profile = PinProfile(service: "kids", name: "max")

    init(fileStore: Bool = true, hash: KDFParameters = cheapHash) throws {
        folder = try TemporaryFolder()
        if fileStore {
            let key = folder.file("k")
            try KeyFile.generate(at: key)
            store = try EncryptedFileStore.create(at: folder.file("v.lockbox"), credentials: [.keyFile(key)])
        } else {
            store = MemoryStore()
        }
        guardian = PinGuard(store: store, hashParameters: hash, clock: clock, lockDirectory: folder.file("locks"))
    }

    func guardian(hash: KDFParameters) -> PinGuard {
        PinGuard(store: store, hashParameters: hash, clock: clock, lockDirectory: folder.file("locks"))
    }
}

func pin(_ text: String) -> SecretBytes { SecretBytes(utf8: text) }

/// Argon2id that counts its calls and can be told to fail hashing (as when memory runs out).
final class CountingHasher: Sendable {
    private let counts = Mutex((hashes: 0, verifications: 0, failHashing: false))
    var hashes: Int { counts.withLock { $0.hashes } }
    var verifications: Int { counts.withLock { $0.verifications } }
    func failHashing(_ fail: Bool) { counts.withLock { $0.failHashing = fail } }

    var hasher: PinHasher {
        PinHasher(
            hash: { [self] pin, parameters in
                let fail = counts.withLock {
                    $0.hashes += 1
                    return $0.failHashing
                }
                return fail ? nil : PinHasher.argon2id.hash(pin, parameters)
            },
            verify: { [self] hash, pin in
                counts.withLock { $0.verifications += 1 }
                return PinHasher.argon2id.verify(hash, pin)
            })
    }
}

/// The case of the error `body` throws, as a short name, or "ok".
func outcome(_ body: () throws -> Void) -> String {
    do {
        try body()
        return "ok"
    } catch let error as LockboxError {
        switch error {
        case .wrongPin(_, let failures, let retryAt): return "wrong(\(failures)\(retryAt == nil ? "" : ",locked"))"
        case .pinLockedOut(_, _, let seconds): return "lockedOut(\(Int(seconds.rounded())))"
        case .pinDisabled(_, let failures): return "disabled(\(failures))"
        case .pinWiped: return "wiped"
        case .pinNotSet: return "notSet"
        case .pinRejected(let rule): return "rejected: \(rule)"
        default: return "\(error)"
        }
    } catch {
        return "\(error)"
    }
}
