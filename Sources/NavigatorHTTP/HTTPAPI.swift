import Foundation
import Hummingbird
import Logging
import NIOCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import SwiftProtobuf

/// The JSON API of navigatord's HTTP server: intents, explain, snapshots and client events for
/// apps and backends that do not speak ZeroMQ. Bodies are the protos' messages in protobuf's
/// canonical JSON mapping (as SwiftProtobuf reads and writes it), so `proto/` stays the one
/// schema; every response body is a `navigator.v1.Reply`.
///
/// Each call goes to the engine in process, through its ``NavigatorPort``, which admits it
/// exactly as a message on its ZeroMQ sockets (validated, limited, forwarded to another
/// instance, made durable, answered). A rejection keeps its reject code and gets the HTTP status
/// that fits it (``status(of:)``).
///
/// Secure mode: a call needs a bearer token (a JWT signed with `security.tokenKeyFile`, see
/// ``AccessToken``) naming a client of the access file; the engine authorizes the call as that
/// client. Without a token key every call is refused 401 (never an anonymous way around CURVE).
final class HTTPAPI: Sendable {
    let port: any NavigatorPort
    /// Whether the engine runs in secure mode (then every call needs a token).
    let secure: Bool
    /// Secure mode: the key bearer tokens are checked with; nil refuses every call.
    let tokens: TokenKey?
    /// The largest request body taken, in bytes (JSON of at most `maxMessageBytes` of protobuf).
    let maxBodyBytes: Int
    /// Without security: the names `Host` and `Origin` may give (nil: not checked).
    let allowedHosts: Set<String>?
    /// The session streams (SSE and WebSocket).
    let hub: StreamHub
    /// How long a stream's client may read nothing of what waits for it before it is cut off.
    let stalledReaderTimeout: TimeAmount
    /// The live session page's files (the dashboard's too).
    let page = PageResources()
    /// The dashboard's last hour.
    let history = DashboardHistory()

    init(
        port: any NavigatorPort, secure: Bool, tokens: TokenKey?, maxBodyBytes: Int, streams: StreamSettings,
        allowedHosts: Set<String>? = nil, stalledReaderTimeout: Duration = .seconds(60), logger: Logger
    ) {
        self.stalledReaderTimeout = .nanoseconds(Int64(stalledReaderTimeout / .nanoseconds(1)))
        self.port = port
        self.allowedHosts = allowedHosts
        self.secure = secure
        self.tokens = tokens
        self.maxBodyBytes = maxBodyBytes
        self.hub = StreamHub(settings: streams, port: port, logger: logger)
    }

    /// The paths the API serves, with their methods (404 and 405 answers list them).
    static let paths: [(pattern: String, method: String)] = [
        ("/v1/intents", "POST"), ("/v1/explain", "POST"), ("/v1/sessions/{id}", "GET"),
        ("/v1/sessions/{id}/events", "POST"), ("/v1/sessions/{id}/stream", "GET"), ("/v1/openapi.json", "GET"),
        ("/v1/dashboard", "GET"), ("/v1/routes/check", "POST"),
        ("/v1/routes/impact", "POST"),
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

    static let traceparentHeader = HTTPFields.Element.Name("traceparent")!

    /// The intent with the request's W3C `traceparent` header, unless its body names one.
    static func traced(_ intent: Navigator_V1_Intent, _ request: Request) -> Navigator_V1_Intent {
        guard intent.traceparent.isEmpty, let header = request.headers[traceparentHeader] else { return intent }
        var traced = intent
        traced.traceparent = header
        return traced
    }

    func register(on router: Router<BasicRequestContext>) {
        router.get("/v1/openapi.json") { _, _ in
            HTTPEndpoint.response(HTTPReply(200, "application/json", Array(OpenAPIDocument.json.utf8)))
        }
        // The live session page and its client module.
        let page = self.page
        router.get("/") { _, _ in HTTPEndpoint.response(page.reply("index.html")) }
        router.get("/page/:file") { _, context in
            HTTPEndpoint.response(page.reply(context.parameters.get("file") ?? ""))
        }
        // The dashboard: its page, and its data for whoever may read stats (in secure mode, a
        // token of a client the access file lets read them).
        router.get("/dashboard") { _, _ in HTTPEndpoint.response(page.reply("dashboard.html")) }
        router.get("/v1/dashboard") { [self] request, _ in
            do {
                let (caller, _) = try await authenticate(
                    header: request.headers[.authorization], query: try Self.accessToken(inQuery: request.uri.query))
                let reply = await port.ask(.with { $0.stats = .init() }, as: caller)
                guard case .stats(let stats)? = reply.kind else {
                    if case .rejected(let rejected)? = reply.kind {
                        return Self.response(Self.status(of: rejected.code), reply)
                    }
                    return Self.response(500, reply)
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                let document = history.document(stats, at: DashboardHistory.nowMilliseconds())
                return HTTPEndpoint.response(HTTPReply(200, "application/json", Array(try encoder.encode(document))))
            } catch let error as APIError {
                return error.response
            }
        }
        router.post("/v1/intents") { [self] request, _ in
            try await handle(request) { caller, body in
                let intent = Self.traced(try Self.decode(Navigator_V1_Intent.self, body), request)
                let wait = request.uri.queryParameters["wait"].map(String.init)
                guard wait == nil || ["true", "false", "1", "0"].contains(wait!) else {
                    throw APIError(
                        .malformed, "wait=\(LogText(wait!)) is not a yes or no; expected true, false, 1 or 0")
                }
                guard wait == "true" || wait == "1" else {
                    // Fire and forget: admitted now; its outcome goes to the session's followers
                    // (a later rejection to its streams and to r/<session>/).
                    if let refused = await self.port.send(intent, as: caller) {
                        var reply = Navigator_V1_Reply()
                        reply.rejected = .with {
                            $0.code = refused.code
                            $0.message = refused.message
                        }
                        return (Self.status(of: refused.code), reply)
                    }
                    return (202, Navigator_V1_Reply())
                }
                return (200, await self.port.ask(.with { $0.intent = intent }, as: caller))
            }
        }
        router.post("/v1/explain") { [self] request, _ in
            try await handle(request) { caller, body in
                let intent = Self.traced(try Self.decode(Navigator_V1_Intent.self, body), request)
                return (200, await self.port.ask(.with { $0.explain = intent }, as: caller))
            }
        }
        router.post("/v1/routes/check") { [self] request, _ in
            try await handle(request) { caller, body in
                let candidate = try Self.decode(Navigator_V1_RoutesCheckRequest.self, body)
                return (200, await self.port.ask(.with { $0.routesCheck = candidate }, as: caller))
            }
        }
        router.post("/v1/routes/impact") { [self] request, _ in
            try await handle(request) { caller, body in
                let candidate = try Self.decode(Navigator_V1_RoutesImpactRequest.self, body)
                return (200, await self.port.ask(.with { $0.routesImpact = candidate }, as: caller))
            }
        }
        router.get("/v1/routes/rollout") { [self] request, _ in
            try await handle(request, body: false) { caller, _ in
                (200, await self.port.ask(.with { $0.routesRollout = .with { $0.action = .status } }, as: caller))
            }
        }
        router.post("/v1/routes/rollout") { [self] request, _ in
            try await handle(request) { caller, body in
                var start = try Self.decode(Navigator_V1_RoutesRolloutRequest.self, body)
                guard start.action == .status || start.action == .start else {
                    throw APIError(
                        .invalidRequest,
                        "action is \(start.action); this path starts a rollout (expected no action, or ROLLOUT_ACTION_START): promote and roll back at /v1/routes/rollout/promote and /rollback",
                        status: 400)
                }
                start.action = .start
                return (200, await self.port.ask(.with { $0.routesRollout = start }, as: caller))
            }
        }
        for (path, action) in [("promote", Navigator_V1_RolloutAction.promote), ("rollback", .rollback)] {
            router.post("/v1/routes/rollout/\(path)") { [self] request, _ in
                try await handle(request, body: false) { caller, _ in
                    (200, await self.port.ask(.with { $0.routesRollout = .with { $0.action = action } }, as: caller))
                }
            }
        }
        router.get("/v1/sessions/:id") { [self] request, context in
            let session = Self.session(context)
            return try await handle(request, body: false) { caller, _ in
                let session = try session.get()
                return (200, await self.port.ask(.with { $0.snapshot = .with { $0.session = session } }, as: caller))
            }
        }
        router.post("/v1/sessions/:id/events") { [self] request, context in
            let session = Self.session(context)
            return try await handle(request) { caller, body in
                let session = try session.get()
                var event = try Self.decode(Navigator_V1_ClientEvent.self, body)
                if !event.session.isEmpty && event.session != session {
                    throw APIError(
                        .sessionMismatch,
                        "the event's session \(LogText(event.session)) differs from the path's \(LogText(session)); leave it out or make them equal"
                    )
                }
                event.session = session
                return (200, await self.port.ask(.with { $0.clientEvent = event }, as: caller))
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
        var response: Response { HTTPEndpoint.response(reply) }

        /// The refusal as navigatord answers it, on every path (a Hummingbird route, or a stream
        /// refused in the connection's pipeline).
        var reply: HTTPReply {
            var reply = Navigator_V1_Reply()
            reply.rejected = .with {
                $0.code = code
                $0.message = message
            }
            return HTTPAPI.reply(status ?? HTTPAPI.status(of: code), reply)
        }
    }

    /// Without security, why a request is refused for where it says it goes (`Host`) or where it
    /// comes from (`Origin`, which browsers send with WebSocket upgrades and cross-site calls):
    /// each must name an allowed host (any port), so that a web page the user visits can neither
    /// drive nor read a local navigatord — not by a cross-site WebSocket, nor by rebinding its
    /// own name to 127.0.0.1. Nil: allowed (or secure mode, where tokens decide).
    func refusal(host: String?, origin: String?) -> APIError? {
        guard let allowedHosts else { return nil }
        let expected =
            "expected one of \(allowedHosts.sorted().joined(separator: ", ")) (setting allowedHosts), or security configured"
        if let host, let name = HTTPConfiguration.hostName(host), !allowedHosts.contains(name) {
            return APIError(
                .forbidden,
                "the request's Host is \(LogText(host)); without security navigatord answers only requests addressed to its allowed names, so that no web page can reach it by rebinding a name; \(expected)"
            )
        } else if host != nil, HTTPConfiguration.hostName(host!) == nil {
            return APIError(
                .malformed, "the request's Host \(LogText(host!)) is not host[:port]; \(expected)", status: 400)
        }
        if let origin {
            let name = origin.range(of: "://").flatMap { HTTPConfiguration.hostName(String(origin[$0.upperBound...])) }
            if name == nil || !allowedHosts.contains(name!) {
                return APIError(
                    .forbidden,
                    "the request comes from a web page of \(LogText(origin)) (Origin); without security navigatord takes no request from another site's page; \(expected)"
                )
            }
        }
        return nil
    }

    /// Who calls: in secure mode the client its bearer token names (`Authorization: Bearer …`,
    /// or `?access_token=` where a browser cannot set headers: EventSource, WebSocket), checked
    /// and known to the engine's access file as it is now, and when the token expires; anyone
    /// without security. 401 without a valid token.
    func authenticate(header: String?, query: String?) async throws(APIError) -> (Caller, Date?) {
        guard secure else { return (.anonymous, nil) }
        guard let tokens else {
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
        let caller = Caller(name: claims.client)
        guard port.knows(caller) else {
            throw APIError(
                .forbidden, "the token's client \(LogText(claims.client)) is not in the access file (any more)",
                status: 401)
        }
        return (caller, claims.expiresAt)
    }

    /// The `access_token` of a query string (percent-decoded), if it names one; refused if it
    /// names several (every path reads it here, so no two parsers can disagree on which counts).
    static func accessToken(inQuery query: String?) throws(APIError) -> String? {
        var tokens: [String] = []
        for pair in (query ?? "").split(separator: "&") where pair.hasPrefix("access_token=") {
            tokens.append(String(pair.dropFirst(13)).removingPercentEncoding ?? "")
        }
        guard tokens.count <= 1 else {
            throw APIError(.malformed, "the query names access_token \(tokens.count) times; expected once")
        }
        return tokens.first
    }

    /// Authenticates the caller, reads the body (bounded), runs `work`, and answers its reply as
    /// JSON with its status; a rejection, from the engine or from here, is answered with the
    /// status of its code.
    private func handle(
        _ request: Request, body: Bool = true, _ work: (Caller, [UInt8]) async throws -> (Int, Navigator_V1_Reply)
    ) async throws -> Response {
        do {
            let (caller, _) = try await authenticate(
                header: request.headers[.authorization], query: try Self.accessToken(inQuery: request.uri.query))
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
            let (status, reply) = try await work(caller, bytes)
            if case .rejected(let rejected)? = reply.kind {
                return Self.response(Self.status(of: rejected.code), reply)
            }
            return Self.response(status, reply)
        } catch let error as APIError {
            return error.response
        }
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
        case Navigator_V1_RoutesCheckRequest.protoMessageName, Navigator_V1_RoutesImpactRequest.protoMessageName:
            #"{"yaml":"tabs: ...\nscreens: ...","source":"routes.yaml"}"#
        case Navigator_V1_RoutesRolloutRequest.protoMessageName:
            #"{"yaml":"tabs: ...\nscreens: ...","source":"routes.yaml","sharePercent":10}"#
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
        case .staleEvent, .limitExceeded, .appTooOld, .conflict: 409
        case .shuttingDown, .unavailable, .moved: 503
        case .internal: 500
        case .unspecified, .malformed, .badFrames, .invalidSession, .sessionMismatch, .emptyPath, .unknownScreen,
            .missingInfo, .invalidInfo, .unknownURL, .unknownRequest, .expired, .invalidEvent, .invalidID,
            .pathTooLong, .invalidRequest, .UNRECOGNIZED:
            400
        }
    }

    static func response(_ status: Int, _ reply: Navigator_V1_Reply) -> Response {
        HTTPEndpoint.response(Self.reply(status, reply))
    }

    /// A `Reply` as the API answers it: JSON, with `Retry-After` on 429 and 503 and
    /// `WWW-Authenticate` on 401.
    static func reply(_ status: Int, _ reply: Navigator_V1_Reply) -> HTTPReply {
        let json = (try? reply.jsonUTF8Bytes()) ?? Array("{}".utf8)
        var answer = HTTPReply(status, "application/json", json + [0x0A])
        if status == 503 || status == 429 { answer.headers.append(("Retry-After", "1")) }
        if status == 401 { answer.headers.append(("WWW-Authenticate", "Bearer realm=\"navigatord\"")) }
        return answer
    }
}
