import FoundationEssentials
import Lockbox
import SystemPackage

/// A re-authentication window shared by the processes of one login session, like sudo's
/// timestamp — but kept in the Linux kernel keyring, never on disk: a `user` key in the session
/// keyring, readable only by processes that possess it, that the kernel expires on its own
/// (`keyctl_set_timeout`) and that dies with the login session or a reboot.
///
/// For the file vault the window carries the unwrapped data key, so commands inside it need
/// neither the passphrase nor the key file, and skip the Argon2id cost. A window is tied to the
/// credentials that opened it: a passphrase change, slot change or key rotation (or, for a
/// PIN-opened window, a PIN change) invalidates it.
///
/// Every call that reads or sets a window's expiry takes a `clock` (seconds on a monotonic
/// clock, ``ReauthGate/monotonicClock`` by default — the clock every process of the session
/// shares): tests drive the expiry through it instead of sleeping. The kernel's own timeout runs
/// on its clock whatever is passed.
public enum SessionWindow {
    /// What a window says about itself (never its key).
    public struct Status: Sendable, Equatable {
        /// Seconds left.
        public var remaining: Double
        /// How the window was opened, as the opener said: the CLI writes `passphrase`, or `pin PROFILE`.
        public var openedBy: String
    }

    package static let descriptionPrefix = "lockbox:window:"
    private static let magic = Array("LBW1".utf8)

    /// The window scope of the file vault at `path`: its vault ID, read without a credential.
    public static func scope(forVaultAt path: FilePath) throws -> String {
        "vault:" + (try FileVault.vaultID(at: path)).hexString
    }

    /// The scope of a Secret Service profile's window.
    public static func scope(secretServiceProfile profile: String) -> String { "secret-service:" + profile }

    /// Throws ``LockboxError/kernelKeyringUnavailable(detail:)`` unless this process has a
    /// session keyring of its own login session, which a window needs: ask before the work that
    /// opening one takes (a passphrase's Argon2id, a PIN's check), so a process that cannot keep
    /// a window (cron, a systemd service, a container) is told at once, with nothing spent.
    public static func requireSessionKeyring() throws {
        try KernelKeyring.requireLoginSessionKeyring()
    }

    /// Opens (or replaces) the window for `scope` for `duration`. Throws
    /// ``LockboxError/kernelKeyringUnavailable(detail:)`` where the kernel keyring cannot hold it.
    /// - Parameters:
    ///   - scope: which window: see ``scope(forVaultAt:)`` and ``scope(secretServiceProfile:)``.
    ///   - duration: how long the window stays open (at least one second), on the monotonic
    ///     clock; the kernel also expires the key on its own.
    ///   - openedBy: how the window was opened, as ``Status/openedBy`` reports it: `passphrase`,
    ///     or `pin PROFILE` (what the CLI writes).
    ///   - credentialFingerprint: the vault's key-slot fingerprint (empty for the Secret Service).
    ///   - pin: the PIN profile that opened the window, with its fingerprint: changing or removing
    ///     that PIN closes the window.
    ///   - dataKey: the file vault's unwrapped data key, kept in the window so commands inside it
    ///     need no credential; `nil` for the Secret Service.
    ///   - clock: the monotonic clock the window's expiry is counted on.
    public static func open(
        scope: String, duration: Duration, openedBy: String, credentialFingerprint: String,
        pin: (profile: PinProfile, fingerprint: String)? = nil, dataKey: SecretBytes? = nil,
        clock: ReauthGate.Clock = ReauthGate.monotonicClock
    ) throws {
        let seconds = max(1, duration.seconds)
        let expires = clock() + seconds
        let payload = encode(
            Contents(
                expires: expires, openedBy: openedBy, fingerprint: credentialFingerprint,
                pinService: pin?.profile.service ?? "", pinName: pin?.profile.name ?? "",
                pinFingerprint: pin?.fingerprint ?? "", dataKey: dataKey))
        // The kernel counts whole seconds from the current second (not from now), so a timeout of
        // N can fire up to a second early: give it one more and let the payload's exact expiry,
        // checked on every read, end the window on time.
        _ = try KernelKeyring.add(
            description: descriptionPrefix + scope, payload: payload,
            timeoutSeconds: UInt32(min(seconds.rounded(.up) + 1, Double(UInt32.max))))
    }

    /// Opens the window for a file vault (carrying its data key), after a passphrase or, with
    /// `pin`, a PIN check the caller made. `clock`: as for
    /// ``open(scope:duration:openedBy:credentialFingerprint:pin:dataKey:clock:)``.
    public static func open(
        for store: EncryptedFileStore, duration: Duration, openedBy: String,
        pin: PinProfile? = nil, clock: ReauthGate.Clock = ReauthGate.monotonicClock
    ) throws {
        try open(material: store.windowMaterial(), store: store, duration: duration, openedBy: openedBy, pin: pin, clock: clock)
    }

    /// Opens the window for a format-2 vault (carrying its data key), as
    /// ``open(for:duration:openedBy:pin:clock:)-(EncryptedFileStore,_,_,_,_)`` does for format 1.
    public static func open(
        for store: SQLiteVaultStore, duration: Duration, openedBy: String,
        pin: PinProfile? = nil, clock: ReauthGate.Clock = ReauthGate.monotonicClock
    ) throws {
        try open(material: store.windowMaterial(), store: store, duration: duration, openedBy: openedBy, pin: pin, clock: clock)
    }

    /// Opens the window for a file vault in either format, as ``FileVault`` opened it (carrying
    /// its data key). Throws ``LockboxError/invalidArgument(_:)`` for a store that is not a file
    /// vault. `clock`: as for ``open(scope:duration:openedBy:credentialFingerprint:pin:dataKey:clock:)``.
    public static func open(
        for store: any KeySlotManaging, duration: Duration, openedBy: String,
        pin: PinProfile? = nil, clock: ReauthGate.Clock = ReauthGate.monotonicClock
    ) throws {
        guard let fileVault = store as? any FileVaultWindowMaterial else {
            throw LockboxError.invalidArgument("a session window carrying a data key is opened for a file vault only")
        }
        try open(material: fileVault.windowMaterial(), store: store, duration: duration, openedBy: openedBy, pin: pin, clock: clock)
    }

    private static func open(
        material: (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes), store: any SecretStore,
        duration: Duration, openedBy: String, pin: PinProfile?, clock: ReauthGate.Clock
    ) throws {
        let scope = "vault:" + material.vaultID.hexString
        var binding: (profile: PinProfile, fingerprint: String)?
        if let pin, let fingerprint = try PinGuard(store: store).fingerprint(pin) { binding = (pin, fingerprint) }
        try open(
            scope: scope, duration: duration, openedBy: openedBy, credentialFingerprint: material.fingerprint,
            pin: binding, dataKey: material.dataKey, clock: clock)
    }

    /// Whether the window for `scope` is open (its expiry not passed on `clock`) and, if a PIN
    /// opened it, that PIN is unchanged in `store`.
    public static func isOpen(scope: String, store: any SecretStore, clock: ReauthGate.Clock = ReauthGate.monotonicClock) throws -> Bool {
        guard let window = read(scope: scope, clock: clock) else { return false }
        if try pinStillMatches(window, store: store) { return true }
        close(scope: scope)
        return false
    }

    private static func pinStillMatches(_ window: Contents, store: any SecretStore) throws -> Bool {
        guard !window.pinName.isEmpty else { return true }
        let profile = PinProfile(service: window.pinService, name: window.pinName)
        return try PinGuard(store: store).fingerprint(profile) == window.pinFingerprint
    }

    /// The file vault at `path`, opened through its window, or `nil` if there is no valid window
    /// (none, expired on `clock`, revoked, or the vault's keys changed since — then the window is
    /// revoked). Format 1 only; ``FileVault/open(at:window:credentials:readOnly:timeout:now:)``
    /// with ``fileVaultWindows(clock:)`` opens either format, through a window or with credentials.
    public static func openStore(at path: FilePath, clock: @escaping ReauthGate.Clock = ReauthGate.monotonicClock) throws
        -> EncryptedFileStore?
    {
        let snapshot = try EncryptedFileStore.readSnapshot(at: path)
        guard let key = fileVaultWindows(clock: clock).key(forVault: snapshot.vaultID) else { return nil }
        if let store = try EncryptedFileStore.open(snapshot, windowDataKey: key.dataKey, fingerprint: key.fingerprint),
            try key.confirm(store)
        {
            return store
        }
        key.revoke()
        return nil
    }

    /// The session windows of this login session as ``FileVault`` takes them: the window for a
    /// vault carries its data key and the fingerprint of its key slots; one opened with a PIN is
    /// refused (and closed) once that PIN changed.
    /// - Parameter clock: the monotonic clock the windows' expiry is counted on.
    public static func fileVaultWindows(clock: @escaping ReauthGate.Clock = ReauthGate.monotonicClock) -> any FileVaultWindow {
        KernelKeyringWindows(clock: clock)
    }

    /// ``fileVaultWindows(clock:)``: the windows in the kernel keyring.
    private struct KernelKeyringWindows: FileVaultWindow {
        let clock: ReauthGate.Clock

        func key(forVault vaultID: [UInt8]) -> FileVaultWindowKey? {
            let scope = "vault:" + vaultID.hexString
            guard let contents = SessionWindow.read(scope: scope, clock: clock), let dataKey = contents.dataKey else { return nil }
            return FileVaultWindowKey(
                dataKey: dataKey, fingerprint: contents.fingerprint,
                confirm: { store in try SessionWindow.pinStillMatches(contents, store: store) },
                revoke: { SessionWindow.close(scope: scope) })
        }
    }

    /// The window's state (seconds left on `clock`), or `nil` if there is none.
    public static func status(scope: String, clock: ReauthGate.Clock = ReauthGate.monotonicClock) -> Status? {
        let now = clock()
        return read(scope: scope, clock: { now }).map { Status(remaining: $0.expires - now, openedBy: $0.openedBy) }
    }

    /// Closes the window at once; returns whether there was one.
    @discardableResult
    public static func close(scope: String) -> Bool {
        guard let id = KernelKeyring.search(description: descriptionPrefix + scope) else { return false }
        return KernelKeyring.invalidate(id)
    }

    // MARK: Payload

    package struct Contents: Sendable {
        var expires: Double
        var openedBy: String
        var fingerprint: String
        var pinService: String
        var pinName: String
        var pinFingerprint: String
        var dataKey: SecretBytes?
    }

    package static func read(scope: String, clock: ReauthGate.Clock = ReauthGate.monotonicClock) -> Contents? {
        guard let id = KernelKeyring.search(description: descriptionPrefix + scope),
            let payload = KernelKeyring.read(id),
            let contents = decode(payload)
        else { return nil }
        guard contents.expires > clock() else {
            KernelKeyring.invalidate(id)
            return nil
        }
        return contents
    }

    private static func encode(_ contents: Contents) -> SecretBytes {
        let fields = [contents.openedBy, contents.fingerprint, contents.pinService, contents.pinName, contents.pinFingerprint]
            .map { Array($0.utf8.prefix(1024)) }
        let keyCount = contents.dataKey?.count ?? 0
        let size = magic.count + 8 + fields.reduce(0) { $0 + 2 + $1.count } + 1 + keyCount
        return SecretBytes(count: size) { buffer in
            var writer = FixedBufferWriter(buffer)
            magic.withUnsafeBytes { writer.append($0) }
            writer.append(contents.expires.bitPattern)
            for field in fields {
                writer.append(UInt16(field.count))
                field.withUnsafeBytes { writer.append($0) }
            }
            writer.append(UInt8(keyCount))
            contents.dataKey?.withUnsafeBytes { writer.append($0) }
        }
    }

    private static func decode(_ payload: SecretBytes) -> Contents? {
        payload.withUnsafeBytes { bytes -> Contents? in
            var reader = ByteReader(bytes)
            do {
                guard try reader.readBytes(magic.count, "magic") == magic else { return nil }
                let expires = Double(bitPattern: try reader.read(UInt64.self, "expiry"))
                var fields: [String] = []
                for _ in 0..<5 { fields.append(try reader.readShortString("field")) }
                let keyLength = Int(try reader.read(UInt8.self, "key length"))
                let key = try reader.readSlice(keyLength, "key")
                return Contents(
                    expires: expires, openedBy: fields[0], fingerprint: fields[1], pinService: fields[2],
                    pinName: fields[3], pinFingerprint: fields[4],
                    dataKey: keyLength > 0 ? SecretBytes(copying: key) : nil)
            } catch {
                return nil
            }
        }
    }
}

extension SessionWindow {
    /// The window scope of the store `resolution` chose (``StoreSelection`` decides it, so the
    /// window and the commands that use the store agree): the file vault's vault ID, read without
    /// a credential, or the profile's Secret Service scope. `nil` when the file vault does not
    /// exist, so no window can be open for it, and for stores that have no windows (PostgreSQL,
    /// memory).
    public static func scope(for resolution: StoreResolution) throws -> String? {
        switch resolution.storeKind {
        case .secretService:
            return scope(secretServiceProfile: resolution.selection.profile)
        case .file:
            let path = resolution.selection.vaultPath
            guard FileManager.default.fileExists(atPath: path.string) else { return nil }
            return try scope(forVaultAt: path)
        case .postgres, .memory:
            return nil
        }
    }
}
