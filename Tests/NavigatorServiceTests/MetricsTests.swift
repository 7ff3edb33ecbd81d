import NavigatorCore
import NavigatorWire
import Testing

@testable import NavigatorService

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP exchange over a plain socket (the connection closed after it): returns the status
/// line and the body.
func http(_ address: String, _ request: String) throws -> (status: String, body: String) {
    var request = request
    if !request.contains("Connection:"), let end = request.range(of: "\r\n") {
        request.insert(contentsOf: "\r\nConnection: close", at: end.lowerBound)
    }
    let fd = try tcpConnect(address)
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var bytes = Array(request.utf8)
    _ = write(fd, &bytes, bytes.count)
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { break }
        response += buffer[0..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { throw TestFailure("no HTTP head in: \(text)") }
    let head = text[..<split.lowerBound]
    return (String(head.split(separator: "\r\n").first ?? head), String(text[split.upperBound...]))
}

/// A TCP connection to `address` (IPv4 host:port), as a file descriptor the caller closes.
func tcpConnect(_ address: String) throws -> Int32 {
    let parts = address.split(separator: ":")
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = UInt16(parts[1])!.bigEndian
    inet_pton(AF_INET, String(parts[0]), &target.sin_addr)
    // Close-on-exec: a child another test spawns must not keep this connection open.
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    let connected = withUnsafePointer(to: &target) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        close(fd)
        throw TestFailure("cannot connect to \(address)")
    }
    return fd
}

@Suite("HTTP: metrics and health")
struct MetricsTests {
    @Test("/metrics speaks Prometheus text; /healthz and /readyz answer; others are refused")
    func endpoints() async throws {
        let configure: (inout ServiceConfiguration) -> Void = { $0.metricsAddress = "127.0.0.1:0" }
        try await withService(configure) { _, endpoints in
            let address = try #require(endpoints.metrics)
            let exchanges = try await onThread { () throws -> [(status: String, body: String)] in
                let client = try Client(endpoints)
                _ = try client.request(
                    .intent(wireIntent("m1", [ScreenContext("chat", ["conversationId": "1"])], session: "m")))
                _ = try client.request(.intent(wireIntent("m2", [ScreenContext("nope")], session: "m")))
                return [
                    try http(address, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                    try http(address, "GET /healthz HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /readyz HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /nothing HTTP/1.1\r\n\r\n"),
                    try http(address, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
                ]
            }
            let metrics = exchanges[0]
            #expect(metrics.status == "HTTP/1.1 200 OK")
            #expect(metrics.body.contains(#"navigator_intents_total{outcome="resolved"} 1"#))
            #expect(metrics.body.contains(#"navigator_intents_total{outcome="rejected"} 1"#))
            #expect(metrics.body.contains(#"navigator_rejections_total{code="unknown_screen"} 1"#))
            #expect(metrics.body.contains("navigator_resolve_duration_seconds_bucket"))
            #expect(metrics.body.contains("navigator_sessions 1"))
            #expect(metrics.body.contains(#"navigator_worker_queue_depth{worker="0"}"#))
            #expect(exchanges[1].status == "HTTP/1.1 200 OK" && exchanges[1].body == "ok\n")
            #expect(exchanges[2].status == "HTTP/1.1 200 OK" && exchanges[2].body == "ready\n")
            #expect(exchanges[3].status == "HTTP/1.1 404 Not Found")
            #expect(exchanges[4].status == "HTTP/1.1 405 Method Not Allowed")
        }
    }

    @Test("idle connections hold nothing up: /healthz answers while ten others sit open")
    func idleConnections() async throws {
        let configure: (inout ServiceConfiguration) -> Void = { $0.metricsAddress = "127.0.0.1:0" }
        try await withService(configure) { _, endpoints in
            let address = try #require(endpoints.metrics)
            let (health, ready) = try await onThread { () throws -> (String, String) in
                let idle = try (0..<10).map { _ in try tcpConnect(address) }
                defer { for fd in idle { close(fd) } }
                return (
                    try http(address, "GET /healthz HTTP/1.1\r\n\r\n").status,
                    try http(address, "GET /readyz HTTP/1.1\r\n\r\n").status
                )
            }
            #expect(health == "HTTP/1.1 200 OK")
            #expect(ready == "HTTP/1.1 200 OK")
        }
    }

    @Test("HTTP addresses: host:port, [ipv6]:port, localhost; anything else is refused saying the form")
    func addresses() throws {
        #expect(try HTTPEndpoint.parse("127.0.0.1:9090") == ("127.0.0.1", 9090))
        #expect(try HTTPEndpoint.parse("[::1]:0") == ("::1", 0))
        #expect(try HTTPEndpoint.parse("[::]:9090") == ("::", 9090))
        #expect(try HTTPEndpoint.parse("localhost:80") == ("127.0.0.1", 80))
        for bad in ["9090", ":9090", "host:port", "::1:99999", "[::1:80"] {
            #expect(throws: ServiceError.self) { try HTTPEndpoint.parse(bad) }
        }
    }
}
