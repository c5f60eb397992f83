import FoundationEssentials

/// An OAuth-style session: access token, refresh token, expiry, type, scope and subject, kept
/// as one item so they are always written together.
public struct TokenSet: Sendable, Equatable, CustomStringConvertible {
    /// The access token.
    public var accessToken: SecretBytes
    /// The refresh token, if the server gave one.
    public var refreshToken: SecretBytes?
    /// `Bearer`, usually.
    public var tokenType: String
    /// When the access token stops being valid; `nil` if the server did not say.
    public var expiresAt: Date?
    /// The granted scope, space-separated.
    public var scope: String?
    /// The user the session belongs to.
    public var subject: String?

    /// Creates a token set.
    public init(
        accessToken: SecretBytes, refreshToken: SecretBytes? = nil, tokenType: String = "Bearer",
        expiresAt: Date? = nil, scope: String? = nil, subject: String? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scope = scope
        self.subject = subject
    }

    /// Reads an OAuth 2.0 token response (RFC 6749 §5.1: `access_token`, `token_type`,
    /// `expires_in`, `refresh_token`, `scope`), turning `expires_in` into an absolute expiry from
    /// `now`. An error response (§5.2) throws ``TokenRefreshError/rejected(_:)`` for
    /// `invalid_grant` and ``LockboxError/invalidArgument(_:)`` otherwise.
    /// - Parameters:
    ///   - data: the response body, a JSON object.
    ///   - now: when the response arrived; `expires_in` counts from here.
    ///   - subject: the user the session belongs to (kept from `previous` when `nil`).
    ///   - previous: the session being refreshed: refresh responses often omit the refresh token
    ///     and scope, meaning "keep the old ones".
    /// - Throws: ``TokenRefreshError/rejected(_:)`` for `invalid_grant`;
    ///   ``LockboxError/invalidArgument(_:)`` for anything else that is not a usable token response.
    ///
    /// Copies: the tokens pass through `JSONDecoder` as `String`s in ordinary memory that
    /// Lockbox cannot wipe (as does `data`, the caller's); only the resulting ``accessToken`` and
    /// ``refreshToken`` are guarded. The same holds whenever a token set is saved or loaded
    /// (``TokenRefresher/save(_:service:account:)``, ``TokenRefresher/load(service:account:)``), whose JSON
    /// record is built and parsed with Foundation. SECURITY.md lists these copies.
    public init(oauthResponse data: Data, now: Date = Date(), subject: String? = nil, previous: TokenSet? = nil) throws {
        guard let object = try? JSONDecoder().decode(OAuthResponse.self, from: data) else {
            throw LockboxError.invalidArgument("the token response is not a JSON object")
        }
        if let error = object.error {
            if error == "invalid_grant" { throw TokenRefreshError.rejected("the server answered invalid_grant") }
            // Only something shaped like an OAuth error code (RFC 6749 §5.2 and the registry:
            // lower-case words joined by underscores, e.g. invalid_client, slow_down) is repeated
            // in the message: the field is the server's text and must carry nothing else into logs.
            let isErrorCode =
                (1...64).contains(error.utf8.count)
                && error.utf8.allSatisfy { (0x61...0x7A).contains($0) || $0 == 0x5F }
            throw LockboxError.invalidArgument(
                isErrorCode
                    ? "the token response is an error: \(error)" : "the token response is an error (with an unrecognised error code)")
        }
        guard let access = object.accessToken, !access.isEmpty else {
            throw LockboxError.invalidArgument("the token response has no access_token")
        }
        guard let type = object.tokenType, !type.isEmpty else {
            throw LockboxError.invalidArgument("the token response has no token_type")
        }
        var expiresAt: Date?
        if case .present(let seconds) = object.expiresIn {
            // At most 100 years: a larger value (1e19) is not a lifetime but garbage, and would be
            // stored as a date Foundation cannot represent.
            guard let seconds, (0...100 * 365 * 86_400).contains(seconds) else {
                throw LockboxError.invalidArgument("the token response's expires_in is not a number of seconds from 0 to 100 years")
            }
            expiresAt = now.addingTimeInterval(seconds)
        }
        let refresh = object.refreshToken.map { SecretBytes(utf8: $0) } ?? previous?.refreshToken
        self.init(
            accessToken: SecretBytes(utf8: access), refreshToken: refresh, tokenType: type, expiresAt: expiresAt,
            scope: object.scope ?? previous?.scope, subject: subject ?? previous?.subject)
    }

    /// The fields of a token response (RFC 6749 §5.1, §5.2) Lockbox reads. A field of another
    /// type than expected counts as absent, except `expires_in`, which is a number, a string of
    /// one, or `null`; anything else there is ``ExpiresIn/present(_:)`` with `nil`, refused.
    package struct OAuthResponse: Decodable {
        package enum ExpiresIn {
            case absent
            case present(Double?)
        }
        package var error: String?
        package var accessToken: String?
        package var tokenType: String?
        package var refreshToken: String?
        package var scope: String?
        package var expiresIn = ExpiresIn.absent

        private enum Key: String, CodingKey {
            case error, access_token, token_type, refresh_token, scope, expires_in
        }

        package init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: Key.self)
            error = object.text(at: .error)
            accessToken = object.text(at: .access_token)
            tokenType = object.text(at: .token_type)
            refreshToken = object.text(at: .refresh_token)
            scope = object.text(at: .scope)
            if object.contains(.expires_in), !((try? object.decodeNil(forKey: .expires_in)) ?? false) {
                let number = try? object.decode(Double.self, forKey: .expires_in)
                expiresIn = .present(number ?? object.text(at: .expires_in).flatMap(Double.init))
            }
        }
    }

    /// Whether the access token is still good at `date`, `leeway` before its expiry.
    public func isValid(at date: Date, leeway: Duration) -> Bool {
        guard let expiresAt else { return true }
        return date.addingTimeInterval(leeway.seconds) < expiresAt
    }

    /// Never shows a token.
    public var description: String {
        "TokenSet(type: \(tokenType), expiresAt: \(expiresAt.map { $0.formatted(.iso8601) } ?? "unknown"), refreshToken: \(refreshToken == nil ? "no" : "<redacted>"), accessToken: <redacted>)"
    }

    // MARK: Storage (JSON inside the store's encryption)

    private struct Stored: Codable {
        var access_token: String
        var refresh_token: String?
        var token_type: String
        var expires_at_ms: Int64?
        var scope: String?
        var subject: String?
    }

    /// The stored record (JSON). Tokens are text in every protocol Lockbox knows; one that is
    /// not UTF-8 is refused here rather than stored as something else.
    package func encoded() throws -> SecretBytes {
        guard let access = accessToken.stringValue(), !access.isEmpty else {
            throw LockboxError.invalidArgument("the access token is empty or not UTF-8 text")
        }
        var refresh: String?
        if let refreshToken {
            guard let text = refreshToken.stringValue() else {
                throw LockboxError.invalidArgument("the refresh token is not UTF-8 text")
            }
            refresh = text
        }
        let stored = Stored(
            access_token: access, refresh_token: refresh, token_type: tokenType,
            expires_at_ms: expiresAt.map { VaultPayload.milliseconds($0) }, scope: scope, subject: subject)
        var data = try JSONEncoder().encode(stored)
        defer { data.withUnsafeMutableBytes { $0.zeroize() } }
        return SecretBytes(copying: data)
    }

    package static func decode(_ bytes: SecretBytes, key: ItemKey) throws -> TokenSet {
        do {
            let stored = try bytes.withUnsafeBytes { try JSONDecoder().decode(Stored.self, from: Data($0)) }
            // Lockbox never stores an empty access token (``encoded()`` refuses one).
            guard !stored.access_token.isEmpty else { throw LockboxError.invalidArgument("empty access token") }
            return TokenSet(
                accessToken: SecretBytes(utf8: stored.access_token), refreshToken: stored.refresh_token.map { SecretBytes(utf8: $0) },
                tokenType: stored.token_type, expiresAt: stored.expires_at_ms.map { VaultPayload.date(milliseconds: $0) },
                scope: stored.scope, subject: stored.subject)
        } catch {
            throw LockboxError.undecodableItem(service: key.service, account: key.account, reason: "it is not a Lockbox token set")
        }
    }
}

/// What a refresh closure throws to say the session cannot be refreshed any more.
public enum TokenRefreshError: Error, Sendable {
    /// The refresh token is invalid, expired or revoked (OAuth `invalid_grant`): the token set is
    /// cleared and callers get ``LockboxError/sessionExpired(service:account:)``.
    case rejected(String)
}

/// Session state changes a ``TokenRefresher`` reports.
public enum SessionEvent: Sendable, Equatable {
    /// A token set was saved for (service, account).
    case signedIn(ItemKey)
    /// A refresh stored new tokens.
    case refreshed(ItemKey)
    /// The tokens were cleared (sign-out, or a rejected refresh).
    case signedOut(ItemKey)
}
