#if canImport(Glibc)
    import Glibc
#endif

/// A value that one thread at a time may read or change, behind a `pthread_mutex_t`.
///
/// Lockbox uses this rather than `Synchronization.Mutex`: on Linux that type locks with raw
/// futex system calls, which ThreadSanitizer cannot see, so every access made inside its
/// `withLock` is reported as a data race and real races would be lost among the false ones
/// (docs/SECURITY-TESTING.md, "Sanitizers"). ThreadSanitizer intercepts `pthread_mutex_lock`,
/// so with this type a clean run means something. The cost is the same uncontended lock.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    // The mutex lives at a stable heap address (a pthread mutex must not move); `value` is only
    // touched with the mutex held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: consuming Value) {
        mutex = makeErrorCheckingMutex()
        self.value = value
    }

    deinit { destroyMutex(mutex) }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        let locked = pthread_mutex_lock(mutex)
        precondition(locked == 0, "Locked: the lock is already held by this thread (re-entrant use), or locking failed: \(locked)")
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A heap-allocated error-checking `pthread_mutex_t` (for ``Locked`` and ``ConditionLock``): taking
/// it twice on one thread traps with a message instead of deadlocking silently
/// (Synchronization.Mutex trapped too). Release it with ``destroyMutex(_:)``.
package func makeErrorCheckingMutex() -> UnsafeMutablePointer<pthread_mutex_t> {
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
    let status = pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
    precondition(status == 0, "pthread_mutex_init failed: \(status)")
    return mutex
}

/// Destroys and frees a mutex from ``makeErrorCheckingMutex()``.
package func destroyMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
}
