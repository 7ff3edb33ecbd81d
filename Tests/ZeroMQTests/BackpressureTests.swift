import Testing
import ZeroMQ

@Suite("Backpressure")
struct BackpressureTests {
    /// PUSH never drops: at its high-water mark a non-blocking send says "would block" and sends
    /// nothing; once the receiver drains, sending works again and nothing was lost.
    @Test("PUSH at its high-water mark reports would-block and loses nothing", arguments: [Transport.inproc, .tcp])
    func pushWouldBlock(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let (accepted, received, resumed) = try await onThread {
            let context = try Context()
            let pull = try Socket(context, type: .pull).bounded()
            try pull.set(.receiveHighWaterMark, 2)
            try pull.bind(place.endpoint)
            let push = try Socket(context, type: .push).bounded()
            try push.set(.sendHighWaterMark, 2)
            try push.connect(try pull.lastEndpoint)
            // Make sure the connection exists, so a would-block means "full", not "no peer".
            try push.send("hello")
            _ = try pull.receive()

            let payload = [UInt8](repeating: 7, count: 64 * 1024)
            var accepted = 0
            while try push.trySend(payload) {
                accepted += 1
                if accepted > 100_000 { throw TestFailure("PUSH never reached its high-water mark") }
            }
            var received = 0
            while received < accepted {
                _ = try pull.receive()
                received += 1
            }
            let resumed = try eventually("room after draining") { try push.trySend(payload) ? true : nil }
            return (accepted, received, resumed)
        }
        #expect(accepted > 0)
        #expect(received == accepted)
        #expect(resumed)
    }

    /// PUB never blocks: a subscriber that does not read loses messages beyond the marks.
    @Test("PUB drops for a slow subscriber instead of blocking")
    func pubDrops() async throws {
        let (sent, received) = try await onThread {
            let context = try Context()
            let pub = try Socket(context, type: .pub).bounded()
            try pub.set(.sendHighWaterMark, 10)
            try pub.bind("inproc://drops")
            let sub = try Socket(context, type: .sub).bounded()
            try sub.set(.receiveHighWaterMark, 10)
            try sub.subscribe("")
            try sub.connect("inproc://drops")
            _ = try eventually("the subscription") { () throws -> Bool? in
                try pub.send("probe")
                return try sub.tryReceiveMultipart() != nil ? true : nil
            }
            while try sub.tryReceiveMultipart() != nil {}

            var sent = 0
            for index in 0..<1000 {
                // Every send is accepted at once: PUB never reports would-block.
                guard try pub.trySend("m\(index)") else { throw TestFailure("PUB reported would-block") }
                sent += 1
            }
            var received = 0
            while try sub.tryReceiveMultipart() != nil { received += 1 }
            return (sent, received)
        }
        #expect(sent == 1000)
        #expect(received > 0)
        #expect(received < 1000)
    }
}
