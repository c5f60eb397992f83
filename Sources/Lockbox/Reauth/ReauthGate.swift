import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// Something that can say whether a fresh authentication is in force — a ``ReauthGate`` in a
/// process, or a window shared through the kernel keyring. ``Vault`` asks it before it returns
/// an item whose access is ``ItemAccess/freshAuthentication``.
public protocol FreshAuthentication: Sendable {
    /// Returns if a fresh authentication is in force (and counts as use of it); otherwise
    /// throws ``LockboxError/reauthenticationRequired(_:)``.
    func requireFreshAuthentication() throws
}

/// A re-authentication window, the Linux stand-in for biometric unlock: prove who you are
/// once (a PIN or the vault passphrase) and protected items open without asking again until
/// the window ends — after an absolute timeout, after an idle timeout that use extends, on
/// ``lock()``, or when the credential that opened it changes or is removed.
///
/// Time is monotonic (an injectable clock), so changing the wall clock neither extends nor
/// shortens a window.
public final class ReauthGate: FreshAuthentication {
    /// Seconds on a monotonic clock.
    public typealias Clock = @Sendable () -> Double

    /// The longest a window stays open (default 5 minutes, like sudo).
    public let absoluteTimeout: Double
    /// If set, a window also closes after this long without use; each use extends it.
    public let idleTimeout: Double?
    private let clock: Clock
    private let window = Locked<Window?>(nil)

    private struct Window {
        var opened: Double
        var lastUse: Double
        /// Reads the current fingerprint of the credential that opened the window.
        var currentCredential: @Sendable () throws -> String?
        var credentialAtOpening: String?
    }

    /// The system's monotonic clock (`CLOCK_BOOTTIME`, which also counts suspend).
    public static let monotonicClock: Clock = {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Creates a closed gate.
    public init(absoluteTimeout: Duration = .seconds(300), idleTimeout: Duration? = nil, clock: @escaping Clock = ReauthGate.monotonicClock)
    {
        self.absoluteTimeout = absoluteTimeout.seconds
        self.idleTimeout = idleTimeout?.seconds
        self.clock = clock
    }

    /// Opens a window after the caller checked a credential itself. `credential` reads the
    /// credential's current fingerprint; when it changes (or becomes `nil`), the window closes.
    public func open(credential: @escaping @Sendable () throws -> String?) throws {
        let fingerprint = try credential()
        let now = clock()
        window.withLock { $0 = Window(opened: now, lastUse: now, currentCredential: credential, credentialAtOpening: fingerprint) }
    }

    /// Checks `pin` (subject to its lockout) and opens a window tied to it.
    @available(
        *, noasync,
        message: "hashes a PIN or passphrase on the calling thread; in async code call it in try await BlockingExecutor.shared.run { … }"
    )
    public func open(verifying pin: SecretBytes, for profile: PinProfile, with pins: PinGuard) throws {
        try pins.verify(profile, pin: pin)
        try open { try pins.fingerprint(profile) }
    }

    /// Checks the vault passphrase and opens a window tied to the vault's key slots.
    @available(
        *, noasync,
        message: "hashes a PIN or passphrase on the calling thread; in async code call it in try await BlockingExecutor.shared.run { … }"
    )
    public func open(verifyingPassphrase passphrase: SecretBytes, of store: EncryptedFileStore) throws {
        try store.verifyPassphrase(passphrase)
        try open { try store.credentialFingerprint() }
    }

    /// The fallback chain phone apps use: the open window; else the PIN (subject to its lockout);
    /// else, when the PIN is locked out, disabled or not set, the passphrase. A wrong PIN is
    /// reported as such (ask again); a locked-out PIN does not block the passphrase path.
    @available(
        *, noasync,
        message: "hashes a PIN or passphrase on the calling thread; in async code call it in try await BlockingExecutor.shared.run { … }"
    )
    public func authenticate(
        pin: (profile: PinProfile, guard: PinGuard, read: () throws -> SecretBytes)?,
        passphrase: (store: EncryptedFileStore, read: () throws -> SecretBytes)?
    ) throws {
        if isOpen { return }
        if let pin {
            do {
                try open(verifying: try pin.read(), for: pin.profile, with: pin.guard)
                return
            } catch let error as LockboxError {
                let passphraseMayFollow: Bool
                switch error {
                case .pinLockedOut, .pinDisabled, .pinNotSet: passphraseMayFollow = passphrase != nil
                default: passphraseMayFollow = false
                }
                if !passphraseMayFollow { throw error }
            }
        }
        guard let passphrase else {
            throw LockboxError.reauthenticationRequired("no PIN or passphrase was offered")
        }
        try open(verifyingPassphrase: try passphrase.read(), of: passphrase.store)
    }

    /// Closes the window now.
    public func lock() {
        window.withLock { $0 = nil }
    }

    /// Whether a window is open (without counting as use).
    public var isOpen: Bool { remaining != nil }

    /// Time left in the window, or `nil` when closed.
    public var remaining: Duration? {
        let now = clock()
        return window.withLock { window -> Duration? in
            guard let current = window, let left = Self.secondsLeft(current, now: now, absolute: absoluteTimeout, idle: idleTimeout) else {
                return nil
            }
            return .milliseconds(Int64(left * 1000))
        }
    }

    public func requireFreshAuthentication() throws {
        let now = clock()
        let snapshot = window.withLock { $0 }
        guard let current = snapshot,
            Self.secondsLeft(current, now: now, absolute: absoluteTimeout, idle: idleTimeout) != nil
        else {
            lock()
            throw LockboxError.reauthenticationRequired("no open re-authentication window")
        }
        // A changed or removed PIN or passphrase closes windows it opened.
        let fingerprint = try current.currentCredential()
        guard fingerprint != nil, fingerprint == current.credentialAtOpening else {
            lock()
            throw LockboxError.reauthenticationRequired("the PIN or passphrase that opened the window has changed")
        }
        window.withLock { $0?.lastUse = now }
    }

    private static func secondsLeft(_ window: Window, now: Double, absolute: Double, idle: Double?) -> Double? {
        var left = window.opened + absolute - now
        if let idle { left = min(left, window.lastUse + idle - now) }
        return left > 0 ? left : nil
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
