import Testing
import ZeroMQ

@Suite("Topic filtering")
struct FilteringTests {
    /// A terminated topic frame makes a prefix subscription exact: "s/42/" must not see "s/421/".
    @Test("SUB to s/42/ receives s/42/ and never s/421/", arguments: Transport.allCases)
    func terminatedTopic(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let topics = try await onThread {
            let context = try Context()
            let xpub = try Socket(context, type: .xpub).bounded()
            try xpub.bind(place.endpoint)
            let sub = try Socket(context, type: .sub).bounded()
            try sub.subscribe("s/42/")
            try sub.connect(try xpub.lastEndpoint)
            _ = try xpub.receive()  // the subscription has arrived: filtering is now in force

            for topic in ["s/421/", "s/42/", "s/4/", "s/42x/", "s/42/", "t/42/"] {
                try xpub.send(multipart: [topic, "header", "payload of \(topic)"])
            }
            try xpub.send(multipart: ["s/42/", "header", "end"])
            var seen: [String] = []
            while true {
                let frames = try sub.receiveStrings()
                if frames[2] == "end" { break }
                seen.append(frames[0])
            }
            return seen
        }
        #expect(topics == ["s/42/", "s/42/"])
    }

    @Test("unsubscribe stops delivery; a prefix subscription covers every session")
    func unsubscribeAndPrefix() async throws {
        let result = try await onThread {
            let context = try Context()
            let xpub = try Socket(context, type: .xpub).bounded()
            try xpub.set(.xpubVerbose, true)
            try xpub.bind("inproc://filters")
            let sub = try Socket(context, type: .sub).bounded()
            try sub.connect("inproc://filters")
            try sub.subscribe("s/")
            try sub.subscribe("r/")
            _ = try xpub.receive()
            _ = try xpub.receive()
            try sub.unsubscribe("r/")
            let unsubscription = try xpub.receive().bytes
            try xpub.send(multipart: ["r/1/", "h", "x"])
            try xpub.send(multipart: ["s/1/", "h", "x"])
            try xpub.send(multipart: ["s/2/", "h", "x"])
            return (unsubscription, try sub.receiveStrings()[0], try sub.receiveStrings()[0])
        }
        #expect(result.0 == [0x00] + Array("r/".utf8))
        #expect(result.1 == "s/1/")
        #expect(result.2 == "s/2/")
    }
}
