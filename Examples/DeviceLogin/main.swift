// Device login, as in a game: the first launch registers the device ID and stores access and
// refresh tokens; a 401 triggers one single-flight refresh and a retry; a failed refresh clears
// the tokens and reports "session expired"; no token ever appears in the output.
// The game server is a small real HTTP server on loopback (FlyingFox), not an in-process fake.
//
// Run: swift run DeviceLogin

import ExampleSupport
import FlyingFox
import FlyingSocks
import Foundation
import Lockbox
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let app = "com.example.game"
let run = ExampleRun("Device login")

// MARK: The game server

/// Issues and checks tokens; counts refreshes; can expire access tokens and revoke refresh tokens.
final class GameServer: Sendable {
    struct State {
        var validAccess: Set<String> = []
        var validRefresh: Set<String> = []
        var issued = 0
        var refreshes = 0
        var devices: Set<String> = []
    }
    let state = Mutex(State())

    func issue() -> Data {
        state.withLock { state in
            state.issued += 1
            let access = "access-\(state.issued)-\(UUID().uuidString.prefix(8))"
            let refresh = "refresh-\(state.issued)-\(UUID().uuidString.prefix(8))"
            state.validAccess.insert(access)
            state.validRefresh.insert(refresh)
            return Data(#"{"access_token":"\#(access)","token_type":"Bearer","expires_in":3600,"refresh_token":"\#(refresh)"}"#.utf8)
        }
    }

    func routes(_ server: HTTPServer) async {
        await server.appendRoute("POST /register") { [self] request in
            let device = String(decoding: try await request.bodyData, as: UTF8.self)
            state.withLock { _ = $0.devices.insert(device) }
            return HTTPResponse(statusCode: .ok, body: issue())
        }
        await server.appendRoute("POST /token") { [self] request in
            let refresh = String(decoding: try await request.bodyData, as: UTF8.self)
            let valid = state.withLock { state -> Bool in
                state.refreshes += 1
                return state.validRefresh.remove(refresh) != nil  // refresh tokens rotate: single use
            }
            guard valid else { return HTTPResponse(statusCode: .badRequest, body: Data(#"{"error":"invalid_grant"}"#.utf8)) }
            try await Task.sleep(for: .milliseconds(100))  // a slow server makes concurrent 401s overlap
            return HTTPResponse(statusCode: .ok, body: issue())
        }
        await server.appendRoute("GET /profile") { [self] request in
            let token = request.headers[.authorization]?.replacingOccurrences(of: "Bearer ", with: "") ?? ""
            let ok = state.withLock { $0.validAccess.contains(token) }
            return ok ? HTTPResponse(statusCode: .ok, body: Data(#"{"player":"Nova"}"#.utf8)) : HTTPResponse(statusCode: .unauthorized)
        }
    }

    func expireAllAccessTokens() { state.withLock { $0.validAccess.removeAll() } }
    func revokeAllRefreshTokens() { state.withLock { $0.validRefresh.removeAll() } }
    var refreshCount: Int { state.withLock { $0.refreshes } }
}

let game = GameServer()
let server = HTTPServer(address: try sockaddr_in.inet(ip4: "127.0.0.1", port: 0), logger: .disabled)
await game.routes(server)
let serverTask = Task { try await server.run() }
try await server.waitUntilListening()
guard case .ip4(_, let port) = await server.listeningAddress else { run.fail("the server did not listen") }
let base = "http://127.0.0.1:\(port)"

// MARK: The game client

struct GameClient: Sendable {
    let base: String
    let tokens: TokenRefresher

    func request(_ path: String) throws -> URLRequest {
        guard let url = URL(string: base + path) else { throw LockboxError.invalidArgument("bad URL \(path)") }
        return URLRequest(url: url)
    }

    func post(_ path: String, body: SecretBytes) async throws -> (Int, Data) {
        var request = try request(path)
        request.httpMethod = "POST"
        request.httpBody = body.withUnsafeBytes { Data($0) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    func profile(with token: SecretBytes) async throws -> Int {
        var request = try request("/profile")
        request.setValue("Bearer " + (token.stringValue() ?? ""), forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    func refresh(_ current: TokenSet) async throws -> TokenSet {
        guard let refreshToken = current.refreshToken else { throw TokenRefreshError.rejected("no refresh token") }
        let (status, body) = try await post("/token", body: refreshToken)
        if status == 400 { throw TokenRefreshError.rejected("invalid_grant") }
        return try TokenSet(oauthResponse: body, previous: current)
    }

    /// Calls the profile endpoint; on 401, refreshes once (shared with every concurrent caller) and retries.
    func loadProfile() async throws -> Int {
        guard let access = try await tokens.load(service: app, account: "player")?.accessToken else {
            throw LockboxError.noTokens(service: app, account: "player")
        }
        let status = try await profile(with: access)
        guard status == 401 else { return status }
        let renewed = try await tokens.accessToken(afterRejecting: access, service: app, account: "player") { current in
            try await refresh(current)
        }
        return try await profile(with: renewed)
    }
}

let tokens = TokenRefresher(store: run.store)
let client = GameClient(base: base, tokens: tokens)

/// The async overloads, called from async functions as a service calls them (top-level code would
/// pick the blocking overloads, which are unavailable from async code).
func deviceID(_ identity: DeviceIdentity, service: String) async throws -> UUID {
    try await identity.deviceID(service: service)
}
func save(_ tokens: TokenRefresher, _ response: Data, service: String) async throws -> TokenSet? {
    try await tokens.save(oauthResponse: response, service: service, account: "player")
    return try await tokens.load(service: service, account: "player")
}

run.step("First launch: the game registers its device ID and stores the tokens it gets back")
let device = try await deviceID(DeviceIdentity(store: run.store), service: app)
let (status, body) = try await client.post("/register", body: SecretBytes(utf8: device.uuidString))
run.expect(status == 200, "the server registers the device")
let stored = try await save(tokens, body, service: app)
run.say("device \(device) registered; tokens stored (\(stored.map { "\($0)" } ?? "none"))")
let firstStatus = try await client.loadProfile()
run.expect(firstStatus == 200, "the profile loads")

run.step("The server expires the access token; five screens load at once, all get 401, one refresh serves them all")
game.expireAllAccessTokens()
let before = game.refreshCount
let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
    for _ in 0..<5 { group.addTask { try await client.loadProfile() } }
    var all: [Int] = []
    for try await status in group { all.append(status) }
    return all
}
run.expect(statuses == [200, 200, 200, 200, 200], "every screen loads after the retry")
run.expect(game.refreshCount - before == 1, "exactly one refresh (got \(game.refreshCount - before))")
run.say("5 requests, 5 × 401, 1 refresh, 5 retries succeeded")

run.step("The server revokes the session; the refresh fails, the tokens are cleared, the player sees \"session expired\"")
game.expireAllAccessTokens()
game.revokeAllRefreshTokens()
do {
    _ = try await client.loadProfile()
    run.fail("a revoked session still loaded")
} catch LockboxError.sessionExpired {
    run.say("Session expired. Please sign in again.")
}
run.expect(try tokens.load(service: app, account: "player") == nil, "the tokens are cleared")
run.expect(try DeviceIdentity(store: run.store).deviceID(service: app) == device, "the device ID stays")

serverTask.cancel()
run.finish(services: [app])
