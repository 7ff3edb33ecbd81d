import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP exchange over a plain socket (the connection closed after it): returns the status
/// line and the body.
public func http(_ address: String, _ request: String) throws -> (status: String, body: String) {
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

/// A TCP connection to `address` (IPv4 host:port), as a file descriptor the caller closes;
/// `receiveBuffer` sets its receive buffer's size first (a client that takes little at a time).
public func tcpConnect(_ address: String, receiveBuffer: Int32? = nil) throws -> Int32 {
    let parts = address.split(separator: ":")
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = UInt16(parts[1])!.bigEndian
    inet_pton(AF_INET, String(parts[0]), &target.sin_addr)
    // Close-on-exec: a child another test spawns must not keep this connection open.
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    if var size = receiveBuffer {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
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
