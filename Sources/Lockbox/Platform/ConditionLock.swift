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
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0 && pthread_cond_init(condition, nil) == 0, "ConditionLock: pthread initialisation failed")
        self.value = value
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deinitialize(count: 1)
        condition.deallocate()
        mutex.deinitialize(count: 1)
        mutex.deallocate()
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
