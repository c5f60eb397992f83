import Foundation
import Hummingbird
import Lockbox
import NIOCore

/// The service's routes over one store: tokens, PINs and the device ID.
struct LockboxAPI: Sendable {
    /// The service name the items are kept under.
    static let service = "com.example.hummingbird"
    /// The largest body a route reads: an OAuth response or a PIN.
    static let maxBody = 64 << 10

    let tokens: TokenRefresher
    let pins: PinGuard
    let identity: DeviceIdentity
    /// Call the blocking API from the handlers (the cooperative pool's threads), for comparison.
    let blocking: Bool

    init(store: any SecretStore, configuration: LockboxConfiguration, blocking: Bool) {
        let executor = configuration.makeExecutor()
        tokens = configuration.tokenRefresher(store: store, executor: executor)
        pins = configuration.pinGuard(store: store, executor: executor)
        identity = configuration.deviceIdentity(store: store, executor: executor)
        self.blocking = blocking
    }

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("health") { _, _ in "ok" }
        router.put("users/:user/token") { request, context in
            try await saveToken(request, context)
        }
        router.get("users/:user/token") { _, context in
            try await loadToken(context)
        }
        router.put("users/:user/pin") { request, context in
            try await setPin(request, context)
        }
        router.post("users/:user/pin/verify") { request, context in
            try await verifyPin(request, context)
        }
        router.get("device-id") { _, _ in
            let id =
                blocking
                ? try callBlocking { try identity.deviceID(service: Self.service) }
                : try await identity.deviceID(service: Self.service)
            return id.uuidString
        }
    }

    private func saveToken(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try context.parameters.require("user")
        let body = Data(buffer: try await request.body.collect(upTo: Self.maxBody))
        do {
            if blocking {
                try callBlocking { try tokens.save(oauthResponse: body, service: Self.service, account: user) }
            } else {
                try await tokens.save(oauthResponse: body, service: Self.service, account: user)
            }
        } catch let error as LockboxError {
            return Self.response(for: error)
        }
        return Response(status: .noContent)
    }

    private func loadToken(_ context: BasicRequestContext) async throws -> Response {
        let user = try context.parameters.require("user")
        let tokenSet =
            blocking
            ? try callBlocking { try tokens.load(service: Self.service, account: user) }
            : try await tokens.load(service: Self.service, account: user)
        guard let tokenSet, let refreshToken = tokenSet.refreshToken?.stringValue() else {
            return Self.json(.notFound, ["code": "no-tokens"])
        }
        return Self.json(.ok, ["refresh_token": refreshToken])
    }

    private func setPin(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let profile = PinProfile(service: Self.service, name: try context.parameters.require("user"))
        let pin = try await Self.secret(request)
        do {
            if blocking {
                try callBlocking { try pins.set(profile, pin: pin) }
            } else {
                try await pins.set(profile, pin: pin)
            }
        } catch let error as LockboxError {
            return Self.response(for: error)
        }
        return Response(status: .noContent)
    }

    private func verifyPin(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let profile = PinProfile(service: Self.service, name: try context.parameters.require("user"))
        let pin = try await Self.secret(request)
        do {
            if blocking {
                try callBlocking { try pins.verify(profile, pin: pin) }
            } else {
                try await pins.verify(profile, pin: pin)
            }
        } catch let error as LockboxError {
            return Self.response(for: error)
        }
        return Response(status: .noContent)
    }

    /// The request body as a secret. The copy NIO received it into is not zeroed: HTTP servers
    /// keep bodies in ordinary memory (the DocC article "Lockbox in a Hummingbird or Vapor service").
    private static func secret(_ request: Request) async throws -> SecretBytes {
        let buffer = try await request.body.collect(upTo: maxBody)
        return SecretBytes(copying: buffer.readableBytesView)
    }

    /// The HTTP answer for a Lockbox error: a status and the error's stable code, never its details.
    static func response(for error: LockboxError) -> Response {
        switch error {
        case .wrongPin(_, let failures, _):
            return json(.unauthorized, ["code": error.code.rawValue, "failures": "\(failures)"])
        case .pinLockedOut(_, _, let seconds):
            var response = json(.tooManyRequests, ["code": error.code.rawValue])
            response.headers[.retryAfter] = String(Int(seconds.rounded(.up)))
            return response
        case .pinDisabled(_, let failures):
            return json(.init(code: 423, reasonPhrase: "Locked"), ["code": error.code.rawValue, "failures": "\(failures)"])
        case .pinNotSet, .noTokens, .itemNotFound:
            return json(.notFound, ["code": error.code.rawValue])
        case .pinRejected, .invalidArgument, .undecodableItem:
            return json(.unprocessableContent, ["code": error.code.rawValue])
        case .vaultBusy:
            return json(.serviceUnavailable, ["code": error.code.rawValue])
        default:
            return json(.internalServerError, ["code": error.code.rawValue])
        }
    }

    static func json(_ status: HTTPResponse.Status, _ fields: [String: String]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// Runs `body` here, on the calling thread, choosing the blocking overloads (the `--blocking` mode).
private func callBlocking<Result>(_ body: () throws -> Result) rethrows -> Result {
    try body()
}
