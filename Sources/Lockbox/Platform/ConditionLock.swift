#if canImport(Glibc)
    import Glibc
#endif

/// A value behind a `pthread_mutex_t` with a `pthread_cond_t` beside it: ``Locked`` for state
/// that a thread must also be able to *wait* on (the blocking executor's job queue, the hash
/// memory budget's blocking waiters). pthread primitives for the same reason as ``Locked``:
/// ThreadSanitizer sees them.
package final class ConditionLock<Value: ~Copyable>: @unchecked Sendable {
    // Both live at stable heap addresses (pthread objects must not move); `value` is only
    // touched with the mutex held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    package init(_ value: consuming Value) {
        mutex = makeErrorCheckingMutex()
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_cond_init(condition, nil) == 0, "ConditionLock: pthread_cond_init failed")
        self.value = value
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        destroyMutex(mutex)
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        let locked = pthread_mutex_lock(mutex)
        precondition(locked == 0, "ConditionLock: the lock is already held by this thread, or locking failed: \(locked)")
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits, the lock released meanwhile, until `ready` returns a value for the current state,
    /// then returns it (the check runs with the lock held; a ``signalAll()`` wakes the waiters).
    package func wait<Result>(until ready: (inout Value) -> Result?) -> Result {
        let locked = pthread_mutex_lock(mutex)
        precondition(locked == 0, "ConditionLock: the lock is already held by this thread, or locking failed: \(locked)")
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let result = ready(&value) { return result }
            pthread_cond_wait(condition, mutex)
        }
    }

    /// Wakes every thread in ``wait(until:)`` to check its condition again.
    package func signalAll() {
        pthread_cond_broadcast(condition)
    }
}
