import Hummingbird
import HummingbirdCore
import Locking
import Logging
import NIOCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import ServiceLifecycle

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
    private let bound = Locked<String?>(nil)
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
            maxBodyBytes: configuration.maxBodyBytes, streams: configuration.streams,
            allowedHosts: configuration.allowedHosts, stalledReaderTimeout: configuration.stalledReaderTimeout,
            logger: logger)
        connections = ConnectionLimit(maximum: configuration.maxConnections)
    }

    /// The HTTP connections open, bounded by `maxConnections`.
    let connections: ConnectionLimit

    /// The address the server listens on, once it runs (`host:port`, the port chosen for 0).
    public var address: String? { bound.withLock { $0 } }

    /// The probes' answers.
    func probe(_ path: String) -> HTTPReply {
        switch path {
        case "/metrics":
            return HTTPReply(200, "text/plain; version=0.0.4; charset=utf-8", port.metrics() + Array(metrics.utf8))
        case "/healthz":
            return HTTPReply(200, "ok\n")
        default:
            switch port.readiness {
            case .ready: return HTTPReply(200, "ready\n")
            case .notReady(let reason): return HTTPReply(503, "not ready: \(reason)\n")
            }
        }
    }

    /// The HTTP server's own metrics, in Prometheus' text format.
    var metrics: String {
        let samples: [(String, String, String, Int)] = [
            ("navigator_http_connections", "gauge", "HTTP connections open (streams included)", connections.count),
            (
                "navigator_http_connections_max", "gauge", "HTTP connections allowed at once (maxConnections)",
                connections.maximum
            ),
            (
                "navigator_http_connections_refused_total", "counter",
                "HTTP connections answered 503 and closed because maxConnections were open", connections.turnedAway
            ),
            ("navigator_http_streams", "gauge", "session streams open (SSE and WebSocket)", api.hub.connections),
            (
                "navigator_http_streamed_sessions", "gauge",
                "sessions followed for streams (open or kept for resuming)",
                api.hub.streamedSessions
            ),
        ]
        return samples.map { "# HELP \($0.0) \($0.2)\n# TYPE \($0.0) \($0.1)\n\($0.0) \($0.3)\n" }.joined()
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
        let (api, connections, engine) = (self.api, self.connections, self.port)
        let deadlines = (configuration.firstRequestTimeout, configuration.requestTimeout)
        // Session streams (Server-Sent Events and WebSocket) run in each connection's pipeline,
        // without a task each; everything else is Hummingbird's.
        let server = HTTPServerBuilder { responder in
            StreamingHTTPChannel(
                responder: responder, idleTimeout: deadlines.1, api: api, connections: connections,
                deadlines: deadlines)
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
                    group.addTask { await api.history.run(port: engine) }
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
