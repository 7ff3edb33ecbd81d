import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import ServiceLifecycle
import Synchronization

/// What navigatord answers on one HTTP path.
struct HTTPReply: Sendable {
    var code: Int
    var contentType: String
    var body: [UInt8]
    /// More header fields (`Retry-After`, `WWW-Authenticate`, `Allow`).
    var headers: [(String, String)] = []

    init(_ code: Int, _ text: String) {
        self.init(code, "text/plain; charset=utf-8", Array(text.utf8))
    }

    init(_ code: Int, _ contentType: String, _ body: [UInt8]) {
        self.code = code
        self.contentType = contentType
        self.body = body
    }

    /// "200 OK", "503 Service Unavailable", ...
    var status: String {
        let reason =
            switch code {
            case 200: "OK"
            case 202: "Accepted"
            case 400: "Bad Request"
            case 401: "Unauthorized"
            case 403: "Forbidden"
            case 404: "Not Found"
            case 405: "Method Not Allowed"
            case 409: "Conflict"
            case 413: "Content Too Large"
            case 415: "Unsupported Media Type"
            case 429: "Too Many Requests"
            case 500: "Internal Server Error"
            case 503: "Service Unavailable"
            default: ""
            }
        return "\(code) \(reason)"
    }
}

/// What the HTTP server is told.
public struct HTTPConfiguration: Sendable {
    /// `host:port`, `[ipv6]:port`, `localhost:port`; port 0 picks one.
    public var address: String
    /// The largest request body taken, in bytes (JSON of at most the engine's
    /// `maxMessageBytes` of protobuf: four times that).
    public var maxBodyBytes: Int
    public var streams: StreamSettings
    /// Whether the engine runs in secure mode: then every call needs a bearer token.
    public var secure: Bool
    /// Secure mode: the key tokens are checked with; nil refuses every call (401).
    public var tokens: TokenKey?

    public init(
        address: String, maxBodyBytes: Int, streams: StreamSettings = StreamSettings(), secure: Bool = false,
        tokens: TokenKey? = nil
    ) {
        self.address = address
        self.maxBodyBytes = maxBodyBytes
        self.streams = streams
        self.secure = secure
        self.tokens = tokens
    }
}

/// navigatord's HTTP server (Hummingbird 2) as a service of its group: `/metrics`, `/healthz`
/// and `/readyz` for probes, the JSON API and session streams (``HTTPAPI``) and the live page,
/// all through the engine's ``NavigatorPort``; concurrent connections, idle connections closed
/// after 30 s, IPv4 and IPv6. A path it does not serve gets 404, and a served path asked with
/// another method 405, each saying what there is.
public final class HTTPServer: Service, Sendable {
    public let configuration: HTTPConfiguration
    let port: any NavigatorPort
    let api: HTTPAPI
    let logger: Logger
    private let bound = Mutex<String?>(nil)
    /// Told the address bound (with the port chosen for port 0) once the server runs.
    private let onRunning: @Sendable (String) -> Void

    public init(
        configuration: HTTPConfiguration, port: any NavigatorPort, logger: Logger,
        onRunning: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.port = port
        self.logger = logger
        self.onRunning = onRunning
        api = HTTPAPI(
            port: port, secure: configuration.secure, tokens: configuration.tokens,
            maxBodyBytes: configuration.maxBodyBytes, streams: configuration.streams, logger: logger)
    }

    /// The address the server listens on, once it runs (`host:port`, the port chosen for 0).
    public var address: String? { bound.withLock { $0 } }

    /// The probes' answers.
    func probe(_ path: String) -> HTTPReply {
        switch path {
        case "/metrics":
            return HTTPReply(200, "text/plain; version=0.0.4; charset=utf-8", port.metrics())
        case "/healthz":
            return HTTPReply(200, "ok\n")
        default:
            switch port.readiness {
            case .ready: return HTTPReply(200, "ready\n")
            case .notReady(let reason): return HTTPReply(503, "not ready: \(reason)\n")
            }
        }
    }

    static let probes = ["/healthz", "/metrics", "/readyz"]

    public func run() async throws {
        let address = configuration.address
        let (host, port) = try HTTPEndpoint.parse(address)
        let router = Router()
        router.add(middleware: HTTPEndpoint.Fallback(paths: Self.probes))
        for path in Self.probes {
            router.get(RouterPath(path)) { [self] _, _ in HTTPEndpoint.response(probe(path)) }
        }
        api.register(on: router)
        let api = self.api
        // Session streams (Server-Sent Events and WebSocket) run in each connection's pipeline,
        // without a task each; everything else is Hummingbird's.
        let server = HTTPServerBuilder { responder in
            StreamingHTTPChannel(responder: responder, idleTimeout: .seconds(30), api: api)
        }
        let application = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { [self] channel in
                let text = channel.localAddress.map { HTTPEndpoint.text($0, host: host) } ?? "\(host):\(port)"
                bound.withLock { $0 = text }
                onRunning(text)
            },
            logger: logger)
        do {
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await api.hub.maintain() }
                    group.addTask { try await application.run() }
                    // The application ends first (the streams' upkeep runs until cancelled).
                    try await group.next()
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                // Open streams would hold the server's graceful shutdown until they end.
                api.hub.shutDown()
            }
        } catch {
            throw HTTPServerError("cannot serve HTTP on \(address): \(error)")
        }
    }
}

/// Why the HTTP server cannot run: its address, and what went wrong.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Addresses, responses and the fallback of ``HTTPServer``.
public enum HTTPEndpoint {
    /// `host:port`, `[v6]:port`, `localhost:port` -> (host, port).
    public static func parse(_ address: String) throws(HTTPServerError) -> (String, Int) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (0...65535).contains(port)
        else {
            throw HTTPServerError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host.first != "[" else {
            throw HTTPServerError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
        }
        return (host == "localhost" ? "127.0.0.1" : host, port)
    }

    static func text(_ address: SocketAddress, host: String) -> String {
        let ip = address.ipAddress ?? host
        let port = address.port ?? 0
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    static func response(_ reply: HTTPReply) -> Response {
        var headers: HTTPFields = [.contentType: reply.contentType, .cacheControl: "no-store"]
        for (name, value) in reply.headers {
            if let name = HTTPFields.Element.Name(name) { headers.append(.init(name: name, value: value)) }
        }
        return Response(
            status: .init(code: reply.code, reasonPhrase: String(reply.status.drop { $0 != " " }.dropFirst())),
            headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
    }

    /// Answers what no route matched: 405 for a served path asked with another method, 404
    /// otherwise, each listing what there is (as JSON for the API's paths).
    struct Fallback: RouterMiddleware {
        typealias Context = BasicRequestContext
        let paths: [String]

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
            async throws -> Response
        {
            do {
                return try await next(request, context)
            } catch let error as HTTPError where error.status == .notFound {
                if request.uri.path.hasPrefix("/v1/") {
                    return apiFallback(request)
                }
                guard paths.contains(request.uri.path) else {
                    return HTTPEndpoint.response(
                        HTTPReply(404, "no such path; try \(paths.joined(separator: ", "))\n"))
                }
                var reply = HTTPReply(405, "\(request.method) is not served on \(request.uri.path); use GET\n")
                reply.headers = [("Allow", "GET, HEAD")]
                return HTTPEndpoint.response(reply)
            }
        }

        func apiFallback(_ request: Request) -> Response {
            var reply = Navigator_V1_Reply()
            let path = request.uri.path
            guard let method = HTTPAPI.method(of: path) else {
                reply.rejected = .with {
                    $0.code = .unknownRequest
                    $0.message =
                        "no API path \(LogText(path)); expected one of \(HTTPAPI.paths.map { "\($0.method) \($0.pattern)" }.joined(separator: ", "))"
                }
                return HTTPAPI.response(404, reply)
            }
            reply.rejected = .with {
                $0.code = .unknownRequest
                $0.message = "\(request.method) is not served on \(LogText(path)); use \(method)"
            }
            var answer = HTTPAPI.reply(405, reply)
            answer.headers.append(("Allow", method))
            return HTTPEndpoint.response(answer)
        }
    }
}
