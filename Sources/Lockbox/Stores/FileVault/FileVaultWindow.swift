/// What a re-authentication window keeps for one file vault: its data key, and the fingerprint of
/// the key slots it was opened under (a passphrase change, slot change or key rotation since
/// makes it useless).
public struct FileVaultWindowKey: Sendable {
    /// The vault's unwrapped data key.
    public var dataKey: SecretBytes
    /// The key-slot fingerprint of the vault when the window opened.
    public var fingerprint: String
    /// Whether a store opened with ``dataKey`` may be used: `false` when what opened the window
    /// (a PIN) changed since. ``FileVault`` then revokes the window and asks for credentials.
    public var confirm: @Sendable (any SecretStore) throws -> Bool
    /// Closes the window: the vault's keys no longer match it, or ``confirm`` refused.
    public var revoke: @Sendable () -> Void

    /// A window's key.
    /// - Parameters:
    ///   - dataKey: the vault's unwrapped data key.
    ///   - fingerprint: the key-slot fingerprint of the vault when the window opened.
    ///   - confirm: whether a store opened with `dataKey` may be used.
    ///   - revoke: closes the window.
    public init(
        dataKey: SecretBytes, fingerprint: String, confirm: @escaping @Sendable (any SecretStore) throws -> Bool = { _ in true },
        revoke: @escaping @Sendable () -> Void = {}
    ) {
        self.dataKey = dataKey
        self.fingerprint = fingerprint
        self.confirm = confirm
        self.revoke = revoke
    }
}

/// Where a file vault's re-authentication windows are kept (`SessionWindow.fileVaultWindows` of
/// `LockboxSessionWindows`: the kernel keyring): ``FileVault/open(at:window:credentials:readOnly:timeout:now:)``
/// tries the window before it asks for any credential. The core keeps no window itself.
public protocol FileVaultWindow: Sendable {
    /// The key a window holds for the vault whose ID is `vaultID`, or `nil` when none is open.
    func key(forVault vaultID: [UInt8]) -> FileVaultWindowKey?
}
