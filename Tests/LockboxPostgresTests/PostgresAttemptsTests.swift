import Foundation
import Lockbox
import Testing
@testable import LockboxPostgres
#if canImport(Glibc)
import Glibc
#endif

// PIN lockouts across hosts (issue 17, item 2): each "host" is a separate process
// (LockboxPostgresWorker) that shares nothing with the others but the database. In an extension of
// PostgresStoreTests so they run serialised with the suite's other tests (each empties the database).

/// The worker executable beside the test product.
let worker = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/LockboxPostgresWorker")

/// Starts a worker with `arguments`; the vault passphrase and `pin` go to its stdin.
func startWorker(_ arguments: [String], pin: String) throws -> (Process, Pipe) {
    let process = Process()
    process.executableURL = worker
    process.arguments = arguments
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(Data("fleet words\n\(pin)\n".utf8))
    try input.fileHandleForWriting.close()
    return (process, output)
}

/// Waits for a worker and returns its output lines; records a failure if it did not exit 0.
func finish(_ worker: (Process, Pipe), sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    let data = worker.1.fileHandleForReading.readDataToEndOfFile()
    worker.0.waitUntilExit()
    #expect(worker.0.terminationStatus == 0, "worker exit status", sourceLocation: sourceLocation)
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

private let profile = PinProfile(service: "fleet.example", name: "ops")

extension PostgresStoreTests {
    /// Sets the profile's PIN "5073" under `lockout` with a cheap hash.
    private func setPin(_ store: PostgresStore, lockout: LockoutPolicy) async throws {
        let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
        try await guard_.set(profile, pin: secret("5073"), lockout: lockout)
    }

    /// The counts in the database, as psql shows them.
    private func storedCounts(_ cluster: Cluster) throws -> [Int] {
        try cluster.psql("SELECT failures FROM lockbox.pin_attempts").split(separator: "\n").compactMap { Int($0) }
    }

    @Test func eightHostsGuessingInParallelAreEachCountedAndStopAtThePolicy() async throws {
        guard let cluster = try Cluster.current("8 hosts guessing") else { return }
        let store = try await makeStore(cluster)
        defer { Task { await store.shutdown() } }
        // No delays, disabled after 10: every guess up to the 10th is evaluated, none after.
        try await setPin(store, lockout: LockoutPolicy(delays: [0], disableAfter: 10))
        let workers = try (0..<8).map { _ in
            try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "3", "0"], pin: "1111")
        }
        let lines = workers.flatMap { finish($0) }
        #expect(lines.count == 24)
        let counted = lines.filter { $0.hasPrefix("wrong ") }.compactMap { Int($0.dropFirst(6)) }.sorted()
        // Each evaluated guess got its own count: none was lost to a concurrent one.
        #expect(counted == Array(1...9))
        #expect(lines.filter { $0 == "disabled" }.count == 15)  // the 10th evaluated guess disables, 14 are refused
        #expect(try storedCounts(cluster) == [10])
        // The right PIN is refused too now; a reset (a higher authority) clears the count.
        let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
        #expect(lockboxCode(await thrown { try await guard_.verify(profile, pin: secret("5073")) }) == .pinDisabled)
        #expect(try await guard_.status(profile).disabled)
        try await guard_.reset(profile)
        try await guard_.verify(profile, pin: secret("5073"))
        #expect(try storedCounts(cluster) == [])
    }

    @Test func theDatabaseClockDecidesTheDelayNotAHostClock() async throws {
        guard let cluster = try Cluster.current("lockout clock") else { return }
        let store = try await makeStore(cluster)
        defer { Task { await store.shutdown() } }
        // 4 free tries, then an hour.
        try await setPin(store, lockout: LockoutPolicy(delays: [0, 0, 0, 3600]))
        let workers = try (0..<8).map { _ in
            try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "2", "0"], pin: "1111")
        }
        let lines = workers.flatMap { finish($0) }
        #expect(lines.filter { $0.hasPrefix("wrong ") }.count == 4)
        #expect(lines.filter { $0 == "locked" }.count == 12)
        #expect(try storedCounts(cluster) == [4])
        // A host whose clocks read ten days ahead is refused all the same, even the right PIN.
        let ahead = try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "1", "864000"], pin: "5073")
        #expect(finish(ahead) == ["locked"])
        let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
        let status = try await guard_.status(profile)
        #expect(status.failures == 4 && status.lockedUntil != nil)
        // An hour passes on the database's clock: the right PIN is evaluated and clears the count.
        _ = try cluster.psql("UPDATE lockbox.pin_attempts SET last_attempt = last_attempt - interval '3601 seconds'")
        try await guard_.verify(profile, pin: secret("5073"))
        #expect(try storedCounts(cluster) == [])
        // The database's clock set back (a last attempt in its future): the delay restarts from now.
        for _ in 0..<4 { _ = await thrown { try await guard_.verify(profile, pin: secret("1111")) } }
        _ = try cluster.psql("UPDATE lockbox.pin_attempts SET last_attempt = clock_timestamp() + interval '1 day'")
        let refused = await thrown { try await guard_.verify(profile, pin: secret("5073")) }
        guard case LockboxError.pinLockedOut(_, _, let seconds)? = refused else {
            Issue.record("expected a lockout, got \(String(describing: refused))")
            return
        }
        #expect(seconds > 3500 && seconds <= 3600)
    }

    @Test func aGuessIsCountedEvenIfItsHostDiesWhileHashing() async throws {
        guard let cluster = try Cluster.current("host dies mid-hash") else { return }
        let store = try await makeStore(cluster)
        defer { Task { await store.shutdown() } }
        try await setPin(store, lockout: .default)
        let hanging = try startWorker(["pin-hang", cluster.urlFile.string, profile.service, profile.name], pin: "5073")
        // The guess is counted before the hash begins; wait for the count, then kill the host.
        var counts: [Int] = []
        for _ in 0..<200 where counts.isEmpty {
            counts = try storedCounts(cluster)
            if counts.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(counts == [1])
        #expect(hanging.0.isRunning)
        kill(hanging.0.processIdentifier, SIGKILL)
        hanging.0.waitUntilExit()
        #expect(hanging.0.terminationReason == .uncaughtSignal)
        // The next wrong guess is the second failure: the dead host's guess stayed counted.
        let next = try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "1", "0"], pin: "1111")
        #expect(finish(next) == ["wrong 2"])
    }

    @Test func eightHostsUsingADeviceIDForTheFirstTimeAgreeOnOne() async throws {
        guard let cluster = try Cluster.current("8 first uses") else { return }
        let store = try await makeStore(cluster)
        defer { Task { await store.shutdown() } }
        // All eight ask at the same moment, once their stores are open.
        let startAt = String(Date().timeIntervalSince1970 + 3)
        let workers = try (0..<8).map { _ in
            try startWorker(["device-id", cluster.urlFile.string, "fleet.example", "device-id", startAt], pin: "-")
        }
        let ids = workers.flatMap { finish($0) }
        #expect(ids.count == 8)
        #expect(Set(ids).count == 1)
        let stored = try await DeviceIdentity(store: store).deviceID(service: "fleet.example")
        #expect(ids.first == stored.uuidString)
        #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "1\n")
        // The store's first write, directly: the second caller gets the first one's secret back.
        let key = ItemKey(service: "fleet.example", account: "other")
        #expect(try await store.setIfAbsent(secret("first"), for: key, options: ItemOptions()) == nil)
        #expect(text(try await store.setIfAbsent(secret("second"), for: key, options: ItemOptions())) == "first")
        #expect(text(try await store.get(key)) == "first")
    }
}
