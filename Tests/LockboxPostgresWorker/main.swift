#if PostgreSQL
    import CoreMetrics
    import Foundation
    import Lockbox
    import LockboxPostgres
    import SystemPackage

    // Test helper: one "host" of the cross-host tests in Tests/LockboxPostgresTests, a separate process
    // that shares nothing with the others but the database.
    //
    //   LockboxPostgresWorker pin-guesses URL_FILE SERVICE PROFILE COUNT CLOCK_OFFSET_SECONDS
    //       tries the PIN COUNT times and prints one line per try: "wrong FAILURES", "locked",
    //       "disabled", "wiped FAILURES", "ok" or "error CODE". Its PinClock reads CLOCK_OFFSET_SECONDS
    //       ahead of the system's (wall and boot clock alike).
    //   LockboxPostgresWorker pin-hang URL_FILE SERVICE PROFILE
    //       tries the PIN with a comparison that never returns (the test kills it mid-hash).
    //   LockboxPostgresWorker device-id URL_FILE SERVICE ACCOUNT START_AT
    //       waits until START_AT (seconds since 1970, so that all workers ask at once), then prints the
    //       device ID of (SERVICE, ACCOUNT), created on first use (the PIN line is unused).
    //   LockboxPostgresWorker refresh URL_FILE SERVICE ACCOUNT START_AT CALLS_FILE HANG LEASE_MS
    //       waits until START_AT, then asks its TokenRefresher for a valid access token of (SERVICE,
    //       ACCOUNT). Its token endpoint appends this process's PID to CALLS_FILE (one line per call:
    //       the endpoint's log), takes 300 ms, and answers "fresh-PID" valid for an hour; with HANG 1
    //       it never answers (the test kills it). The refresh lease lasts LEASE_MS. Prints
    //       "token TOKEN waited MILLISECONDS".
    //
    //   LockboxPostgresWorker pin-change URL_FILE SERVICE PROFILE START_AT
    //       waits until START_AT, then changes the PIN from the one on stdin's second line to the one
    //       on its third; prints "changed", "wrong FAILURES", "locked" or "error CODE".
    //
    // stdin: the vault's passphrase on the first line, the PIN to try on the second (never argv).

    /// The system's clocks moved `offset` seconds ahead.
    struct ShiftedClock: PinClock {
        let offset: Double
        let system = SystemPinClock()

        func now() -> PinInstant {
            var instant = system.now()
            instant.wall = instant.wall.addingTimeInterval(offset)
            instant.sinceBoot += offset
            return instant
        }
    }

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("LockboxPostgresWorker: \(message)\n".utf8))
        exit(2)
    }

    let arguments = CommandLine.arguments
    guard arguments.count >= 5 else { fail("usage: pin-guesses|pin-hang URL_FILE SERVICE PROFILE [COUNT CLOCK_OFFSET]") }
    let input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
    guard input.count >= 2 else { fail("stdin must hold the passphrase and the PIN, one a line") }
    let profile = PinProfile(service: arguments[3], name: arguments[4])
    let cheap: KDFParameters
    do { cheap = try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024) } catch { fail("bad KDF parameters") }

    // Like a host of its own, each worker has its own lock folder: the per-host `flock`s of two
    // workers never meet, so only the database can make them agree.
    // The async overloads, called from async functions: top-level code would pick the blocking ones
    // (which are unavailable from async code).
    func verify(_ guard_: PinGuard, _ profile: PinProfile, _ pin: SecretBytes) async throws {
        try await guard_.verify(profile, pin: pin)
    }
    func change(_ guard_: PinGuard, _ profile: PinProfile, from old: SecretBytes, to new: SecretBytes) async throws {
        try await guard_.change(profile, from: old, to: new)
    }
    func deviceID(_ identity: DeviceIdentity, service: String, account: String) async throws -> UUID {
        try await identity.deviceID(service: service, account: account)
    }

    let lockDirectory = FilePath(NSTemporaryDirectory()).appending("lockbox-worker-\(getpid())-\(UUID().uuidString)")

    do {
        try FileManager.default.createDirectory(
            atPath: lockDirectory.string, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: lockDirectory.string) }
        let url = try PostgresConnectionURL.read(fromFile: FilePath(arguments[2]))
        let store = try await PostgresStore.open(url, credentials: [.passphrase(SecretBytes(utf8: String(input[0])))])
        let pin = SecretBytes(utf8: String(input[1]))
        switch arguments[1] {
        case "pin-guesses":
            guard arguments.count == 7, let count = Int(arguments[5]), let offset = Double(arguments[6]) else {
                fail("bad COUNT or CLOCK_OFFSET")
            }
            let guard_ = PinGuard(
                store: store, preset: PinPreset(hashParameters: cheap, failureRecording: .afterComparing),
                clock: ShiftedClock(offset: offset), lockDirectory: lockDirectory)
            for _ in 0..<count {
                do {
                    try await verify(guard_, profile, pin)
                    print("ok")
                } catch LockboxError.wrongPin(_, let failures, _) {
                    print("wrong \(failures)")
                } catch LockboxError.pinLockedOut {
                    print("locked")
                } catch LockboxError.pinDisabled {
                    print("disabled")
                } catch LockboxError.pinWiped(_, let failures) {
                    print("wiped \(failures)")
                } catch let error as LockboxError {
                    print("error \(error.code)")
                }
            }
        case "pin-hang":
            let hanging = PinHasher(
                hash: PinHasher.argon2id.hash,
                verify: { _, _ in
                    while true { sleep(3600) }
                })
            let guard_ = PinGuard(
                access: StoreAccess(store, executor: .shared), policy: .default, hashParameters: cheap, clock: SystemPinClock(),
                lockDirectory: lockDirectory, lockTimeout: .seconds(30), acceptingStoreOpenToOtherProcesses: false, hasher: hanging,
                failureRecording: .afterComparing, logger: .lockboxDefault, metricsFactory: NOOPMetricsHandler.instance)
            try await verify(guard_, profile, pin)
            print("returned")
        case "device-id":
            guard arguments.count == 6, let startAt = Double(arguments[5]) else { fail("bad START_AT") }
            let wait = startAt - Date().timeIntervalSince1970
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
            let id = try await deviceID(
                DeviceIdentity(store: store, lockDirectory: lockDirectory), service: arguments[3], account: arguments[4])
            print(id.uuidString)
        case "pin-change":
            guard arguments.count == 6, let startAt = Double(arguments[5]), input.count >= 3 else {
                fail("bad START_AT, or no new PIN on stdin")
            }
            let guard_ = PinGuard(
                store: store, preset: PinPreset(hashParameters: cheap, failureRecording: .afterComparing),
                lockDirectory: lockDirectory)
            let wait = startAt - Date().timeIntervalSince1970
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
            do {
                try await change(guard_, profile, from: pin, to: SecretBytes(utf8: String(input[2])))
                print("changed")
            } catch LockboxError.wrongPin(_, let failures, _) {
                print("wrong \(failures)")
            } catch LockboxError.pinLockedOut {
                print("locked")
            } catch let error as LockboxError {
                print("error \(error.code)")
            }
        case "refresh":
            guard arguments.count == 9, let startAt = Double(arguments[5]), let leaseMilliseconds = Int(arguments[8]) else {
                fail("bad START_AT or LEASE_MS")
            }
            let calls = arguments[6]
            let hang = arguments[7] == "1"
            let tokens = TokenRefresher(store: store, lockDirectory: lockDirectory, refreshLease: .milliseconds(leaseMilliseconds))
            let wait = startAt - Date().timeIntervalSince1970
            if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
            let started = ContinuousClock.now
            let token = try await tokens.validAccessToken(service: arguments[3], account: arguments[4]) { current in
                let fd = open(calls, O_WRONLY | O_APPEND | O_CREAT, 0o600)
                guard fd >= 0 else { fail("cannot open \(calls)") }
                let line = Array("\(getpid())\n".utf8)
                guard write(fd, line, line.count) == line.count else { fail("cannot write \(calls)") }
                close(fd)
                if hang { while true { sleep(3600) } }
                try await Task.sleep(for: .milliseconds(300))
                return TokenSet(
                    accessToken: SecretBytes(utf8: "fresh-\(getpid())"), refreshToken: current.refreshToken,
                    expiresAt: Date().addingTimeInterval(3600))
            }
            let milliseconds = Int((ContinuousClock.now - started).seconds * 1000)
            print("token \(token.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }) waited \(milliseconds)")
        default:
            fail("unknown mode \(arguments[1])")
        }
        await store.shutdown()
    } catch {
        fail("\(error)")
    }
#else
    #if canImport(Glibc)
        import Glibc
    #endif

    // A helper of the PostgreSQL tests and benchmark: nothing to do without the `PostgreSQL` trait.
    let message = "this program needs the package's PostgreSQL trait (swift build --traits PostgreSQL)\n"
    _ = message.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    exit(2)
#endif
