import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Connection: one peer of a bound socket")
struct ConnectionTests {
    @Test(
        "a message's descriptor is open while its peer is connected, and not after a drop",
        arguments: [Transport.ipc, .tcp])
    func openUntilDropped(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let (before, after, stranger) = try await onThread {
            let context = try Context()
            defer { context.shutdown() }
            let pull = try Socket(context, type: .pull).bounded()
            try pull.set(.linger, .zero)
            try pull.bind(place.endpoint)
            let push = try Socket(context, type: .push).bounded()
            try push.set(.linger, .zero)
            try push.connect(try pull.lastEndpoint)
            try push.send(multipart: ["hello"])
            let message = try pull.receive()
            guard let descriptor = message.sourceDescriptor else { throw TestFailure("no descriptor") }
            let before = Connection.isOpen(descriptor: descriptor)
            let socketBefore = Self.inode(descriptor)
            Connection.drop(descriptor: descriptor)
            // libzmq sees end-of-file and closes the descriptor (or it stays shut down). Another
            // test may be given the number at once: a connection of another socket there is
            // not this one.
            let after = try eventually("the dropped connection to look closed") {
                Connection.isOpen(descriptor: descriptor) && Self.inode(descriptor) == socketBefore ? nil : true
            }
            var pipeEnds: [Int32] = [0, 0]
            _ = pipe(&pipeEnds)
            defer {
                close(pipeEnds[0])
                close(pipeEnds[1])
            }
            return (before, !after, Connection.isOpen(descriptor: pipeEnds[0]) || Connection.isOpen(descriptor: -1))
        }
        #expect(before)
        #expect(!after)
        #expect(!stranger, "a pipe or a bad descriptor is no connection")
    }

    /// The inode of what `descriptor` is open on (nil when it is not open): which socket it is.
    static func inode(_ descriptor: Int32) -> UInt? {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? UInt(status.st_ino) : nil
    }

    @Test("a drop leaves alone a descriptor that is no connection: a listening socket still accepts")
    func listenerLeftAlone() async throws {
        let (dropped, accepted) = try await onThread { () throws -> (Bool, Bool) in
            // What a dropped peer's descriptor number may belong to by the time it is dropped.
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard listener >= 0 else { throw TestFailure("socket: \(errno)") }
            defer { close(listener) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, length) == 0 && listen(listener, 4) == 0
                        && getsockname(listener, $0, &length) == 0
                }
            }
            guard bound else { throw TestFailure("bind/listen: \(errno)") }
            let dropped = Connection.drop(descriptor: listener)
            // A client connects: the listener, not shut down, accepts it.
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(client) }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
            }
            let peer = connected ? accept(listener, nil, nil) : -1
            if peer >= 0 { close(peer) }
            return (dropped, peer >= 0)
        }
        #expect(!dropped, "a listening socket was shut down")
        #expect(accepted, "the listener no longer accepts")
    }
}
