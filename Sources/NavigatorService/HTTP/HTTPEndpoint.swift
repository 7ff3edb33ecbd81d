import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
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

/// navigatord's HTTP server (Hummingbird 2) as a part of its service group: a router of GET
/// paths (`/metrics`, `/healthz`, `/readyz`), concurrent connections, idle connections closed
/// after 30 s, IPv4 and IPv6. A path it does not serve gets 404, and a served path asked with
/// another method 405, each saying what there is.
struct HTTPPart: Service {
    /// `host:port`, `[ipv6]:port`, `localhost:port`; port 0 picks one.
    let address: String
    let routes: [String: @Sendable () -> HTTPReply]
    /// The JSON API (``HTTPAPI``), nil to serve only the routes above.
    var api: HTTPAPI? = nil
    let logger: Logger
    /// Told the address bound (with the port chosen for port 0) once the server runs.
    let onRunning: @Sendable (String) -> Void
    /// Told of an error that ends the server once it ran.
    let onFailure: @Sendable (any Error) -> Void

    func run() async throws {
        let (host, port) = try HTTPEndpoint.parse(address)
        let router = Router()
        router.add(middleware: HTTPEndpoint.Fallback(paths: routes.keys.sorted(), api: api != nil))
        for (path, reply) in routes {
            router.get(RouterPath(path)) { _, _ in HTTPEndpoint.response(reply()) }
        }
        api?.register(on: router)
        let running = Atomic<Bool>(false)
        let onRunning = self.onRunning
        let server: HTTPServerBuilder
        if let api {
            // Session streams (Server-Sent Events and WebSocket) run in each connection's
            // pipeline, without a task each; everything else is Hummingbird's.
            server = HTTPServerBuilder { responder in
                StreamingHTTPChannel(responder: responder, idleTimeout: .seconds(30), api: api)
            }
        } else {
            server = .http1(configuration: .init(idleTimeout: .seconds(30)))
        }
        let application = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                running.store(true, ordering: .releasing)
                onRunning(channel.localAddress.map { HTTPEndpoint.text($0, host: host) } ?? "\(host):\(port)")
            },
            logger: logger)
        do {
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    if let api { group.addTask { await api.hub.maintain() } }
                    group.addTask { try await application.run() }
                    // The application ends first (the streams' upkeep runs until cancelled).
                    try await group.next()
                    group.cancelAll()
                }
            } onGracefulShutdown: { [api] in
                // Open streams would hold the server's graceful shutdown until they end.
                api?.hub.shutDown()
            }
        } catch {
            if running.load(ordering: .acquiring) { onFailure(error) }
            throw ServiceError("cannot serve HTTP on \(address): \(error)")
        }
    }
}

/// Addresses, responses and the fallback of ``HTTPPart``.
enum HTTPEndpoint {
    /// `host:port`, `[v6]:port`, `localhost:port` -> (host, port).
    static func parse(_ address: String) throws -> (String, Int) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (0...65535).contains(port)
        else {
            throw ServiceError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host.first != "[" else {
            throw ServiceError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
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
        /// Whether the JSON API is served.
        let api: Bool

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
            async throws -> Response
        {
            do {
                return try await next(request, context)
            } catch let error as HTTPError where error.status == .notFound {
                if api, request.uri.path.hasPrefix("/v1/") {
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
