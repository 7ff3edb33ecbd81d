import Testing
import ZeroMQ

@Suite("Options and polling")
struct OptionTests {
    @Test("typed options round-trip")
    func roundTrip() async throws {
        let values = try await onThread {
            let socket = try Socket(try Context(), type: .dealer)
            try socket.set(.sendHighWaterMark, 123)
            try socket.set(.receiveHighWaterMark, 456)
            try socket.set(.linger, .milliseconds(250))
            try socket.set(.receiveTimeout, nil)
            try socket.set(.sendTimeout, .seconds(2))
            try socket.set(.maxMessageSize, 65_536)
            try socket.set(.immediate, true)
            try socket.set(.heartbeatInterval, .milliseconds(500))
            try socket.set(.heartbeatTimeout, .seconds(2))
            try socket.set(.heartbeatTTL, .seconds(3))
            try socket.set(.routingID, Array("shell-7".utf8))
            try socket.set(.zapDomain, "navigator")
            return [
                "\(try socket.get(.sendHighWaterMark))", "\(try socket.get(.receiveHighWaterMark))",
                "\(try socket.get(.linger).map { "\($0)" } ?? "infinite")",
                "\(try socket.get(.receiveTimeout).map { "\($0)" } ?? "infinite")",
                "\(try socket.get(.sendTimeout).map { "\($0)" } ?? "infinite")",
                "\(try socket.get(.maxMessageSize))", "\(try socket.get(.immediate))",
                "\(try socket.get(.heartbeatInterval))", "\(try socket.get(.heartbeatTimeout))",
                "\(try socket.get(.heartbeatTTL))",
                String(decoding: try socket.get(.routingID), as: UTF8.self), try socket.get(.zapDomain),
            ]
        }
        #expect(
            values == [
                "123", "456", "0.25 seconds", "infinite", "2.0 seconds", "65536", "true",
                "0.5 seconds", "2.0 seconds", "3.0 seconds", "shell-7", "navigator",
            ])
    }

    @Test("a new socket lingers 500 ms (never zero: libzmq 4.3.4 can abort on a multipart close with linger 0)")
    func defaultLinger() async throws {
        let linger = try await onThread { try Socket(try Context(), type: .push).get(.linger) }
        #expect(linger == .milliseconds(500))
    }

    @Test("MAXMSGSIZE disconnects a peer that sends more, smaller messages pass")
    func maxMessageSize() async throws {
        let received = try await onThread {
            let context = try Context()
            let pull = try Socket(context, type: .pull).bounded()
            try pull.set(.maxMessageSize, 100)
            try pull.bind("tcp://127.0.0.1:*")
            let endpoint = try pull.lastEndpoint
            let big = try Socket(context, type: .push)
            try big.connect(endpoint)
            try big.send([UInt8](repeating: 1, count: 1000))
            let small = try Socket(context, type: .push)
            try small.connect(endpoint)
            try small.send("small")
            return try pull.receive().string
        }
        #expect(received == "small")
    }

    @Test("the poller reports which socket is ready, and times out when none is")
    func poller() async throws {
        let (idle, ready, first, second) = try await onThread {
            let context = try Context()
            let a = try Socket(context, type: .pull)
            try a.bind("inproc://poll-a")
            let b = try Socket(context, type: .pull)
            try b.bind("inproc://poll-b")
            let push = try Socket(context, type: .push)
            try push.connect("inproc://poll-b")
            var poller = Poller()
            poller.add(a)
            poller.add(b)
            let idle = try poller.poll(timeout: .zero)
            try push.send("x")
            let ready = try poller.poll(timeout: deadline)
            return (idle, ready, poller.events(at: 0), poller.events(at: 1))
        }
        #expect(idle == 0)
        #expect(ready == 1)
        #expect(first == [])
        #expect(second == .readable)
    }
}
