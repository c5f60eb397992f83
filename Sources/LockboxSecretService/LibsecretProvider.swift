import Lockbox

/// Reaches the Secret Service through libsecret, for ``Lockbox/StoreSelection``: pass one as its
/// `secretService` so `auto` can choose the Secret Service and `secret-service` can open it.
public struct LibsecretProvider: SecretServiceProvider {
    /// The most each Secret Service call may take, in seconds (``SecretServiceStore/timeout``).
    public var timeout: Double

    /// A provider whose stores time out after `timeout` seconds per call.
    public init(timeout: Double = 5) { self.timeout = timeout }

    /// Connects: a new ``SecretServiceStore``.
    public func connect() throws -> any LockableSecretStore { try SecretServiceStore(timeout: timeout) }
}

extension SecretServiceStore: LockableSecretStore {}
