import Synchronization
import Testing
import ZeroMQ

@Suite("A socket shared under a lock")
struct SharedSocketTests {
    /// Two threads publish onto one XPUB under its lock while a third waits on its descriptor and
    /// reads the subscriptions: every message of each publisher arrives, in its own order, and
    /// every subscription is read although the publishers' sends also process the XPUB's commands.
    @Test("publishers on two threads and a reader of subscriptions share one XPUB", arguments: Transport.allCases)
    func publishersAndReader(transport: Transport) async throws {
        let place = try BindPoint(transport)
        defer { place.remove() }
        let context = try Context()
        let xpub = try SharedSocket(context, type: .xpub)
        let endpoint = try xpub.withSocket { socket in
            try socket.set(.xpubVerboser, true)
            try socket.set(.sendHighWaterMark, 0)  // the subscribers read only once all is sent
            try socket.bind(place.endpoint)
            return try socket.lastEndpoint
        }!
        let perPublisher = 2_000
        let subscribers = 8
        // The reader: polls the descriptor outside the lock, reads under it, until it has seen
        // every subscriber's subscription.
        let reader = Task.detached {
            try await onThread("shared-reader") { () throws -> Int in
                var poller = Poller()
                poller.add(fileDescriptor: xpub.fileDescriptor)
                var seen = 0
                let end = ContinuousClock.now + deadline
                while seen < subscribers, ContinuousClock.now < end {
                    try poller.poll(timeout: .milliseconds(100))
                    seen +=
                        try xpub.withSocket { socket in
                            var frames: [Message] = []
                            var count = 0
                            while try socket.receiveMultipart(into: &frames, wait: false, maxFrames: 1) != nil {
                                if frames[0].withUnsafeBytes({ $0.first == 1 }) { count += 1 }
                            }
                            return count
                        } ?? 0
                }
                return seen
            }
        }
        let received = try await onThread("shared-subscribers") { () throws -> [[String]] in
            let subs = try (0..<subscribers).map { index in
                let sub = try Socket(context, type: .sub).bounded()
                try sub.set(.receiveHighWaterMark, 0)
                try sub.subscribe(index % 2 == 0 ? "a/" : "b/")
                try sub.connect(endpoint)
                return sub
            }
            // Publish until the first message gets through to each subscriber (its subscription
            // is in force), then the counted run.
            for sub in subs {
                var poller = Poller()
                poller.add(sub)
                while try poller.poll(timeout: .milliseconds(10)) == 0 {
                    _ = try xpub.send(
                        [
                            try Message(copying: "a/"), try Message(copying: "probe"), try Message(copying: "b/"),
                            try Message(copying: "probe"),
                        ], framesPerMessage: 2)
                }
                var frames: [Message] = []
                while try sub.receiveMultipart(into: &frames, wait: false) != nil {}
            }
            let publishers = ["a/", "b/"].map { topic in
                DedicatedThread(name: "publisher-\(topic)") {
                    for number in 0..<perPublisher {
                        _ = try? xpub.send(
                            [try! Message(copying: topic), try! Message(copying: "\(number)")], framesPerMessage: 2)
                    }
                }
            }
            for publisher in publishers { publisher.join() }
            return try subs.map { sub in
                var numbers: [String] = []
                while numbers.count < perPublisher {
                    let frames = try sub.receiveStrings()
                    if frames[1] != "probe" { numbers.append(frames[1]) }
                }
                return numbers
            }
        }
        let subscriptionsRead = try await reader.value
        xpub.close()
        try context.terminate()
        #expect(subscriptionsRead == subscribers)
        for numbers in received { #expect(numbers == (0..<perPublisher).map(String.init)) }
    }

    @Test("a closed shared socket is not used: sends do nothing, withSocket returns nil")
    func closed() throws {
        let context = try Context()
        let push = try SharedSocket(context, type: .push)
        push.close()
        #expect(push.withSocket { _ in 1 } == nil)
        #expect(try push.send([try Message(copying: "x")], framesPerMessage: 1) == nil)
        push.close()
        try context.terminate()
    }
}
