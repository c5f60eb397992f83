import Foundation
import Lockbox

// The `concurrency` group: 100 token reads and 100 token writes arriving at once, from tasks on
// Swift's cooperative pool, through the blocking API (what a service could do before the async
// API: the calls block the pool's threads) and through the async API (the calls run on Lockbox's
// BlockingExecutor). Each operation's latency is counted from the common start, as for 100
// requests arriving together; a probe task sleeping 1 ms in a loop measures how late the
// cooperative pool wakes it meanwhile (how starved the rest of a service would be).

/// Runs `body` on the cooperative pool and waits for it on this (non-pool) thread.
func waitForTask<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Locked<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

/// One round's figures: each operation's completion time from the start, and the probe's lateness.
struct ConcurrencyRound: Sendable {
    var latencies: [UInt64]
    var probeLateness: [UInt64]
}

/// 100 (or `count`) concurrent loads or saves, blocking or async, with the probe running.
func concurrentTokenRound(_ tokens: TokenRefresher, count: Int, write: Bool, async useAsync: Bool) throws -> ConcurrencyRound {
    try waitForTask {
        let stop = Locked(false)
        let probe = Task {
            var lateness: [UInt64] = []
            while !stop.withLock({ $0 }) {
                let before = monotonicNanoseconds()
                try? await Task.sleep(for: .milliseconds(1))
                lateness.append(monotonicNanoseconds() - before - min(monotonicNanoseconds() - before, 1_000_000))
            }
            return lateness
        }
        let start = monotonicNanoseconds()
        let latencies = try await withThrowingTaskGroup(of: UInt64.self) { group in
            for index in 0..<count {
                group.addTask {
                    let account = "user\(index)"
                    if write {
                        let set = TokenSet(
                            accessToken: SecretBytes(utf8: "access-\(index)-\(start)"),
                            refreshToken: SecretBytes(utf8: "refresh-\(index)"), expiresAt: Date(timeIntervalSinceNow: 3600))
                        if useAsync {
                            try await tokens.save(set, service: "bench", account: account)
                        } else {
                            try blockingSave(tokens, set, account: account)
                        }
                    } else {
                        let loaded =
                            useAsync
                            ? try await tokens.load(service: "bench", account: account)
                            : try blockingLoad(tokens, account: account)
                        guard loaded != nil else { throw BenchError("no tokens for \(account)") }
                    }
                    return monotonicNanoseconds() - start
                }
            }
            var latencies: [UInt64] = []
            for try await latency in group { latencies.append(latency) }
            return latencies
        }
        stop.withLock { $0 = true }
        return ConcurrencyRound(latencies: latencies, probeLateness: await probe.value)
    }
}

// The blocking API, called from a task exactly as a service's handler could (a synchronous
// function, so the compiler picks the blocking overload).
func blockingSave(_ tokens: TokenRefresher, _ set: TokenSet, account: String) throws {
    try tokens.save(set, service: "bench", account: account)
}

func blockingLoad(_ tokens: TokenRefresher, account: String) throws -> TokenSet? {
    try tokens.load(service: "bench", account: account)
}

func benchConcurrency(_ fixtures: Fixtures, plan: Plan) throws -> String {
    let count = 100
    let rounds = plan.concurrencyRounds
    let path = fixtures.newVaultPath("concurrency")
    let store = try EncryptedFileStore.create(at: path, credentials: [.keyFile(fixtures.keyFile)])
    let tokens = TokenRefresher(store: store, lockDirectory: FilePath(path.string + ".locks"))
    for index in 0..<count {
        try tokens.save(
            TokenSet(
                accessToken: SecretBytes(utf8: "access-\(index)"), refreshToken: SecretBytes(utf8: "refresh-\(index)"),
                expiresAt: Date(timeIntervalSinceNow: 3600)), service: "bench", account: "user\(index)")
    }
    var lines = [
        "### 100 concurrent token reads and writes: blocking API vs async API",
        "",
        "\(count) `TokenRefresher.load` (reads) or `TokenRefresher.save` (writes) started together from tasks on the cooperative pool, "
            + "over a file vault of \(count) token sets (key file); \(rounds) round(s) each. Latency: from the common start to "
            + "each call's return. Probe: a task sleeping 1 ms in a loop meanwhile; its lateness is how long the cooperative "
            + "pool kept it waiting (what every other request of a service would see). Executor: `BlockingExecutor.shared`, "
            + "\(BlockingExecutor.shared.threadCount) threads.",
        "",
        "| operation | API | p50 | p99 | max | all \(count) done (median round) | probe p50 lateness | probe p99 lateness | probe max |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for write in [false, true] {
        for useAsync in [false, true] {
            var latencies: [UInt64] = []
            var probe: [UInt64] = []
            var totals: [UInt64] = []
            for _ in 0..<rounds {
                let round = try concurrentTokenRound(tokens, count: count, write: write, async: useAsync)
                latencies += round.latencies
                probe += round.probeLateness
                totals.append(round.latencies.max() ?? 0)
            }
            let stats = Stats(latencies)
            let probeStats = Stats(probe)
            lines.append(
                "| \(write ? "write (save)" : "read (load)") | \(useAsync ? "async" : "blocking") | "
                    + "\(formatDuration(stats.median)) | \(formatDuration(stats.percentile(99))) | \(formatDuration(stats.percentile(100))) | "
                    + "\(formatDuration(Stats(totals).median)) | \(formatDuration(probeStats.median)) | "
                    + "\(formatDuration(probeStats.percentile(99))) | \(formatDuration(probeStats.percentile(100))) |")
        }
    }
    return lines.joined(separator: "\n") + "\n"
}
