import Testing
import ZeroMQ

@Suite("CURVE", .enabled(if: CurveKeyPair.isSupported, "libzmq without CURVE support"))
struct CurveTests {
    @Test("key pairs are Z85 and the public key derives from the secret")
    func keys() throws {
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.utf8.count == 40)
        #expect(pair.secretKey.utf8.count == 40)
        #expect(try CurveKeyPair.publicKey(forSecretKey: pair.secretKey) == pair.publicKey)
        #expect(try CurveKeyPair.generate() != pair)
    }

    /// A client holding the server's public key gets through; one holding another key fails the
    /// handshake (seen on the server's monitor) and nothing it sent is delivered.
    @Test("a client with the server's key connects, one with a wrong key does not")
    func handshake() async throws {
        let (good, failure, leaked) = try await onThread {
            let context = try Context()
            let serverKeys = try CurveKeyPair.generate()
            let server = try Socket(context, type: .router).bounded()
            try server.makeCurveServer(serverKeys)
            try server.monitor("inproc://curve-monitor", events: [.handshakeSucceeded, .handshakeFailed])
            let monitor = try Socket(context, type: .pair).bounded()
            try monitor.connect("inproc://curve-monitor")
            try server.bind("tcp://127.0.0.1:*")
            let endpoint = try server.lastEndpoint

            let trusted = try Socket(context, type: .dealer).bounded()
            try trusted.makeCurveClient(try CurveKeyPair.generate(), serverKey: serverKeys.publicKey)
            try trusted.connect(endpoint)
            try trusted.send(multipart: ["", "hello from trusted"])
            let good = try server.receiveMultipart()[2].string
            #expect(try monitor.receiveMonitorEvent().event == .handshakeSucceeded)

            let impostor = try Socket(context, type: .dealer).bounded()
            try impostor.makeCurveClient(try CurveKeyPair.generate(), serverKey: try CurveKeyPair.generate().publicKey)
            try impostor.connect(endpoint)
            _ = try impostor.trySend(multipart: ["", "hello from impostor"])
            let failure = try monitor.receiveMonitorEvent()
            let leaked = try server.tryReceiveMultipart()?.map(\.string)
            return (good, failure, leaked)
        }
        #expect(good == "hello from trusted")
        #expect(!failure.event.intersection(.handshakeFailed).isEmpty, "got \(failure.event)")
        #expect(leaked == nil)
    }
}
