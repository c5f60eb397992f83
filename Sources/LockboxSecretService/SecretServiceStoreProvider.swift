import Lockbox

/// Reaches the Secret Service with ``SecretServiceStore`` (Lockbox's own D-Bus client and
/// encrypted session), for ``Lockbox/StoreSelection``: pass one as its `secretService` so `auto`
/// can choose the Secret Service and `secret-service` can open it.
public struct SecretServiceStoreProvider: SecretServiceProvider {
    /// The most each Secret Service call may take, in seconds (``SecretServiceStore/timeout``).
    public var timeout: Double

    /// A provider whose stores time out after `timeout` seconds per call.
    public init(timeout: Double = 5) { self.timeout = timeout }

    /// Connects: a new ``SecretServiceStore``.
    public func connect() throws -> any LockableSecretStore { try SecretServiceStore(timeout: timeout) }
}

/// The earlier name of ``SecretServiceStoreProvider``, from when the store went through libsecret;
/// libsecret now makes only the fallback session.
@available(*, deprecated, renamed: "SecretServiceStoreProvider")
public typealias LibsecretProvider = SecretServiceStoreProvider

extension SecretServiceStore: LockableSecretStore {}
