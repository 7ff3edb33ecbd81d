import Testing
import ZeroMQ

/// Each socket pattern delivers whole multipart messages over inproc, ipc and tcp on 127.0.0.1.
@Suite("Socket patterns")
struct PatternTests {
    @Test("PUSH -> PULL", arguments: Transport.allCases)
    func pushPull(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let received = try await onThread {
            let context = try Context()
            let pull = try Socket(context, type: .pull).bounded()
            try pull.bind(place.endpoint)
            let push = try Socket(context, type: .push).bounded()
            try push.connect(try pull.lastEndpoint)
            try push.send(multipart: ["s1", [0x01, 0x02, 0x00, 0xFF] as [UInt8], ""])
            return try pull.receiveMultipart().map(\.bytes)
        }
        #expect(received == [Array("s1".utf8), [0x01, 0x02, 0x00, 0xFF], []])
    }

    @Test("PUB -> SUB", arguments: Transport.allCases)
    func pubSub(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let received = try await onThread {
            let context = try Context()
            let pub = try Socket(context, type: .pub).bounded()
            try pub.bind(place.endpoint)
            let sub = try Socket(context, type: .sub).bounded()
            try sub.subscribe("s/1/")
            try sub.connect(try pub.lastEndpoint)
            // A subscription reaches the publisher asynchronously: publish until one arrives.
            return try eventually("the subscription to reach the publisher") { () throws -> [String]? in
                try pub.send(multipart: ["s/1/", "header", "body"])
                return try sub.tryReceiveMultipart()?.map(\.string)
            }
        }
        #expect(received == ["s/1/", "header", "body"])
    }

    @Test("XPUB -> SUB sees the subscription, then delivers", arguments: Transport.allCases)
    func xpubSub(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let (subscription, received) = try await onThread {
            let context = try Context()
            let xpub = try Socket(context, type: .xpub).bounded()
            try xpub.bind(place.endpoint)
            let sub = try Socket(context, type: .sub).bounded()
            try sub.subscribe("s/7/")
            try sub.connect(try xpub.lastEndpoint)
            let subscription = try xpub.receive().bytes  // 0x01 + topic
            try xpub.send(multipart: ["s/7/", "h", "b"])
            return (subscription, try sub.receiveStrings())
        }
        #expect(subscription == [0x01] + Array("s/7/".utf8))
        #expect(received == ["s/7/", "h", "b"])
    }

    @Test("XPUB -> XSUB with a subscription sent as a message", arguments: Transport.allCases)
    func xpubXsub(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let received = try await onThread {
            let context = try Context()
            let xpub = try Socket(context, type: .xpub).bounded()
            try xpub.bind(place.endpoint)
            let xsub = try Socket(context, type: .xsub).bounded()
            try xsub.connect(try xpub.lastEndpoint)
            try xsub.send([0x01] + Array("a/".utf8))
            _ = try xpub.receive()
            try xpub.send(multipart: ["a/x/", "payload"])
            return try xsub.receiveStrings()
        }
        #expect(received == ["a/x/", "payload"])
    }

    @Test("DEALER <-> ROUTER request and reply", arguments: Transport.allCases)
    func dealerRouter(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let (atRouter, atDealer) = try await onThread {
            let context = try Context()
            let router = try Socket(context, type: .router).bounded()
            try router.set(.routerMandatory, true)
            try router.bind(place.endpoint)
            let dealer = try Socket(context, type: .dealer).bounded()
            try dealer.set(.routingID, Array("client-1".utf8))
            try dealer.connect(try router.lastEndpoint)
            try dealer.send(multipart: ["", "ping"])
            let request = try router.receiveMultipart()
            try router.send(multipart: [request[0], "", "pong"])
            return (request.map(\.string), try dealer.receiveStrings())
        }
        #expect(atRouter == ["client-1", "", "ping"])
        #expect(atDealer == ["", "pong"])
    }

    @Test("REQ <-> REP", arguments: Transport.allCases)
    func reqRep(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let reply = try await onThread {
            let context = try Context()
            let rep = try Socket(context, type: .rep).bounded()
            try rep.bind(place.endpoint)
            let req = try Socket(context, type: .req).bounded()
            try req.connect(try rep.lastEndpoint)
            try req.send("question")
            let question = try rep.receive().string
            try rep.send("answer to \(question)")
            return try req.receive().string
        }
        #expect(reply == "answer to question")
    }

    @Test("PAIR <-> PAIR both ways", arguments: Transport.allCases)
    func pair(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let (left, right) = try await onThread {
            let context = try Context()
            let a = try Socket(context, type: .pair).bounded()
            try a.bind(place.endpoint)
            let b = try Socket(context, type: .pair).bounded()
            try b.connect(try a.lastEndpoint)
            try a.send(multipart: ["from", "a"])
            try b.send(multipart: ["from", "b"])
            return (try a.receiveStrings(), try b.receiveStrings())
        }
        #expect(left == ["from", "b"])
        #expect(right == ["from", "a"])
    }

    @Test("a message is forwarded without copying and the frames are reusable")
    func forwardAndReuse() async throws {
        let received = try await onThread {
            let context = try Context()
            let front = try Socket(context, type: .pull).bounded()
            try front.bind("inproc://front")
            let back = try Socket(context, type: .pull).bounded()
            try back.bind("inproc://back")
            let producer = try Socket(context, type: .push).bounded()
            try producer.connect("inproc://front")
            let relay = try Socket(context, type: .push).bounded()
            try relay.connect("inproc://back")

            var frames: [Message] = []
            var results: [[String]] = []
            for round in 0..<3 {
                try producer.send(multipart: ["round", "\(round)", String(repeating: "x", count: 100 * round)])
                let count = try #require(try front.receiveMultipart(into: &frames))
                for index in 0..<count {
                    try relay.send(frames[index], more: index < count - 1)
                }
                results.append(try back.receiveStrings().map { String($0.prefix(8)) })
            }
            return (results, frames.count)
        }
        #expect(received.0 == [["round", "0", ""], ["round", "1", "xxxxxxxx"], ["round", "2", "xxxxxxxx"]])
        #expect(received.1 == 3)
    }

    @Test("a sent message is refilled, by copy or by move, and sends its new content alone")
    func refill() async throws {
        let received = try await onThread {
            let context = try Context()
            let pull = try Socket(context, type: .pull).bounded()
            try pull.bind("inproc://refill")
            let push = try Socket(context, type: .push).bounded()
            try push.connect("inproc://refill")
            // Small (held in the struct) and large (allocated by libzmq) contents, in turn.
            let frame = try Message(copying: String(repeating: "a", count: 100))
            try push.send(frame)
            #expect(frame.count == 0, "libzmq empties a message it sends")
            var rounds: [[UInt8]] = [try pull.receiveMultipart().map(\.bytes)[0]]
            for content in ["b", String(repeating: "c", count: 200), ""] {
                try frame.refill(copying: content)
                #expect(frame.count == content.utf8.count)
                try push.send(frame)
                rounds.append(try pull.receiveMultipart().map(\.bytes)[0])
            }
            // Refilled while it still holds something: what it held is released, not sent.
            try frame.refill(copying: "unsent")
            let other = try Message(copying: String(repeating: "d", count: 300))
            frame.refill(moving: other)
            #expect(other.count == 0, "the source of a move is left empty")
            try push.send(frame)
            rounds.append(try pull.receiveMultipart().map(\.bytes)[0])
            return rounds
        }
        #expect(
            received == [
                Array(repeating: UInt8(ascii: "a"), count: 100), Array("b".utf8),
                Array(repeating: UInt8(ascii: "c"), count: 200), [],
                Array(repeating: UInt8(ascii: "d"), count: 300),
            ])
    }
}

@Suite("Receive buffers")
struct ReceiveBufferTests {
    @Test("a message of 100,000 frames is counted, but at most maxFrames + 1 messages are kept")
    func boundedFrames() async throws {
        let (count, kept, next) = try await onThread { () throws -> (Int, Int, [String]) in
            let context = try Context()
            let pull = try Socket(context, type: .pull).bounded()
            try pull.bind("inproc://frames")
            let push = try Socket(context, type: .push).bounded()
            try push.connect("inproc://frames")
            try push.send(multipart: Array(repeating: [UInt8](), count: 100_000))
            try push.send(multipart: ["a", "b"])
            var frames: [Message] = []
            let count = try pull.receiveMultipart(into: &frames, maxFrames: 2)!
            let kept = frames.count
            let second = try pull.receiveMultipart(into: &frames, maxFrames: 2)!
            return (count, kept, frames.prefix(second).map(\.string))
        }
        #expect(count == 100_000)
        #expect(kept == 3)
        #expect(next == ["a", "b"])
    }
}
