import CLinux
import FoundationEssentials

/// A cap on the memory and on the number of cores that concurrent Argon2id hashes may use at
/// once; the hashes beyond it wait their turn, first come first served.
///
/// Each Argon2id hash allocates its whole memory cost (256 MiB for the desktop PIN preset, 19 MiB
/// for the server one) and keeps one core busy for its duration. Twenty PIN verifies arriving
/// together would otherwise allocate twenty times that and take every core from the service's
/// other requests. ``PinGuard`` reserves a hash's memory here before hashing: while fewer than
/// ``concurrentHashes`` hashes run and the reservations in force plus the new one fit in
/// ``bytes``, it runs; otherwise it waits in a FIFO queue — a blocking caller on its own thread,
/// an async caller suspended without holding a thread (nor a thread of the ``BlockingExecutor``,
/// whose threads stay free for `fsync`, file locks and libsecret calls). One hash larger than the
/// whole memory budget still runs, alone.
///
/// The defaults fit the machine or container the process runs in:
/// - ``defaultBytes``: a quarter of the memory this process may use, the smaller of the machine's
///   physical memory and the cgroup limit (`memory.max`) of a container;
/// - ``defaultConcurrentHashes``: one less than the cores this process may use
///   (``availableProcessors``), and at least 1 — a core stays free for the requests that do not
///   hash, so a service's cheap routes stay fast while PINs are verified.
public final class HashMemoryBudget: Sendable {
    /// The memory all hashes in flight may use together, in bytes.
    public var bytes: UInt64 { requestedBytes ?? Self.machineDefaultBytes }
    /// How many hashes may run at once, whatever their memory.
    public var concurrentHashes: Int { requestedConcurrentHashes ?? Self.machineDefaultConcurrentHashes }
    /// The budget asked for; `nil` for ``defaultBytes``, which is read from the system only when
    /// a hash is first budgeted (a command that hashes nothing never reads `memory.max`).
    private let requestedBytes: UInt64?
    /// The hash cap asked for; `nil` for ``defaultConcurrentHashes``, read on first use.
    private let requestedConcurrentHashes: Int?
    private let state = ConditionLock(State())

    private struct State {
        var inUse: UInt64 = 0
        var inFlight = 0
        var peakInFlight = 0
        var nextTicket: UInt64 = 0
        var waiting: [Waiter] = []
        var admitted: Set<UInt64> = []
    }

    private struct Waiter {
        var ticket: UInt64
        var bytes: UInt64
        /// Resumes an async waiter; `nil` for a blocking one (it wakes on the condition).
        var resume: (@Sendable (_ admitted: Bool) -> Void)?
    }

    /// Creates a budget.
    /// - Parameters:
    ///   - bytes: the memory all hashes in flight may use together (at least 1); `nil`:
    ///     ``defaultBytes``, computed on first use.
    ///   - concurrentHashes: how many hashes may run at once (at least 1); `nil`:
    ///     ``defaultConcurrentHashes``, computed on first use.
    public init(bytes: UInt64? = nil, concurrentHashes: Int? = nil) {
        requestedBytes = bytes.map { max(1, $0) }
        requestedConcurrentHashes = concurrentHashes.map { max(1, $0) }
    }

    /// ``defaultBytes``, read once per process (Swift initializes a static `let` on first access).
    private static let machineDefaultBytes = defaultBytes
    /// ``defaultConcurrentHashes``, read once per process.
    private static let machineDefaultConcurrentHashes = defaultConcurrentHashes

    /// A quarter of the memory this process may use (physical memory, or less under a cgroup
    /// `memory.max`), and at least 64 MiB.
    public static var defaultBytes: UInt64 {
        var available = ProcessInfo.processInfo.physicalMemory
        if let text = try? String(contentsOfFile: "/sys/fs/cgroup/memory.max", encoding: .utf8),
            let limit = UInt64(text.trimmingWhiteSpace())
        {
            available = min(available, limit)
        }
        return max(64 << 20, available / 4)
    }

    /// One less than ``availableProcessors``, and at least 1: on 2 cores one hash at a time, on 8
    /// cores seven.
    public static var defaultConcurrentHashes: Int { max(1, availableProcessors - 1) }

    /// The cores this process may use, as a container sees them: the CPUs of its affinity mask
    /// (`sched_getaffinity`: `taskset`, a cpuset), fewer under a cgroup CPU quota
    /// (`/sys/fs/cgroup/cpu.max`, `QUOTA PERIOD`: the quota rounded up to whole cores), and at least 1.
    public static var availableProcessors: Int {
        let affinity = Int(lockbox_affinity_cpu_count())
        var cores = affinity > 0 ? affinity : ProcessInfo.processInfo.activeProcessorCount
        if let text = try? String(contentsOfFile: "/sys/fs/cgroup/cpu.max", encoding: .utf8),
            let quotaCores = coresAllowed(byCPUMax: text)
        {
            cores = min(cores, quotaCores)
        }
        return max(1, cores)
    }

    /// The whole cores a cgroup v2 `cpu.max` line (`QUOTA PERIOD`, or `max PERIOD` for no limit)
    /// allows, rounded up; `nil` when it sets no limit or cannot be read.
    static func coresAllowed(byCPUMax text: String) -> Int? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let quota = UInt64(fields[0]), let period = UInt64(fields[1]), quota > 0, period > 0 else {
            return nil
        }
        return Int(clamping: (quota + period - 1) / period)
    }

    /// A reading of the budget, for tests, metrics and diagnosis.
    public struct Statistics: Sendable, Equatable {
        /// Hashes holding a reservation now.
        public var inFlight: Int
        /// The most hashes that held a reservation at once since the budget was created.
        public var peakInFlight: Int
        /// Bytes reserved now.
        public var bytesInUse: UInt64
        /// Hashes waiting for memory or for a hash slot (``concurrentHashes``).
        public var waiting: Int
    }

    /// The budget's state now.
    public var statistics: Statistics {
        state.withLock { Statistics(inFlight: $0.inFlight, peakInFlight: $0.peakInFlight, bytesInUse: $0.inUse, waiting: $0.waiting.count) }
    }

    /// Runs `body` holding a reservation of `bytes`, blocking this thread while the budget is full.
    public func withReservation<Result>(of bytes: UInt64, _ body: () throws -> Result) rethrows -> Result {
        let ticket = state.withLock { state -> UInt64? in
            if admitsNow(bytes, &state) { return nil }
            return enqueue(bytes, resume: nil, &state)
        }
        if let ticket {
            state.wait { state -> Void? in state.admitted.remove(ticket) == nil ? nil : () }
        }
        defer { release(bytes) }
        return try body()
    }

    /// Reserves `bytes`, suspending (not blocking a thread) while the budget is full; give it back
    /// with ``HashMemoryReservation/release()``. Throws `CancellationError` if the task is cancelled
    /// while it waits.
    public func reserve(_ bytes: UInt64) async throws -> HashMemoryReservation {
        try Task.checkCancellation()
        // The waiter's ticket once queued, and whether its task was cancelled: cancellation and
        // queueing race, and whichever comes second sees the other.
        let wait = Locked<(ticket: UInt64?, cancelled: Bool)>((nil, false))
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case admitted, cancelled, waiting }
                let outcome = state.withLock { state -> Outcome in
                    if admitsNow(bytes, &state) { return .admitted }
                    return wait.withLock { wait in
                        if wait.cancelled { return .cancelled }
                        wait.ticket = enqueue(
                            bytes,
                            resume: { admitted in
                                if admitted { continuation.resume() } else { continuation.resume(throwing: CancellationError()) }
                            }, &state)
                        return .waiting
                    }
                }
                switch outcome {
                case .admitted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting: break
                }
            }
        } onCancel: {
            let ticket = wait.withLock { wait -> UInt64? in
                wait.cancelled = true
                return wait.ticket
            }
            guard let ticket else { return }
            let resume = state.withLock { state -> (@Sendable (Bool) -> Void)? in
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.waiting.remove(at: index).resume
            }
            // Still waiting, so it never got memory: it gives up, and those behind it may fit now.
            resume?(false)
            if resume != nil { admitWaiters() }
        }
        return HashMemoryReservation(budget: self, bytes: bytes)
    }

    /// Calls `start` once `bytes` are admitted: at once if they fit now, otherwise on the thread
    /// that releases enough, in the queue's order. The holder gives them back with ``release(_:)``.
    /// Unlike ``reserve(_:)``, nothing waits here: a job to run, not a task to resume, is queued,
    /// so the budget never waits for a task to be scheduled again (see
    /// ``BlockingExecutor/runHoldingHashMemory(_:_:)``).
    func whenAdmitted(_ bytes: UInt64, start: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if admitsNow(bytes, &state) { return true }
            _ = enqueue(bytes, resume: { admitted in if admitted { start() } }, &state)
            return false
        }
        if now { start() }
    }

    /// Gives `bytes` back and admits the waiters that now fit, oldest first.
    func release(_ bytes: UInt64) {
        state.withLock { state in
            state.inUse -= bytes
            state.inFlight -= 1
        }
        admitWaiters()
    }

    private func admitsNow(_ bytes: UInt64, _ state: inout State) -> Bool {
        // First come first served: nobody overtakes a waiter.
        guard state.waiting.isEmpty, fits(bytes, state) else { return false }
        admit(bytes, &state)
        return true
    }

    private func fits(_ bytes: UInt64, _ state: State) -> Bool {
        state.inFlight == 0 || (state.inFlight < concurrentHashes && state.inUse + bytes <= self.bytes)
    }

    private func admit(_ bytes: UInt64, _ state: inout State) {
        state.inUse += bytes
        state.inFlight += 1
        state.peakInFlight = max(state.peakInFlight, state.inFlight)
    }

    private func enqueue(_ bytes: UInt64, resume: (@Sendable (Bool) -> Void)?, _ state: inout State) -> UInt64 {
        let ticket = state.nextTicket
        state.nextTicket += 1
        state.waiting.append(Waiter(ticket: ticket, bytes: bytes, resume: resume))
        return ticket
    }

    private func admitWaiters() {
        let resumes = state.withLock { state -> [@Sendable (Bool) -> Void] in
            var resumes: [@Sendable (Bool) -> Void] = []
            while let first = state.waiting.first, fits(first.bytes, state) {
                state.waiting.removeFirst()
                admit(first.bytes, &state)
                if let resume = first.resume { resumes.append(resume) } else { state.admitted.insert(first.ticket) }
            }
            return resumes
        }
        state.signalAll()
        for resume in resumes { resume(true) }
    }
}

/// Memory held in a ``HashMemoryBudget`` by an async caller; ``release()`` gives it back (once;
/// releasing again does nothing).
public final class HashMemoryReservation: Sendable {
    private let budget: HashMemoryBudget
    /// The bytes reserved.
    public let bytes: UInt64
    private let released = Locked(false)

    init(budget: HashMemoryBudget, bytes: UInt64) {
        self.budget = budget
        self.bytes = bytes
    }

    /// Gives the memory back to the budget.
    public func release() {
        let first = released.withLock { released -> Bool in
            defer { released = true }
            return !released
        }
        if first { budget.release(bytes) }
    }

    deinit { release() }
}
