import CLinux
import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A door tests hold shut: threads that `pass()` it block until `open()`. It also counts who is
/// inside now and the most that were inside at once.
final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false
    private var inside = 0
    private var entered = 0
    private var peak = 0

    /// Blocks until the gate opens; counted as inside meanwhile.
    func pass() {
        condition.lock()
        inside += 1
        entered += 1
        peak = max(peak, inside)
        condition.broadcast()
        while !isOpen { condition.wait() }
        inside -= 1
        condition.unlock()
    }

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    var counts: (inside: Int, entered: Int, peak: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (inside, entered, peak)
    }

    /// Waits, blocking this thread, until `entered` reaches `count` or ``patience`` passes;
    /// returns whether it did.
    func waitForEntered(_ count: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(patience)
        while entered < count { if !condition.wait(until: deadline) { return false } }
        return true
    }

    /// A PIN hasher whose comparisons wait at this gate (hashing itself is libsodium's).
    var hasher: PinHasher {
        PinHasher(
            hash: PinHasher.argon2id.hash,
            verify: { [self] hash, pin in
                pass()
                return PinHasher.argon2id.verify(hash, pin)
            })
    }
}

/// A task executor that runs its jobs on a thread of its own only while started: held, a task
/// preferring it cannot run again, as on a cooperative pool whose threads are all blocked.
final class HeldExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var running = false
    private var stopped = false
    private var threadStarted = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.broadcast()
        condition.unlock()
    }

    /// Runs queued and later jobs until ``hold()``.
    func start() {
        condition.lock()
        defer { condition.unlock() }
        running = true
        condition.broadcast()
        guard !threadStarted else { return }
        threadStarted = true
        // Not kept: the thread's block holds this executor until the thread ends, no longer.
        Thread { [self] in
            while true {
                condition.lock()
                while !stopped && (!running || jobs.isEmpty) { condition.wait() }
                if stopped {
                    condition.unlock()
                    return
                }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }.start()
    }

    /// Keeps later jobs queued, unrun, until ``start()``.
    func hold() {
        condition.lock()
        running = false
        condition.unlock()
    }

    /// Ends the thread (jobs still queued are never run).
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}

/// How long the concurrency tests wait for something that should happen at once before they call
/// it a failure: long, because in the full suite other tests block the cooperative pool for many
/// seconds at a time (running processes synchronously), and these tests must not fail for that;
/// only a library that blocks the pool for good makes them wait this long. The tasks a test
/// starts to put the executor or the budget into a state start with `Task.immediate`: they run on
/// the test's own thread up to their first suspension, instead of queueing for a pool thread
/// behind every other test of the suite (under a loaded machine, longer than this patience).
/// Where the test's subject is not the cooperative pool itself, they also prefer ``ownThread``, so
/// that they resume there after that suspension (a store call on the executor, say) rather than
/// behind every other test's job on the global concurrent executor: the sanitized suite queues
/// minutes of them.
let patience: TimeInterval = 300

/// A started ``HeldExecutor``: a thread of the tests' own that tasks can prefer.
let ownThread: HeldExecutor = {
    let executor = HeldExecutor()
    executor.start()
    return executor
}()

/// Polls `condition` from a task (sleeping 1 ms between checks) for up to ``patience`` of wall
/// time; returns whether it held. Also for a `BlockingExecutor`'s `running` count: a worker
/// counts its job until just after the job has resumed its caller, so on a loaded machine the
/// thread of an operation that has already returned can still count for a moment.
func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(patience)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return condition()
}

/// How many of 1,000 yields a new unstructured task gets through (all of them, unless the
/// cooperative pool is blocked for good): the probe that the pool is free.
func trivialTaskSteps() async -> Int {
    await Task {
        var steps = 0
        for _ in 0..<1_000 {
            await Task.yield()
            steps += 1
        }
        return steps
    }.value
}

/// Opens `gate` from a plain thread if `done` is not signalled within ``patience``, so a test
/// whose cooperative pool is blocked for good fails instead of hanging; `firedValue` says whether
/// it had to.
final class Watchdog: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let fired = Locked(false)

    init(opening gate: Gate) {
        let thread = Thread { [done, fired] in
            if done.wait(timeout: .now() + patience) == .timedOut {
                fired.withLock { $0 = true }
                gate.open()
            }
        }
        thread.start()
    }

    func finish() { done.signal() }
    var firedValue: Bool { fired.withLock { $0 } }
}

@Suite("Async API: the executor, the hash memory budget, cancellation")
struct AsyncAPITests {
    let folder: TemporaryFolder
    init() throws { folder = try TemporaryFolder() }

    /// Starts a thread per profile, each verifying the right PIN ("4739") through the blocking API;
    /// the returned function waits for every thread (each within `patience`) and gives how many
    /// verifies failed.
    func verifyOnThreads(_ pins: PinGuard, _ profiles: [PinProfile]) -> () -> Int {
        let failures = Locked(0)
        let finished = DispatchSemaphore(value: 0)
        for profile in profiles {
            Thread {
                if (try? pins.verify(profile, pin: pin("4739"))) == nil { failures.withLock { $0 += 1 } }
                finished.signal()
            }.start()
        }
        return {
            for _ in profiles { #expect(finished.wait(timeout: .now() + patience) == .success) }
            return failures.withLock { $0 }
        }
    }

    func guardian(_ store: any SecretStore, gate: Gate, executor: BlockingExecutor, preset: PinPreset.FailureRecording = .beforeComparing)
        -> PinGuard
    {
        PinGuard(
            store: store, hashParameters: cheapHash, lockDirectory: folder.file("locks"), hasher: gate.hasher,
            failureRecording: preset, executor: executor)
    }

    @Test("20 async verifies stuck in Argon2id leave the cooperative pool free: a trivial task keeps making progress")
    func cooperativePoolStaysFree() async throws {
        let gate = Gate()
        // Four hashes at once (the default cap is one less than the cores), to fill the executor.
        let executor = BlockingExecutor(threadCount: 4, hashMemoryBudget: HashMemoryBudget(concurrentHashes: 4))
        let store = MemoryStore()
        let pins = guardian(store, gate: gate, executor: executor)
        let profiles = (0..<20).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try await pins.set(profile, pin: pin("4739")) }

        let watchdog = Watchdog(opening: gate)
        let verifies = profiles.map { profile in Task.immediate { try await pins.verify(profile, pin: pin("4739")) } }
        // Every executor thread is now inside a comparison that waits at the gate.
        #expect(await eventually { gate.counts.inside == 4 })
        // A trivial task still gets the cooperative pool's threads, over and over.
        let steps = await trivialTaskSteps()
        let atFinish = gate.counts
        watchdog.finish()
        #expect(steps == 1_000)
        #expect(!watchdog.firedValue, "the trivial task could not run while the verifies were blocked")
        #expect(atFinish.inside == 4 && atFinish.entered == 4, "the progress happened while the hashes were still blocked")
        gate.open()
        for verify in verifies { try await verify.value }
        #expect(gate.counts.entered == 20)
    }

    @Test("the memory budget caps hashes in flight at K = budget / hash memory; the rest queue and all finish")
    func memoryBudgetCapsHashes() async throws {
        let gate = Gate()
        // Room for exactly two 8 KiB hashes; the hash-count cap is above that, so memory is what binds.
        let budget = HashMemoryBudget(bytes: 2 * cheapHash.memoryLimitBytes, concurrentHashes: 8)
        let executor = BlockingExecutor(threadCount: 8, hashMemoryBudget: budget)
        let pins = guardian(MemoryStore(), gate: gate, executor: executor)
        let profiles = (0..<10).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try await pins.set(profile, pin: pin("4739")) }

        let verifies = profiles.map { profile in
            Task.immediate(executorPreference: ownThread) { try await pins.verify(profile, pin: pin("4739")) }
        }
        // A reservation is taken before its thread reaches the hash, so wait for both to arrive
        // (under AddressSanitizer on a loaded machine the second can take a while).
        #expect(
            await eventually { budget.statistics.inFlight == 2 && budget.statistics.waiting == 8 && gate.counts.inside == 2 },
            "two hashes run; eight wait for memory")
        #expect(gate.counts.inside == 2 && budget.statistics.inFlight == 2, "never more than two: the budget holds")
        #expect(await eventually { executor.statistics.running == 2 }, "the eight waiting for memory hold no thread")
        gate.open()
        for verify in verifies { try await verify.value }
        #expect(gate.counts.peak == 2 && gate.counts.entered == 10)
        #expect(budget.statistics == HashMemoryBudget.Statistics(inFlight: 0, peakInFlight: 2, bytesInUse: 0, waiting: 0))
    }

    @Test("a cap of one concurrent hash admits one hash at a time, whatever the memory; the rest queue without threads")
    func concurrentHashCapAdmitsOne() async throws {
        let gate = Gate()
        // Memory for a thousand hashes and eight threads: only the hash-count cap can bind.
        let budget = HashMemoryBudget(bytes: 1_000 * cheapHash.memoryLimitBytes, concurrentHashes: 1)
        let executor = BlockingExecutor(threadCount: 8, hashMemoryBudget: budget)
        let pins = guardian(MemoryStore(), gate: gate, executor: executor)
        let profiles = (0..<6).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try await pins.set(profile, pin: pin("4739")) }

        let verifies = profiles.map { profile in
            Task.immediate(executorPreference: ownThread) { try await pins.verify(profile, pin: pin("4739")) }
        }
        // Wait for the state — one hash at the gate, five queued in the budget — never sleep and hope.
        #expect(
            await eventually { budget.statistics.inFlight == 1 && budget.statistics.waiting == 5 && gate.counts.inside == 1 },
            "one hash runs; five wait for a hash slot")
        #expect(await eventually { executor.statistics.running == 1 }, "the five waiting for a slot hold no executor thread")
        // The executor's other threads stay free for work that is not a hash.
        let vault = Vault(store: MemoryStore(), executor: executor)
        try await vault.set("value", service: "other", account: "work")
        #expect(try await vault.string(service: "other", account: "work") == "value")
        #expect(gate.counts.inside == 1 && budget.statistics.inFlight == 1, "still one hash, while other work ran beside it")
        gate.open()
        for verify in verifies { try await verify.value }
        #expect(gate.counts.peak == 1 && gate.counts.entered == 6)
        #expect(budget.statistics == HashMemoryBudget.Statistics(inFlight: 0, peakInFlight: 1, bytesInUse: 0, waiting: 0))
    }

    @Test("blocking callers obey the hash-count cap too: four threads verifying, one hashes at a time")
    func concurrentHashCapHoldsForBlockingCallers() throws {
        let gate = Gate()
        let budget = HashMemoryBudget(bytes: 1_000 * cheapHash.memoryLimitBytes, concurrentHashes: 1)
        let pins = guardian(MemoryStore(), gate: gate, executor: BlockingExecutor(hashMemoryBudget: budget))
        let profiles = (0..<4).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try pins.set(profile, pin: pin("4739")) }
        let joinVerifies = verifyOnThreads(pins, profiles)
        #expect(gate.waitForEntered(1))
        // The other three block in the budget's queue, not at the gate.
        let deadline = Date().addingTimeInterval(patience)
        while budget.statistics.waiting < 3 && Date() < deadline { usleep(1_000) }
        #expect(budget.statistics.waiting == 3 && budget.statistics.inFlight == 1 && gate.counts.inside == 1)
        gate.open()
        let failed = joinVerifies()
        #expect(gate.counts.peak == 1 && gate.counts.entered == 4 && failed == 0)
        #expect(budget.statistics.peakInFlight == 1 && budget.statistics.inFlight == 0)
    }

    @Test("the default hash cap is one less than the cores this process may use, and at least 1")
    func defaultConcurrentHashes() throws {
        let cores = HashMemoryBudget.availableProcessors
        #expect(cores >= 1 && cores <= ProcessInfo.processInfo.processorCount)
        #expect(HashMemoryBudget.defaultConcurrentHashes == max(1, cores - 1))
        #expect(HashMemoryBudget().concurrentHashes == HashMemoryBudget.defaultConcurrentHashes)
        #expect(HashMemoryBudget(concurrentHashes: 0).concurrentHashes == 1, "a cap below 1 would admit nothing")
        // Outside a CPU quota, the cores are the affinity mask's, as `nproc` counts them.
        if (try? String(contentsOfFile: "/sys/fs/cgroup/cpu.max", encoding: .utf8))
            .flatMap(HashMemoryBudget.coresAllowed(byCPUMax:)) == nil
        {
            let nproc = Process()
            nproc.executableURL = URL(fileURLWithPath: "/usr/bin/nproc")
            nproc.environment = [:]  // OMP_NUM_THREADS would change its answer
            let output = Pipe()
            nproc.standardOutput = output
            try nproc.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            nproc.waitUntilExit()
            #expect(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) == cores)
        }
    }

    @Test("a cgroup cpu.max quota counts as its cores, rounded up; `max` and malformed lines set no limit")
    func cpuMaxParsing() {
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "200000 100000\n") == 2)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "150000 100000") == 2)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "50000 100000") == 1)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "max 100000\n") == nil)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "0 100000") == nil)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "100000 0") == nil)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "") == nil)
        #expect(HashMemoryBudget.coresAllowed(byCPUMax: "-1 100000") == nil)
    }

    @Test("a hash's memory is given back by the thread that ran it: a blocking caller never waits for an async caller's task to run again")
    func budgetReleasedWithoutTheHoldersTask() async throws {
        // The deadlock this guards against (seen under AddressSanitizer on 2 cores): an async
        // verify holding the only hash slot across its `await`s, and both threads of the
        // cooperative pool blocked in blocking-API verifies waiting for that slot, so the async
        // task could never run again to give it back. Here the async verify's task runs on an
        // executor that holds its jobs (as a blocked pool would), deterministically.
        let gate = Gate()
        let budget = HashMemoryBudget(bytes: 1_000 * cheapHash.memoryLimitBytes, concurrentHashes: 1)
        let pins = guardian(MemoryStore(), gate: gate, executor: BlockingExecutor(hashMemoryBudget: budget))
        let alice = PinProfile(service: "svc", name: "alice")
        let bob = PinProfile(service: "svc", name: "bob")
        try await pins.set(alice, pin: pin("4739"))
        try await pins.set(bob, pin: pin("4739"))
        let stalled = HeldExecutor()
        let asyncVerify = Task(executorPreference: stalled) { try await pins.verify(alice, pin: pin("4739")) }
        // Until started, the held executor runs nothing: the task must first run there.
        stalled.start()
        #expect(gate.waitForEntered(1), "the async verify's hash is running")
        stalled.hold()
        let joinBlocking = verifyOnThreads(pins, [bob])
        #expect(await eventually { budget.statistics.waiting == 1 }, "the blocking verify waits for the hash slot")
        gate.open()
        // The async verify's hash returned; its task cannot run (its executor holds its jobs).
        #expect(joinBlocking() == 0, "the blocking verify got the slot without the async task running again")
        stalled.start()
        try await asyncVerify.value
        #expect(budget.statistics == HashMemoryBudget.Statistics(inFlight: 0, peakInFlight: 1, bytesInUse: 0, waiting: 0))
        stalled.stop()
    }

    @Test("blocking callers share the same budget: six threads verifying, at most two hash at once")
    func memoryBudgetCapsBlockingCallers() throws {
        let gate = Gate()
        let budget = HashMemoryBudget(bytes: 2 * cheapHash.memoryLimitBytes, concurrentHashes: 8)
        let pins = guardian(MemoryStore(), gate: gate, executor: BlockingExecutor(hashMemoryBudget: budget))
        let profiles = (0..<6).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try pins.set(profile, pin: pin("4739")) }
        let joinVerifies = verifyOnThreads(pins, profiles)
        #expect(gate.waitForEntered(2))
        #expect(budget.statistics.inFlight == 2)
        gate.open()
        let failed = joinVerifies()
        #expect(gate.counts.peak == 2 && gate.counts.entered == 6 && failed == 0)
        #expect(budget.statistics.inFlight == 0)
    }

    @Test("same-profile verifies wait for the profile's lock without holding executor threads")
    func sameProfileWaitsWithoutThreads() async throws {
        let gate = Gate()
        let executor = BlockingExecutor(threadCount: 2)
        let pins = guardian(MemoryStore(), gate: gate, executor: executor)
        let profile = PinProfile(service: "svc", name: "alice")
        try await pins.set(profile, pin: pin("4739"))
        let verifies = (0..<10).map { _ in
            Task.immediate(executorPreference: ownThread) { try await pins.verify(profile, pin: pin("4739")) }
        }
        #expect(await eventually { gate.counts.inside == 1 })
        // Nine verifies wait for the lock; one executor thread is free for anything else.
        let vault = Vault(store: MemoryStore(), executor: executor)
        try await vault.set("value", service: "other", account: "work")
        #expect(try await vault.string(service: "other", account: "work") == "value")
        #expect(await eventually { executor.statistics.running == 1 })
        gate.open()
        for verify in verifies { try await verify.value }
        #expect(gate.counts.peak == 1 && gate.counts.entered == 10)
    }

    @Test("cancelling a queued job drops it (CancellationError, never run); a running job finishes and returns")
    func executorCancellation() async throws {
        let gate = Gate()
        let executor = BlockingExecutor(threadCount: 1)
        let ran = Locked<[String]>([])
        let first = Task.immediate(executorPreference: ownThread) {
            try await executor.run {
                gate.pass()
                ran.withLock { $0.append("first") }
                return 1
            }
        }
        #expect(await eventually { gate.counts.inside == 1 })
        let second = Task.immediate(executorPreference: ownThread) {
            try await executor.run {
                ran.withLock { $0.append("second") }
                return 2
            }
        }
        #expect(await eventually { executor.statistics.queued == 1 })
        second.cancel()
        first.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(executor.statistics.queued == 0)
        gate.open()
        #expect(try await first.value == 1, "work already started finishes, and its result is returned")
        #expect(ran.withLock { $0 } == ["first"])
    }

    @Test("cancelling a verify waiting for the profile's lock abandons it before anything is counted")
    func verifyCancelledWhileWaiting() async throws {
        let gate = Gate()
        let pins = guardian(MemoryStore(), gate: gate, executor: BlockingExecutor(threadCount: 2))
        let profile = PinProfile(service: "svc", name: "alice")
        try await pins.set(profile, pin: pin("4739"))
        let holder = Task.immediate(executorPreference: ownThread) { try await pins.verify(profile, pin: pin("4739")) }
        #expect(await eventually { gate.counts.inside == 1 })
        let waiter = Task.immediate(executorPreference: ownThread) { try await pins.verify(profile, pin: pin("0000")) }
        try await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        gate.open()
        try await holder.value
        #expect(try await pins.status(profile).failures == 0, "the cancelled wrong try was never counted")
        #expect(gate.counts.entered == 1)
    }

    @Test("cancelling a task waiting for hash memory takes it out of the queue")
    func budgetCancellation() async throws {
        let budget = HashMemoryBudget(bytes: 10)
        let held = try await budget.reserve(10)
        let waiter = Task.immediate(executorPreference: ownThread) { try await budget.reserve(10) }
        #expect(await eventually { budget.statistics.waiting == 1 })
        waiter.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiter.value }
        #expect(budget.statistics.waiting == 0 && budget.statistics.inFlight == 1)
        held.release()
        held.release()
        #expect(budget.statistics.inFlight == 0 && budget.statistics.bytesInUse == 0)
        // One hash bigger than the whole budget still runs, alone.
        let big = try await budget.reserve(100)
        #expect(budget.statistics.inFlight == 1)
        big.release()
    }

    @Test("the async variants of Vault, TokenRefresher, DeviceIdentity, SignOut and Transfer give the blocking results")
    func asyncVariants() async throws {
        let store = MemoryStore()
        let vault = Vault(store: store)
        try await vault.set("s3cret", service: "svc", account: "a")
        #expect(try await vault.string(service: "svc", account: "a") == "s3cret")
        #expect(try await vault.require(service: "svc", account: "a") == SecretBytes(utf8: "s3cret"))
        #expect(try await vault.metadata(service: "svc", account: "a")?.key.account == "a")
        #expect(try await vault.list(service: "svc").count == 1)

        let tokens = TokenRefresher(store: store, lockDirectory: folder.file("token-locks"))
        let set = TokenSet(
            accessToken: SecretBytes(utf8: "at"), refreshToken: SecretBytes(utf8: "rt"), expiresAt: Date().addingTimeInterval(3600))
        try await tokens.save(set, service: "svc", account: "t")
        #expect(try await tokens.load(service: "svc", account: "t")?.accessToken == SecretBytes(utf8: "at"))

        let identity = DeviceIdentity(store: store, lockDirectory: folder.file("id-locks"))
        let id = try await identity.deviceID(service: "svc")
        #expect(try await identity.deviceID(service: "svc") == id)

        let offloaded = store.offloaded()
        #expect(try await offloaded.list(service: "svc").count == 3)

        let backup = MemoryStore()
        let report = try await Transfer.run(from: store, to: backup, service: "svc")
        #expect(report.copied.count == 3)
        let signOut = try await SignOut.run(service: "svc", store: store, keepDeviceID: true)
        #expect(signOut.removed.count == 2 && signOut.kept.count == 1)
        #expect(try await tokens.clear(service: "svc", account: "t") == false)
        #expect(try await vault.wipeAll() == 1)
    }
}

extension AsyncAPITests {
    @Test("an executor with a niceness runs its jobs that much lower than the thread that made it; 0 leaves them alone")
    func nicenessLowersTheExecutorsThreads() async throws {
        @Sendable func niceOfThisThread() -> Int32 {
            getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(lockbox_gettid()))
        }
        let base = niceOfThisThread()
        let lowered = try await BlockingExecutor(threadCount: 1, niceness: 5).run { niceOfThisThread() }
        #expect(lowered == min(19, base + 5))
        let unchanged = try await BlockingExecutor(threadCount: 1).run { niceOfThisThread() }
        #expect(unchanged == base)
        #expect(BlockingExecutor(niceness: 40).niceness == 19 && BlockingExecutor(niceness: -3).niceness == 0)
        #expect(LockboxConfiguration(vaultPath: "/v", blockingThreadNiceness: 7).makeExecutor().niceness == 7)
        #expect(caughtError { try LockboxConfiguration(vaultPath: "/v", blockingThreadNiceness: 20).validate() }?.code == .invalidArgument)
    }
}
