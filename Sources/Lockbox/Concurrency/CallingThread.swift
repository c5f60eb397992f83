/// Runs async code to its end on the calling thread, blocking it meanwhile: how the blocking API
/// runs the one (async) implementation of each operation.
///
/// The task starts at once on this thread and has a task executor that is this thread: every
/// resumption after it suspended (for a lock, a memory reservation, an async store's answer) is
/// queued to the caller, which runs them until the task ends. Nothing of the call runs on
/// Swift's cooperative pool, and what it waits for in the library is released without the pool
/// (a hash's memory is given back by the thread that ran the hash). Still, a blocking call from a
/// thread of that pool waits, blocking the thread, for an item's lock held by an async-API task
/// of the same process, and that task needs the pool to finish: from async code, call the async
/// API. Over a blocking ``SecretStore`` called inline the task never suspends
/// and the whole operation runs on the caller's thread, as a plain function call would (about
/// 3.5 µs more, measured: docs/PERFORMANCE.md).
package enum CallingThread {
    /// The result of `body`, run on this thread (see ``CallingThread``).
    package static func run<Result: Sendable>(_ body: sending @escaping () async throws -> Result) throws -> Result {
        let executor = CallingThreadExecutor()
        let outcome = Locked<Swift.Result<Result, any Error>?>(nil)
        // `immediate`: the task starts here, now, instead of being queued to this thread first.
        Task.immediate(executorPreference: executor) {
            do {
                let value = try await body()
                outcome.withLock { $0 = .success(value) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            executor.finish()
        }
        executor.runJobs()
        guard let result = outcome.withLock({ $0 }) else {
            preconditionFailure("the calling thread's task ended without a result")
        }
        return try result.get()
    }
}

/// A task executor whose jobs the thread that made it runs, in ``runJobs()``, until ``finish()``.
private final class CallingThreadExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var finished = false
    }

    private let state = ConditionLock(State())

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        state.withLock { $0.jobs.append(job) }
        state.signalAll()
    }

    func finish() {
        state.withLock { $0.finished = true }
        state.signalAll()
    }

    /// Runs queued jobs, waiting for more, until the task has finished and none is left.
    func runJobs() {
        while true {
            let jobs = state.wait { state -> [UnownedJob]? in
                if !state.jobs.isEmpty {
                    defer { state.jobs.removeAll() }
                    return state.jobs
                }
                return state.finished ? [] : nil
            }
            if jobs.isEmpty { return }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}
