import Foundation
import Hummingbird
import Logging
import NIOCore
import NavigatorClient
import NavigatorWire
import SwiftProtobuf
import Synchronization

/// The JSON API of navigatord's HTTP server: intents, explain, snapshots and client events for
/// apps and backends that do not speak ZeroMQ. Bodies are the protos' messages in protobuf's
/// canonical JSON mapping (as SwiftProtobuf reads and writes it), so `proto/` stays the one
/// schema; every response body is a `navigator.v1.Reply`.
///
/// Each call goes through the service's own requests and intents sockets (a client connection
/// the API opens to this process), so an HTTP request is validated, limited, forwarded to
/// another instance, made durable and answered exactly as a ZeroMQ one. A rejection keeps its
/// reject code and gets the HTTP status that fits it (``status(of:)``).
///
/// Secure mode: HTTP takes no bearer tokens yet, so every API call is refused with 401 and
/// nothing reaches the service (never an anonymous way around CURVE).
final class HTTPAPI: Sendable {
    /// The endpoints this process bound (the API connects to them once they are).
    let bound: @Sendable () -> Endpoints
    /// Secure mode: the access list and the token verifier; nil without security.
    let security: Security?
    /// The largest request body taken, in bytes (JSON of at most `maxMessageBytes` of protobuf).
    let maxBodyBytes: Int
    private let connection = Mutex<Task<NavigatorConnection, any Error>?>(nil)
    /// The session streams (SSE and WebSocket).
    let hub: StreamHub
    /// The live session page's files.
    let page = PageResources()

    init(
        bound: @escaping @Sendable () -> Endpoints, security: Security?, maxMessageBytes: Int,
        streams: StreamSettings, logger: Logger
    ) {
        self.bound = bound
        self.security = security
        self.maxBodyBytes = maxMessageBytes * 4
        self.hub = StreamHub(settings: streams, logger: logger) { try Self.serviceEndpoints(bound(), security) }
    }

    /// The paths the API serves, with their methods (404 and 405 answers list them).
    static let paths: [(pattern: String, method: String)] = [
        ("/v1/intents", "POST"), ("/v1/explain", "POST"), ("/v1/sessions/{id}", "GET"),
        ("/v1/sessions/{id}/events", "POST"), ("/v1/sessions/{id}/stream", "GET"), ("/v1/openapi.json", "GET"),
    ]

    /// The method a path is served with, if it is one of the API's.
    static func method(of path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        for (pattern, method) in paths {
            let expected = pattern.split(separator: "/", omittingEmptySubsequences: false)
            guard expected.count == parts.count else { continue }
            if zip(expected, parts).allSatisfy({ $0 == "{id}" ? !$1.isEmpty : $0 == $1 }) { return method }
        }
        return nil
    }

    func register(on router: Router<BasicRequestContext>) {
        registerStreams(on: router)
        router.get("/v1/openapi.json") { _, _ in
            HTTPEndpoint.response(HTTPReply(200, "application/json", Array(OpenAPIDocument.json.utf8)))
        }
        // The live session page and its client module.
        let page = self.page
        router.get("/") { _, _ in HTTPEndpoint.response(page.reply("index.html")) }
        router.get("/page/:file") { _, context in
            HTTPEndpoint.response(page.reply(context.parameters.get("file") ?? ""))
        }
        router.post("/v1/intents") { [self] request, _ in
            try await handle(request) { body in
                let intent = try Self.decode(Navigator_V1_Intent.self, body)
                _ = try await self.authorize(request, .publish(session: intent.session))
                let wait = request.uri.queryParameters["wait"].map(String.init)
                guard wait == nil || ["true", "false", "1", "0"].contains(wait!) else {
                    throw APIError(
                        .malformed, "wait=\(LogText(wait!)) is not a yes or no; expected true, false, 1 or 0")
                }
                guard wait == "true" || wait == "1" else {
                    // Fire and forget: the intents socket; its outcome goes to the session's shells
                    // (a rejection to r/<session>/).
                    try await self.client().send(intent)
                    return (202, Navigator_V1_Reply())
                }
                return try await self.ask(.intent(intent))
            }
        }
        router.post("/v1/explain") { [self] request, _ in
            try await handle(request) { body in
                let intent = try Self.decode(Navigator_V1_Intent.self, body)
                _ = try await self.authorize(request, .publish(session: intent.session))
                return try await self.ask(.explain(intent))
            }
        }
        router.get("/v1/sessions/:id") { [self] request, context in
            let session = Self.session(context)
            return try await handle(request, body: false) { _ in
                let session = try session.get()
                _ = try await self.authorize(request, .follow(session: session))
                return try await self.ask(.snapshot(.with { $0.session = session }))
            }
        }
        router.post("/v1/sessions/:id/events") { [self] request, context in
            let session = Self.session(context)
            return try await handle(request) { body in
                let session = try session.get()
                _ = try await self.authorize(request, .follow(session: session))
                var event = try Self.decode(Navigator_V1_ClientEvent.self, body)
                if !event.session.isEmpty && event.session != session {
                    throw APIError(
                        .sessionMismatch,
                        "the event's session \(LogText(event.session)) differs from the path's \(LogText(session)); leave it out or make them equal"
                    )
                }
                event.session = session
                return try await self.ask(.clientEvent(event))
            }
        }
    }

    /// The session named in the path, percent-decoded (the service validates it like any other).
    static func session(_ context: BasicRequestContext) -> Result<String, APIError> {
        let raw = context.parameters.get("id") ?? ""
        guard let session = raw.removingPercentEncoding else {
            return .failure(
                APIError(
                    .invalidSession, "the session in the path, \(LogText(raw)), is not valid percent-encoding"))
        }
        return .success(session)
    }

    /// A refusal made by the API itself (before anything reaches the service).
    struct APIError: Error {
        var code: Navigator_V1_RejectCode
        var message: String
        var status: Int?

        init(_ code: Navigator_V1_RejectCode, _ message: String, status: Int? = nil) {
            self.code = code
            self.message = message
            self.status = status
        }

        /// The refusal as a response: a Reply with `rejected`, the status of its code.
        var response: Response {
            var reply = Navigator_V1_Reply()
            reply.rejected = .with {
                $0.code = code
                $0.message = message
            }
            var response = HTTPAPI.response(status ?? HTTPAPI.status(of: code), reply)
            if status == 401 { response.headers[.wwwAuthenticate] = "Bearer realm=\"navigatord\"" }
            return response
        }
    }

    /// Secure mode: the caller's bearer token (`Authorization: Bearer …`, or `?access_token=`
    /// where a browser cannot set headers: EventSource, WebSocket), checked and its client
    /// authorized for `action` by the access file as it is now. Returns when the token expires
    /// (nil without security). 401 without a valid token, 403 for what the client may not do.
    func authorize(_ request: Request, _ action: AccessList.Action) async throws -> Date? {
        try await authorize(
            header: request.headers[.authorization],
            query: request.uri.queryParameters["access_token"].map(String.init), action)
    }

    func authorize(header: String?, query: String?, _ action: AccessList.Action) async throws -> Date? {
        guard let security else { return nil }
        guard let tokens = security.tokens else {
            throw APIError(
                .forbidden,
                "navigatord runs in secure mode without a token key (security.tokenKeyFile), so its HTTP API takes no calls; use the ZeroMQ sockets with a CURVE key",
                status: 401)
        }
        var token = query
        if let header {
            guard header.hasPrefix("Bearer ") else {
                throw APIError(.forbidden, "the Authorization header is not \"Bearer <token>\"", status: 401)
            }
            token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        guard let token, !token.isEmpty else {
            throw APIError(
                .forbidden,
                "a bearer token is needed (Authorization: Bearer <token>, or ?access_token= for streams); navctl token issues one",
                status: 401)
        }
        let claims: AccessToken
        switch await tokens.verify(token) {
        case .success(let verified): claims = verified
        case .failure(let refusal): throw APIError(.forbidden, refusal.reason, status: 401)
        }
        guard security.client(named: claims.client) != nil, claims.client != Security.internalName else {
            throw APIError(
                .forbidden, "the token's client \(LogText(claims.client)) is not in the access file (any more)",
                status: 401)
        }
        if let refusal = security.refusal(of: action, by: claims.client) {
            throw APIError(.forbidden, refusal)
        }
        return claims.expiresAt
    }

    /// Reads the body (bounded), runs `work`, and answers its reply as JSON with its status;
    /// a rejection, from the service or from here, is answered with the status of its code.
    private func handle(
        _ request: Request, body: Bool = true, _ work: ([UInt8]) async throws -> (Int, Navigator_V1_Reply)
    ) async throws -> Response {
        do {
            var bytes: [UInt8] = []
            if body {
                if let type = request.headers[.contentType], !type.lowercased().hasPrefix("application/json") {
                    throw APIError(
                        .malformed, "the body is \(LogText(type)); expected application/json", status: 415)
                }
                var request = request
                let buffer: ByteBuffer
                do {
                    buffer = try await request.collectBody(upTo: maxBodyBytes)
                } catch is NIOTooManyBytesError {
                    throw APIError(.tooLarge, "the body is over \(maxBodyBytes) bytes; expected at most that")
                }
                bytes = Array(buffer.readableBytesView)
            }
            let (status, reply) = try await work(bytes)
            if case .rejected(let rejected)? = reply.kind {
                return Self.response(Self.status(of: rejected.code), reply)
            }
            return Self.response(status, reply)
        } catch let error as APIError {
            return error.response
        } catch let error as ClientError {
            // The service did not answer in time, or is stopping.
            var reply = Navigator_V1_Reply()
            reply.rejected = .with {
                $0.code = .unavailable
                $0.message = "navigatord did not answer: \(error.description); retry"
            }
            return Self.response(503, reply)
        }
    }

    /// Sends a request through the service's requests socket.
    private func ask(_ kind: Navigator_V1_Request.OneOf_Kind) async throws -> (Int, Navigator_V1_Reply) {
        (200, try await client().request(kind))
    }

    static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, _ body: [UInt8]) throws -> M {
        do {
            var options = JSONDecodingOptions()
            options.messageDepthLimit = 32
            return try M(jsonUTF8Bytes: body, options: options)
        } catch {
            throw APIError(
                .malformed,
                "the body is not a \(M.protoMessageName) in protobuf's JSON mapping: \(error); expected, for example, \(example(of: type))"
            )
        }
    }

    static func example<M: SwiftProtobuf.Message>(of type: M.Type) -> String {
        switch M.protoMessageName {
        case Navigator_V1_Intent.protoMessageName:
            #"{"id":"n1","session":"alice","path":[{"screen":"chat","info":{"conversationId":"42"}}]}"#
        default:
            #"{"lastSeq":"3","poppedTo":{"screenId":"2"}}"#
        }
    }

    /// The HTTP status of a reject code.
    static func status(of code: Navigator_V1_RejectCode) -> Int {
        switch code {
        case .tooLarge: 413
        case .forbidden: 403
        case .overloaded: 429
        case .staleEvent, .limitExceeded: 409
        case .shuttingDown, .unavailable, .moved: 503
        case .internal: 500
        case .unspecified, .malformed, .badFrames, .invalidSession, .sessionMismatch, .emptyPath, .unknownScreen,
            .missingInfo, .invalidInfo, .unknownURL, .unknownRequest, .expired, .invalidEvent, .invalidID,
            .pathTooLong, .UNRECOGNIZED:
            400
        }
    }

    static func response(_ status: Int, _ reply: Navigator_V1_Reply) -> Response {
        let json = (try? reply.jsonUTF8Bytes()) ?? Array("{}".utf8)
        var response = HTTPEndpoint.response(HTTPReply(status, "application/json", json + [0x0A]))
        if status == 503 || status == 429 { response.headers[.retryAfter] = "1" }
        return response
    }

    /// The API's connection to this process's sockets, made on first use.
    func client() async throws -> NavigatorConnection {
        let task = connection.withLock { current in
            if let current { return current }
            let bound = self.bound
            let security = self.security
            let task = Task { () throws -> NavigatorConnection in
                try await NavigatorConnection(
                    endpoints: try Self.serviceEndpoints(bound(), security), timeout: .seconds(5))
            }
            current = task
            return task
        }
        do {
            return try await task.value
        } catch {
            connection.withLock { $0 = nil }  // tried again on the next call
            throw error
        }
    }

    /// Where the API's client connections reach this process's sockets.
    static func serviceEndpoints(_ endpoints: Endpoints, _ security: Security?) throws -> ServiceEndpoints {
        guard let requests = connectable(endpoints.requests), let intents = connectable(endpoints.intents),
            let commands = connectable(endpoints.commands)
        else {
            throw APIError(
                .unavailable,
                "navigatord has no tcp or ipc intents, requests and commands endpoints bound (yet) for its HTTP API to use",
                status: 503)
        }
        // Secure mode: the API's own key, admitted as an admin (each caller is checked here).
        let curve = security.map {
            CurveCredentials(keys: $0.internalClient.keys, serverKey: $0.publicKey)
        }
        return ServiceEndpoints(intents: intents, requests: requests, commands: commands, curve: curve)
    }

    /// An endpoint this process can connect to: tcp or ipc (a client connection has its own
    /// context, which inproc names are not shared with); a wildcard host becomes loopback.
    static func connectable(_ endpoints: [String]) -> String? {
        guard let endpoint = endpoints.first(where: { $0.hasPrefix("tcp://") || $0.hasPrefix("ipc://") }) else {
            return nil
        }
        return endpoint.replacingOccurrences(of: "tcp://0.0.0.0:", with: "tcp://127.0.0.1:")
            .replacingOccurrences(of: "tcp://*:", with: "tcp://127.0.0.1:")
            .replacingOccurrences(of: "tcp://[::]:", with: "tcp://[::1]:")
    }

    /// Closes the API's connection (the service is stopping).
    func close() async {
        let task = connection.withLock { task -> Task<NavigatorConnection, any Error>? in
            defer { task = nil }
            return task
        }
        if let connection = try? await task?.value { await connection.close() }
    }
}
