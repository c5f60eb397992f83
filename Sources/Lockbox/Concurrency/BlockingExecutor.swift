import CLinux
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// The threads Lockbox runs its blocking work on — Argon2id hashes, `fsync`, file locks and
/// libsecret calls — so that the async API never blocks a thread of Swift's cooperative pool.
///
/// A small pool of dedicated threads, like SwiftNIO's `NIOThreadPool`: ``run(_:)`` queues a
/// closure, a pool thread runs it, and the calling task is resumed with its result. A service's
/// route handlers await the result while the cooperative pool's few threads (one per core) go on
/// serving other requests.
///
/// - Jobs run in the order they were queued, at most ``threadCount`` at a time.
/// - **Cancellation**: a job still in the queue when its task is cancelled is dropped and
///   ``run(_:)`` throws `CancellationError`; a job already running finishes (a durable write is
///   never cut in half) and its result is returned.
/// - Concurrent Argon2id hashes are also capped by ``hashMemoryBudget`` (``HashMemoryBudget``), in
///   memory and in number (one less than the cores by default), so a burst of PIN verifies queues
///   — without holding a thread — instead of exhausting memory or taking every core: the thread
///   count stays large enough for the `fsync`, file-lock and libsecret waits of the other calls.
///
/// Threads start on the first job, not before: a program that only uses the blocking API never
/// starts one. ``shared`` is what every Lockbox type uses unless it is given another executor.
public final class BlockingExecutor: Sendable {
    /// How many jobs run at once at most.
    public let threadCount: Int
    /// How much lower than the process's other threads the executor's threads run: a nice
    /// increment, 0 (the same priority) to 19 (the lowest). See ``init(threadCount:hashMemoryBudget:niceness:)``.
    public let niceness: Int32
    /// The cap on concurrent Argon2id hashes (memory and number) that ``PinGuard`` observes.
    public let hashMemoryBudget: HashMemoryBudget
    private let queue: JobQueue

    /// The executor every Lockbox type uses unless told otherwise:
    /// ``defaultThreadCount`` threads and a ``HashMemoryBudget`` sized to the machine.
    public static let shared = BlockingExecutor()

    /// Twice the number of processors this process may use (``HashMemoryBudget/availableProcessors``),
    /// and at least 4: blocking work waits on disks, locks and D-Bus as much as it computes, and
    /// hashes are capped separately, by ``HashMemoryBudget/concurrentHashes`` and by memory.
    public static var defaultThreadCount: Int { max(4, 2 * HashMemoryBudget.availableProcessors) }

    /// Creates an executor.
    /// - Parameters:
    ///   - threadCount: how many jobs may run at once (at least 1).
    ///   - hashMemoryBudget: the cap on concurrent Argon2id hashes, in memory and in number.
    ///   - niceness: lowers the priority of the executor's threads by this nice increment
    ///     (clamped to 0...19; Linux gives each thread its own nice value): a service's request
    ///     threads then win the cores over Argon2id hashes, so a cheap route stays fast while PINs
    ///     are verified (docs/PERFORMANCE.md, "A service under PIN load"). 0 leaves the priority alone.
    public init(
        threadCount: Int = BlockingExecutor.defaultThreadCount, hashMemoryBudget: HashMemoryBudget = HashMemoryBudget(),
        niceness: Int32 = 0
    ) {
        self.threadCount = max(1, threadCount)
        self.hashMemoryBudget = hashMemoryBudget
        self.niceness = min(19, max(0, niceness))
        self.queue = JobQueue(threadLimit: self.threadCount, niceness: self.niceness)
    }

    deinit { queue.shutDown() }

    /// Runs `work` on one of the executor's threads and returns its result (or throws its error).
    ///
    /// Throws `CancellationError` without running `work` if the task is cancelled before a
    /// thread takes the job; once `work` has started it runs to the end.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try Task.checkCancellation()
        let job = Job()
        // The result crosses from the executor's thread to the task through a mutex, which
        // ThreadSanitizer sees, not only through the continuation (whose resumption from a thread
        // of our own it does not always see as ordering the two).
        let outcome = Locked<Swift.Result<Result, any Error>?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let queued = job.prepare(
                    run: {
                        let result = Swift.Result(catching: work)
                        outcome.withLock { $0 = result }
                        continuation.resume()
                    },
                    cancel: { continuation.resume(throwing: CancellationError()) })
                if queued { queue.push(job) }
            }
        } onCancel: {
            job.cancel()
        }
        guard let result = outcome.withLock({ $0 }) else { throw CancellationError() }
        return try result.get()
    }

    /// Runs `work` on one of the executor's threads holding `bytes` of ``hashMemoryBudget``,
    /// taken when the job is admitted and given back on that thread the moment `work` returns.
    ///
    /// While memory is short the job, not the calling task, waits in the budget's queue: no thread
    /// is held, and giving the memory back never waits for the calling task to be scheduled
    /// again. (A reservation held by a task across an `await` does: with every thread of Swift's
    /// cooperative pool blocked in a blocking-API call that waits for that memory, the task could
    /// not run to give it back.) Cancelling the calling task before the job starts throws
    /// `CancellationError`; admitted memory of a cancelled job is given back unused.
    package func runHoldingHashMemory<Result: Sendable>(
        _ bytes: UInt64, _ work: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        try Task.checkCancellation()
        let budget = hashMemoryBudget
        // Admitted memory of a job cancelled before a worker took it goes back unused.
        let job = Job(skipped: { budget.release(bytes) })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
                let prepared = job.prepare(
                    run: {
                        let result = Swift.Result(catching: work)
                        budget.release(bytes)
                        continuation.resume(with: result)
                    },
                    cancel: { continuation.resume(throwing: CancellationError()) })
                if prepared { budget.whenAdmitted(bytes) { [queue] in queue.push(job) } }
            }
        } onCancel: {
            job.cancel()
        }
    }

    /// What the executor is doing now: for tests, metrics and diagnosis.
    public var statistics: Statistics { queue.statistics }

    /// A reading of the executor's queue.
    public struct Statistics: Sendable, Equatable {
        /// Jobs waiting for a thread (cancelled ones not counted).
        public var queued: Int
        /// Jobs running now.
        public var running: Int
        /// Threads started so far.
        public var threads: Int
    }
}

/// One queued closure and where it stands. Cancellation and a thread taking the job race; the
/// phase decides which one wins, so the continuation is resumed exactly once.
private final class Job: Sendable {
    private enum Phase {
        case created
        case queued(run: @Sendable () -> Void, cancel: @Sendable () -> Void)
        case cancelledBeforeQueueing
        case taken
    }

    private let phase = Locked<Phase>(.created)
    /// What the worker that dequeues the job after it was cancelled does instead of running it
    /// (a job is queued, and so dequeued, once).
    private let skipped: (@Sendable () -> Void)?

    init(skipped: (@Sendable () -> Void)? = nil) {
        self.skipped = skipped
    }

    /// Records what to run and how to cancel; returns `false` (having cancelled) if the task
    /// was cancelled before the job reached the queue.
    func prepare(run: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) -> Bool {
        let cancelledAlready = phase.withLock { phase -> Bool in
            if case .cancelledBeforeQueueing = phase { return true }
            phase = .queued(run: run, cancel: cancel)
            return false
        }
        if cancelledAlready { cancel() }
        return !cancelledAlready
    }

    /// Drops the job if no thread has taken it yet.
    func cancel() {
        let cancel = phase.withLock { phase -> (@Sendable () -> Void)? in
            switch phase {
            case .created:
                phase = .cancelledBeforeQueueing
                return nil
            case .queued(_, let cancel):
                phase = .taken
                return cancel
            case .cancelledBeforeQueueing, .taken:
                return nil
            }
        }
        cancel?()
    }

    /// The closure to run, or `nil` if the job was cancelled meanwhile.
    func take() -> (@Sendable () -> Void)? {
        phase.withLock { phase in
            guard case .queued(let run, _) = phase else { return nil }
            phase = .taken
            return run
        }
    }

    /// Called by the worker that dequeued the job when ``take()`` found it cancelled.
    func skip() {
        skipped?()
    }

    var isWaiting: Bool {
        phase.withLock { phase in
            if case .queued = phase { return true }
            return false
        }
    }
}

/// The FIFO the pool threads take jobs from, and the threads themselves (started on demand).
private final class JobQueue: Sendable {
    private struct State {
        var jobs: [Job] = []
        var head = 0
        var running = 0
        var idle = 0
        var threads = 0
        var shuttingDown = false
    }

    private let state = ConditionLock(State())
    private let threadLimit: Int
    private let niceness: Int32

    init(threadLimit: Int, niceness: Int32) {
        self.threadLimit = threadLimit
        self.niceness = niceness
    }

    func push(_ job: Job) {
        let startThread = state.withLock { state -> Bool in
            state.jobs.append(job)
            // A new thread only when the idle ones cannot take every waiting job.
            guard state.jobs.count - state.head > state.idle, state.threads < threadLimit else { return false }
            state.threads += 1
            return true
        }
        state.signalAll()
        if startThread {
            let started = startDetachedThread(name: "lockbox-blocking") { [self] in
                lowerPriority()
                work()
            }
            // Refused (the process's thread limit): uncount it, so the next push tries again. The
            // threads already running take the job meanwhile; with none running, it waits for
            // that next push.
            if !started { state.withLock { $0.threads -= 1 } }
        }
    }

    func shutDown() {
        state.withLock { $0.shuttingDown = true }
        state.signalAll()
    }

    var statistics: BlockingExecutor.Statistics {
        let (waiting, running, threads) = state.withLock { ($0.jobs[$0.head...], $0.running, $0.threads) }
        return BlockingExecutor.Statistics(queued: waiting.filter(\.isWaiting).count, running: running, threads: threads)
    }

    /// Raises this thread's nice value by ``niceness`` (Linux: `setpriority` on the thread's ID
    /// sets that thread's alone). Raising it needs no privilege; a failure leaves the priority as
    /// it was, which is only slower, never wrong.
    private func lowerPriority() {
        guard niceness > 0 else { return }
        let thread = id_t(lockbox_gettid())
        errno = 0
        let current = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread)
        guard errno == 0 else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, min(19, current + niceness))
    }

    /// A pool thread: take the oldest job, run it, repeat; leave when shut down and drained.
    private func work() {
        while true {
            var countedIdle = false
            let next = state.wait { state -> Job?? in
                if state.head < state.jobs.count {
                    let job = state.jobs[state.head]
                    state.head += 1
                    if state.head > 64 && state.head * 2 > state.jobs.count {
                        state.jobs.removeFirst(state.head)
                        state.head = 0
                    }
                    if countedIdle { state.idle -= 1 }
                    return .some(job)
                }
                if state.shuttingDown {
                    if countedIdle { state.idle -= 1 }
                    state.threads -= 1
                    return .some(nil)
                }
                if !countedIdle {
                    state.idle += 1
                    countedIdle = true
                }
                return nil
            }
            guard let job = next else { return }
            guard let run = job.take() else {
                job.skip()
                continue
            }
            state.withLock { $0.running += 1 }
            run()
            state.withLock { $0.running -= 1 }
        }
    }
}
