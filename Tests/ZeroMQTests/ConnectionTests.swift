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
            Connection.drop(descriptor: descriptor)
            // libzmq sees end-of-file and closes the descriptor (or it stays shut down).
            let after = try eventually("the dropped connection to look closed") {
                Connection.isOpen(descriptor: descriptor) ? nil : true
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
}
