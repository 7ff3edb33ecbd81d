import Logging
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 server for scrapers and health checks, on a thread of its own:
/// `GET /metrics` (Prometheus text), `GET /healthz` (the process serves), `GET /readyz` (the
/// service takes work). One request per connection; anything else gets 404 or 405.
final class MetricsServer: Sendable {
    struct Response {
        var status: String
        var contentType: String
        var body: [UInt8]
    }

    let address: String
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let respond: @Sendable (String) -> Response
    private let logger: Logger
    private let port: Int

    /// Listens on `host:port` (an IPv4 address or `localhost`; port 0 picks one).
    init(address: String, logger: Logger, respond: @escaping @Sendable (String) -> Response) throws {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let requestedPort = UInt16(parts[1]) else {
            throw ServiceError("metrics address \(address) is not host:port")
        }
        let host = parts[0] == "localhost" ? "127.0.0.1" : String(parts[0])
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = requestedPort.bigEndian
        guard inet_pton(AF_INET, host, &socketAddress.sin_addr) == 1 else {
            throw ServiceError("metrics host \(host) is not an IPv4 address (or localhost)")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServiceError("cannot open the metrics socket: \(Self.lastError())") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let reason = Self.lastError()
            close(fd)
            throw ServiceError("cannot listen for metrics on \(address): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            close(fd)
            throw ServiceError("cannot create the metrics wake pipe: \(Self.lastError())")
        }
        listener = fd
        wake = (pipeEnds[0], pipeEnds[1])
        port = Int(UInt16(bigEndian: actual.sin_port))
        self.address = "\(host):\(port)"
        self.respond = respond
        self.logger = logger
    }

    /// Serves until ``stop()``.
    func start() -> DedicatedThread {
        DedicatedThread(name: "nav-metrics") { [self] in serve() }
    }

    func stop() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private func serve() {
        defer {
            close(listener)
            close(wake.read)
            close(wake.write)
        }
        var fds = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                logger.error("metrics server poll failed: \(Self.lastError())")
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            handle(client)
            close(client)
        }
    }

    private func handle(_ client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // Read the request head (up to 16 KiB); the body, if any, is not needed.
        while request.count < 16 * 1024, !request.containsHeadEnd {
            let count = read(client, &buffer, buffer.count)
            guard count > 0 else { break }
            request += buffer[0..<count]
        }
        let line = String(
            decoding: request.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let words = line.split(separator: " ")
        let response: Response
        if words.count < 2 {
            response = Response(
                status: "400 Bad Request", contentType: "text/plain",
                body: Array("expected an HTTP request line\n".utf8))
        } else if words[0] != "GET" && words[0] != "HEAD" {
            response = Response(
                status: "405 Method Not Allowed", contentType: "text/plain", body: Array("only GET is served\n".utf8))
        } else {
            let path = String(words[1].prefix { $0 != "?" })
            response = respond(path)
        }
        var head = "HTTP/1.1 \(response.status)\r\nContent-Type: \(response.contentType)\r\n"
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        if words.first != "HEAD" { bytes += response.body }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            sent += count
        }
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}

extension [UInt8] {
    fileprivate var containsHeadEnd: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4)
        where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return true
        }
        return false
    }
}
