import Testing
import ZeroMQ

@Suite("Errors")
struct ErrorTests {
    struct BadEndpoint: Sendable, CustomTestStringConvertible {
        let endpoint: String
        let bind: Bool
        let code: ZeroMQError.Code
        var testDescription: String { "\(bind ? "bind" : "connect") \(endpoint)" }
    }

    static let badEndpoints: [BadEndpoint] = [
        .init(endpoint: "bogus://127.0.0.1:1", bind: true, code: .protocolNotSupported),
        .init(endpoint: "bogus://127.0.0.1:1", bind: false, code: .protocolNotSupported),
        .init(endpoint: "tcp://", bind: true, code: .invalidArgument),
        .init(endpoint: "tcp://127.0.0.1", bind: false, code: .invalidArgument),
        .init(endpoint: "no-scheme-at-all", bind: true, code: .invalidArgument),
        .init(endpoint: "tcp://127.0.0.1:notaport", bind: true, code: .invalidArgument),
        .init(endpoint: "ipc:///nonexistent-dir-navigator/x.sock", bind: true, code: .notFound),
    ]

    @Test("a bad endpoint throws the right code, the call's name and libzmq's message", arguments: badEndpoints)
    func badEndpoint(_ case: BadEndpoint) async throws {
        let error = try await onThread { () throws -> ZeroMQError? in
            let socket = try Socket(try Context(), type: .pull)
            do {
                if `case`.bind { try socket.bind(`case`.endpoint) } else { try socket.connect(`case`.endpoint) }
                return nil
            } catch let error as ZeroMQError {
                return error
            }
        }
        let thrown = try #require(error as ZeroMQError?)
        #expect(thrown.code == `case`.code)
        #expect(thrown.function == (`case`.bind ? "zmq_bind" : "zmq_connect"))
        #expect(thrown.message == `case`.code.description)
        #expect(!thrown.message.isEmpty)
        #expect(thrown.detail == `case`.endpoint)
        #expect(thrown.description.contains(`case`.endpoint))
    }

    @Test("binding a port twice says address in use")
    func addressInUse() async throws {
        let error = try await onThread { () throws -> ZeroMQError? in
            let context = try Context()
            let first = try Socket(context, type: .pull)
            try first.bind("tcp://127.0.0.1:*")
            let second = try Socket(context, type: .pull)
            do { try second.bind(try first.lastEndpoint) } catch let error as ZeroMQError { return error }
            return nil
        }
        #expect(error?.code == .addressInUse)
        #expect(error?.function == "zmq_bind")
    }

    @Test("receive timeout and empty non-blocking receive")
    func timeouts() async throws {
        let (timedOut, empty) = try await onThread { () throws -> (ZeroMQError?, Bool) in
            let pull = try Socket(try Context(), type: .pull)
            try pull.bind("inproc://silence")
            let empty = try pull.tryReceiveMultipart() == nil
            try pull.set(.receiveTimeout, .milliseconds(20))
            do { _ = try pull.receive() } catch let error as ZeroMQError { return (error, empty) }
            return (nil, empty)
        }
        #expect(empty)
        #expect(timedOut?.code == .wouldBlock)
    }

    @Test("ROUTER_MANDATORY reports an unknown peer instead of dropping")
    func routerMandatory() async throws {
        let error = try await onThread { () throws -> ZeroMQError? in
            let router = try Socket(try Context(), type: .router)
            try router.set(.routerMandatory, true)
            try router.bind("inproc://mandatory")
            do { try router.send(multipart: ["nobody", "", "x"]) } catch let error as ZeroMQError { return error }
            return nil
        }
        #expect(error?.code == .hostUnreachable)
        #expect(error?.function == "zmq_send")
    }

    @Test("an invalid option value names the option")
    func invalidOption() async throws {
        let error = try await onThread { () throws -> ZeroMQError? in
            let socket = try Socket(try Context(), type: .dealer)
            do { try socket.set(.curveServerKey, "too short") } catch let error as ZeroMQError { return error }
            return nil
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.function == "zmq_setsockopt")
        #expect(error?.detail == "ZMQ_CURVE_SERVERKEY")
    }
}
