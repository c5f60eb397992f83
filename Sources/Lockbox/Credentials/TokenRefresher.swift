import CoreMetrics
import Dispatch
import FoundationEssentials
import Logging
import SystemPackage

/// Keeps token sets and refreshes them **once**, however many tasks and processes ask at the
/// same time.
///
/// `validAccessToken(service:account:refresh:)` returns the stored access token while it is
/// valid (with a leeway, default 60 s). When it is not, one task in the process runs the refresh
/// and every other caller awaits its result (single flight). Across processes, the refresh runs
/// under a per-item lock and re-reads the store after taking it, so a second process uses the
/// first one's new tokens instead of spending a rotated refresh token again.
public final class TokenRefresher: Sendable {
    /// Where token sets are kept, as a blocking store (a token store made over an
    /// ``AsyncSecretStore`` gives it as a ``BlockingSecretStore``).
    public var store: any SecretStore { access.secretStore }
    /// How long before expiry a token counts as expired.
    public let leeway: Duration
    /// Where the async variants run the blocking store calls.
    public var executor: BlockingExecutor { access.executor }
    /// Where refreshes (info), rejected refresh tokens and failed refreshes (warning) are logged,
    /// with the item's address and the outcome — never a token.
    public let logger: Logger
    private let metrics: LockboxMetrics
    let access: StoreAccess
    let now: @Sendable () -> Date
    let lock: ItemLock
    /// How long a refresh lease in a ``RefreshLeasing`` store lasts.
    let refreshLease: Duration
    private let inflight = Locked<[ItemKey: Task<TokenSet, any Error>]>([:])
    private let observers = Locked<[UUID: AsyncStream<SessionEvent>.Continuation]>([:])

    /// Creates a token store over `store`.
    /// - Parameters:
    ///   - store: where the token sets are kept, one item per (service, account).
    ///   - leeway: how long before its expiry an access token already counts as expired.
    ///   - now: the wall clock token expiry is judged by (injectable for tests).
    ///   - lockDirectory: where the per-item lock files live (shared by every process using the
    ///     store). Default: beside the file vault (`VAULT.locks/token-locks`), none for a store only
    ///     this process reaches (``MemoryStore``: no file is written), or a per-user folder for
    ///     other stores; never chosen by environment variables.
    ///   - lockTimeout: how long a refresh waits for another process's refresh.
    ///   - executor: where the async variants and the refresh path run the blocking store calls.
    ///   - logger: where refreshes are logged (silent by default).
    ///   - metricsFactory: where `lockbox_token_refreshes{outcome}`, `lockbox_token_refresh_duration`
    ///     and `lockbox_store_call_duration{store, operation}` are recorded.
    public convenience init(
        store: any SecretStore, leeway: Duration = .seconds(60), now: @escaping @Sendable () -> Date = { Date() },
        lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(120), executor: BlockingExecutor = .shared,
        logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            access: StoreAccess(store, executor: executor), leeway: leeway, now: now, lockDirectory: lockDirectory,
            lockTimeout: lockTimeout, logger: logger, metricsFactory: metricsFactory)
    }

    /// Creates a token store over an async store (a network-backed one): the async methods await
    /// it and never block a thread; the blocking ones block the calling thread until it answers.
    /// The other parameters are those of the initializer over a blocking ``SecretStore``; the
    /// refresh lock serialises the processes of one host (see ``PinGuard``'s async-store initializer).
    ///
    /// If `store` adopts ``RefreshLeasing`` (a store many hosts share), a refresh also takes the
    /// item's lease in the store, so that one host of all those sharing it calls the token
    /// endpoint; the others wait for its tokens (polling the store every 20 ms, up to
    /// `lockTimeout`). `refreshLease` is how long a lease lasts: a host that dies while refreshing
    /// keeps the others waiting that long, at most, before one of them refreshes. Make it longer
    /// than a token endpoint call ever takes.
    public convenience init(
        store: any AsyncSecretStore, leeway: Duration = .seconds(60), now: @escaping @Sendable () -> Date = { Date() },
        lockDirectory: FilePath? = nil, lockTimeout: Duration = .seconds(120), refreshLease: Duration = .seconds(30),
        executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(
            access: StoreAccess(store, executor: executor), leeway: leeway, now: now, lockDirectory: lockDirectory,
            lockTimeout: lockTimeout, refreshLease: refreshLease, logger: logger, metricsFactory: metricsFactory)
    }

    private init(
        access: StoreAccess, leeway: Duration, now: @escaping @Sendable () -> Date, lockDirectory: FilePath?, lockTimeout: Duration,
        refreshLease: Duration = .seconds(30), logger: Logger, metricsFactory: any MetricsFactory
    ) {
        self.access = access
        self.refreshLease = refreshLease
        self.logger = logger
        self.metrics = LockboxMetrics(factory: metricsFactory)
        self.leeway = leeway
        self.now = now
        self.lock = ItemLock(
            directory: lockDirectory ?? ItemLock.defaultDirectory("token-locks", for: access), timeout: lockTimeout,
            access: access)
    }

    /// Session events from now on: signed in, refreshed, signed out.
    public func events() -> AsyncStream<SessionEvent> {
        let (stream, continuation) = AsyncStream<SessionEvent>.makeStream()
        let id = UUID()
        observers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.observers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    /// Saves a token set as one item (kind `token`).
    ///
    /// The record is JSON built with Foundation: the tokens pass through `String`s in ordinary
    /// memory (the encoded bytes are zeroed, the intermediate strings cannot be). SECURITY.md.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func save(_ tokens: TokenSet, service: String, account: String) throws {
        try access.blocking { try await self.save(tokens, service: service, account: account, via: $0) }
    }

    /// Saves the tokens of an OAuth 2.0 token response (RFC 6749 §5.1).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func save(oauthResponse: Data, service: String, account: String, subject: String? = nil) throws {
        try save(TokenSet(oauthResponse: oauthResponse, now: now(), subject: subject), service: service, account: account)
    }

    /// The stored token set, or `nil`.
    ///
    /// The record is parsed with Foundation's `JSONDecoder`, which makes `String` copies of the
    /// tokens in ordinary memory before they are moved into ``SecretBytes``. SECURITY.md.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func load(service: String, account: String) throws -> TokenSet? {
        try access.blocking { try await self.load(service: service, account: account, via: $0) }
    }

    /// Removes the token set; returns whether there was one.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func clear(service: String, account: String) throws -> Bool {
        try access.blocking { try await self.clear(service: service, account: account, via: $0) }
    }

    // MARK: The one implementation of each operation (see ``StoreAccess``)

    func save(_ tokens: TokenSet, service: String, account: String, via route: StoreRoute) async throws {
        let key = ItemKey(service: service, account: account)
        try await write(tokens, key, via: route)
        emit(.signedIn(key))
    }

    func load(service: String, account: String, via route: StoreRoute) async throws -> TokenSet? {
        let key = ItemKey(service: service, account: account)
        return try await metrics.storeCall(access.typeName, "get") { try await route.store.get(key) }.map {
            try TokenSet.decode($0, key: key)
        }
    }

    func clear(service: String, account: String, via route: StoreRoute) async throws -> Bool {
        let key = ItemKey(service: service, account: account)
        let held = try await lock.acquire(key)
        let removed: Bool
        do {
            defer { held.release() }
            removed = try await metrics.storeCall(access.typeName, "delete") { try await route.store.delete(key) }
        }
        if removed { emit(.signedOut(key)) }
        return removed
    }

    /// A valid access token: the stored one, or — once for all concurrent callers — a refreshed one.
    ///
    /// `refresh` gets the current token set and returns the new one; it throws
    /// ``TokenRefreshError/rejected(_:)`` when the refresh token is no longer accepted (the tokens
    /// are then cleared and this throws ``LockboxError/sessionExpired(service:account:)``), or any
    /// other error for a transient failure (tokens kept, error passed on).
    public func validAccessToken(
        service: String, account: String, refresh: @escaping @Sendable (TokenSet) async throws -> TokenSet
    ) async throws -> SecretBytes {
        let key = ItemKey(service: service, account: account)
        guard let current = try await load(service: service, account: account, via: access.awaiting) else {
            throw LockboxError.noTokens(service: service, account: account)
        }
        if current.isValid(at: now(), leeway: leeway) { return current.accessToken }
        return try await singleFlightRefresh(key, rejected: nil, refresh: refresh).accessToken
    }

    /// After a server rejected `rejectedToken` (HTTP 401), a new access token: refreshed once for
    /// every caller that saw the same rejection; callers that arrive after another refresh
    /// already replaced the token get the new one without refreshing again.
    public func accessToken(
        afterRejecting rejectedToken: SecretBytes, service: String, account: String,
        refresh: @escaping @Sendable (TokenSet) async throws -> TokenSet
    ) async throws -> SecretBytes {
        let key = ItemKey(service: service, account: account)
        guard let current = try await load(service: service, account: account, via: access.awaiting) else {
            throw LockboxError.noTokens(service: service, account: account)
        }
        if current.accessToken != rejectedToken && current.isValid(at: now(), leeway: leeway) { return current.accessToken }
        return try await singleFlightRefresh(key, rejected: rejectedToken, refresh: refresh).accessToken
    }

    /// One refresh per item in this process at a time; callers arriving meanwhile share it.
    private func singleFlightRefresh(
        _ key: ItemKey, rejected: SecretBytes?, refresh: @escaping @Sendable (TokenSet) async throws -> TokenSet
    ) async throws -> TokenSet {
        let task = inflight.withLock { tasks -> Task<TokenSet, any Error> in
            if let running = tasks[key] { return running }
            let started = Task { [self] in
                defer { _ = inflight.withLock { $0.removeValue(forKey: key) } }
                return try await refreshHoldingLock(key, rejected: rejected, refresh: refresh)
            }
            tasks[key] = started
            return started
        }
        return try await task.value
    }

    /// ``refreshHoldingLock(_:rejected:refresh:)``, logged, counted in
    /// `lockbox_token_refreshes{outcome}` (`refreshed`, `already-refreshed` by another process,
    /// `rejected`, `failed`) and timed.
    private func refreshHoldingLock(
        _ key: ItemKey, rejected: SecretBytes?, refresh: @Sendable (TokenSet) async throws -> TokenSet
    ) async throws -> TokenSet {
        let start = DispatchTime.now().uptimeNanoseconds
        var metadata: Logger.Metadata = [
            LogKey.service: .string(key.service), LogKey.account: .string(key.account),
            LogKey.store: .string(access.typeName),
        ]
        let outcome: String
        defer {
            metrics.timer("lockbox_token_refresh_duration").recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
        }
        do {
            let (tokens, refreshed) = try await refreshUnobserved(key, rejected: rejected, refresh: refresh)
            outcome = refreshed ? "refreshed" : "already-refreshed"
            metadata[LogKey.outcome] = .string(outcome)
            logger.info(refreshed ? "tokens refreshed" : "tokens already refreshed by another process", metadata: metadata)
            metrics.counter("lockbox_token_refreshes", [("outcome", outcome)]).increment()
            return tokens
        } catch LockboxError.sessionExpired(let service, let account) {
            outcome = "rejected"
            logger.warning("refresh token rejected: the session's tokens were cleared", metadata: metadata)
            metrics.counter("lockbox_token_refreshes", [("outcome", outcome)]).increment()
            throw LockboxError.sessionExpired(service: service, account: account)
        } catch {
            outcome = "failed"
            metadata[LogKey.errorCode] = loggableError(error)
            logger.warning("token refresh failed; the tokens were kept", metadata: metadata)
            metrics.counter("lockbox_token_refreshes", [("outcome", outcome)]).increment()
            throw error
        }
    }

    /// The refresh under the item's lock; also says whether this call refreshed (`false`: another
    /// process had, and its tokens are returned).
    private func refreshUnobserved(
        _ key: ItemKey, rejected: SecretBytes?, refresh: @Sendable (TokenSet) async throws -> TokenSet
    ) async throws -> (TokenSet, refreshed: Bool) {
        let held = try await lock.acquire(key)
        defer { held.release() }
        let route = access.awaiting
        if let leasing = route.store as? any RefreshLeasing {
            return try await refreshLeased(key, rejected: rejected, refresh: refresh, in: leasing)
        }
        // Another process may have refreshed while we waited: use its tokens.
        guard let read = try await route.store.get(key) else {
            throw LockboxError.sessionExpired(service: key.service, account: key.account)
        }
        let current = try TokenSet.decode(read, key: key)
        if usable(current, rejected: rejected) { return (current, false) }
        let fresh: TokenSet
        do {
            fresh = try await refresh(current)
        } catch TokenRefreshError.rejected {
            // Cleared only if they are still the tokens that were rejected: a process the lock
            // did not reach (another mount namespace) may have stored new ones meanwhile.
            if try await route.store.delete(key, ifCurrent: read) {
                emit(.signedOut(key))
                throw LockboxError.sessionExpired(service: key.service, account: key.account)
            }
            return (try await currentTokens(key, in: route.store), false)
        }
        // Stored only over the tokens this refresh started from (one transaction of the file
        // vault); where another process's refresh was stored first, its tokens win.
        let encoded = try fresh.encoded()
        let stored = try await metrics.storeCall(access.typeName, "set") {
            try await route.store.set(
                encoded, for: key, changes: ItemChanges(replacingWith: Self.options(for: key, fresh)), when: .ifCurrent(read))
        }
        guard stored else { return (try await currentTokens(key, in: route.store), false) }
        emit(.refreshed(key))
        return (fresh, true)
    }

    /// ``refreshUnobserved(_:rejected:refresh:)`` across hosts: the refresh runs only under the
    /// item's lease in the shared store, and its tokens are stored only if the lease is still
    /// this host's (a fenced write). A host that finds the lease taken waits for the holder's
    /// tokens, or for the lease to expire (a dead holder) and then takes it itself.
    private func refreshLeased(
        _ key: ItemKey, rejected: SecretBytes?, refresh: @Sendable (TokenSet) async throws -> TokenSet, in leasing: any RefreshLeasing
    ) async throws -> (TokenSet, refreshed: Bool) {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            // Another host may have refreshed meanwhile: use its tokens.
            let current = try await currentTokens(key, in: leasing)
            if usable(current, rejected: rejected) { return (current, false) }
            if let lease = try await leasing.acquireRefreshLease(key, for: refreshLease) {
                // Everything under the lease ends it on a way out: a fenced delete, harmless if
                // the completion already did (or another host took the lease over).
                do {
                    // Read again under the lease: a holder may have stored its tokens and let
                    // go between the read above and the lease.
                    let latest = try await currentTokens(key, in: leasing)
                    if usable(latest, rejected: rejected) {
                        try? await leasing.releaseRefreshLease(lease)
                        return (latest, false)
                    }
                    let fresh = try await refresh(latest)
                    let stored = try await metrics.storeCall(access.typeName, "set") {
                        try await leasing.completeRefresh(
                            lease, storing: try fresh.encoded(), for: key, options: Self.options(for: key, fresh))
                    }
                    if stored {
                        emit(.refreshed(key))
                        return (fresh, true)
                    }
                } catch TokenRefreshError.rejected {
                    do {
                        try await signOut(key, in: leasing)
                    } catch {
                        try? await leasing.releaseRefreshLease(lease)
                        throw error
                    }
                } catch {
                    try? await leasing.releaseRefreshLease(lease)
                    throw error
                }
                // The lease ran out during the call and another host took it over: its tokens,
                // not these, are the item's. Read them (or wait for them) on the next turn.
                logger.warning(
                    "token refresh outlived its lease; another host's refresh is kept",
                    metadata: [LogKey.service: .string(key.service), LogKey.account: .string(key.account)])
            }
            if clock.now - start >= lock.timeout {
                throw LockboxError.vaultBusy(
                    path: "refresh lease of '\(key.account)' on '\(key.service)'",
                    waitedSeconds: (clock.now - start).seconds)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether stored tokens can be handed out as they are: valid, and not the ones the caller saw
    /// rejected.
    private func usable(_ tokens: TokenSet, rejected: SecretBytes?) -> Bool {
        tokens.isValid(at: now(), leeway: leeway) && tokens.accessToken != rejected
    }

    /// The refresh token was rejected: the tokens are cleared, observers told, and the caller gets
    /// `sessionExpired`.
    private func signOut(_ key: ItemKey, in store: any AsyncSecretStore) async throws -> Never {
        try await store.delete(key)
        emit(.signedOut(key))
        throw LockboxError.sessionExpired(service: key.service, account: key.account)
    }

    /// The stored tokens of `key`; `sessionExpired` if there are none.
    private func currentTokens(_ key: ItemKey, in store: any AsyncSecretStore) async throws -> TokenSet {
        guard let tokens = try await store.get(key).map({ try TokenSet.decode($0, key: key) }) else {
            throw LockboxError.sessionExpired(service: key.service, account: key.account)
        }
        return tokens
    }

    /// The options of `key`'s token set. A set without a refresh token is worth nothing once its
    /// access token expires, so the item expires then too (``ItemOptions/expires``: `list` shows
    /// it and `wipe --expired` removes it); one with a refresh token does not expire.
    private static func options(for key: ItemKey, _ tokens: TokenSet? = nil) -> ItemOptions {
        ItemOptions(
            kind: .token, label: "Tokens for '\(key.account)' on '\(key.service)'",
            expires: tokens.flatMap { $0.refreshToken == nil ? $0.expiresAt : nil })
    }

    private func write(_ tokens: TokenSet, _ key: ItemKey, via route: StoreRoute) async throws {
        let encoded = try tokens.encoded()
        try await metrics.storeCall(access.typeName, "set") {
            try await route.store.set(encoded, for: key, options: Self.options(for: key, tokens))
        }
    }

    private func emit(_ event: SessionEvent) {
        for continuation in observers.withLock({ Array($0.values) }) { continuation.yield(event) }
    }
}

/// The async variants of the blocking calls: the one implementation over the store as awaited
/// (an ``AsyncSecretStore`` directly, a blocking ``SecretStore`` offloaded to ``TokenRefresher/executor``).
extension TokenRefresher {
    /// ``save(_:service:account:)``, awaited.
    public func save(_ tokens: TokenSet, service: String, account: String) async throws {
        try await save(tokens, service: service, account: account, via: access.awaiting)
    }

    /// ``save(oauthResponse:service:account:subject:)``, awaited.
    public func save(oauthResponse: Data, service: String, account: String, subject: String? = nil) async throws {
        try await save(TokenSet(oauthResponse: oauthResponse, now: now(), subject: subject), service: service, account: account)
    }

    /// ``load(service:account:)``, awaited.
    public func load(service: String, account: String) async throws -> TokenSet? {
        try await load(service: service, account: account, via: access.awaiting)
    }

    /// ``clear(service:account:)``, awaited.
    @discardableResult
    public func clear(service: String, account: String) async throws -> Bool {
        try await clear(service: service, account: account, via: access.awaiting)
    }
}

/// The former name of ``TokenRefresher``: it keeps and refreshes token sets over a store, and is
/// no store itself.
@available(*, deprecated, renamed: "TokenRefresher")
public typealias TokenStore = TokenRefresher
