import Logging
import ZeroMQ

/// Owns the XPUB that shells subscribe to: forwards what workers and ingress publish, without
/// copying, and follows subscriptions for the stats.
struct EgressLoop: SocketLoop {
    let context: Context
    let endpoints: [String]
    let highWaterMark: Int32
    /// Messages (bundles) queued from the workers and ingress; beyond it they wait.
    let handoffHighWaterMark: Int32
    /// Stop markers to wait for: every worker's and ingress's.
    let producers: Int
    let counters: ServiceCounters
    let bound: BoundEndpoints
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-egress" }

    struct Sockets {
        let xpub: Socket
        let inbox: Socket
    }

    func open() throws -> Sockets {
        let xpub = try Socket(context, type: .xpub)
        try xpub.set(.sendHighWaterMark, highWaterMark)
        // Subscriptions are messages from the peers: a longer one than any topic makes libzmq
        // drop that peer, instead of storing a topic of the peer's choosing.
        try xpub.set(.maxMessageSize, Int64(Self.maxSubscriptionBytes))
        try xpub.set(.linger, .milliseconds(500))
        bound.set(commands: try bindAll(xpub, endpoints, "commands"))
        let inbox = try Socket(context, type: .pull)
        try inbox.set(.receiveHighWaterMark, handoffHighWaterMark)
        try inbox.bind(Internal.egress)
        return Sockets(xpub: xpub, inbox: inbox)
    }

    /// The longest subscription message a peer may send: the flag byte and the longest topic
    /// (`s/` + a 128-byte session id + `/`), with room to spare.
    static let maxSubscriptionBytes = 256

    /// Whether a subscription to `topic` receives audit records (`a/<session>/`).
    static func receivesAudit(topic: some Collection<UInt8>) -> Bool {
        let prefix = Array("a/".utf8)
        return topic.count <= prefix.count ? prefix.starts(with: topic) : topic.starts(with: prefix)
    }

    func run(_ sockets: Sockets) throws {
        var poller = Poller()
        poller.add(sockets.inbox)
        poller.add(sockets.xpub)
        var frames: [Message] = []
        var stops = 0
        do {
            while stops < producers {
                try poller.poll(timeout: nil)
                try supervisor.checkInjected(name)
                if poller.events(at: 1).contains(.readable) {
                    while let count = try sockets.xpub.receiveMultipart(into: &frames, wait: false, maxFrames: 1) {
                        guard count == 1, let first = frames[0].withUnsafeBytes({ $0.first }) else { continue }
                        let audit = frames[0].withUnsafeBytes { Self.receivesAudit(topic: $0.dropFirst()) }
                        if first == 1 {
                            counters.subscribedTopics.add()
                            if audit { counters.auditTopics.add() }
                        } else if first == 0 {
                            counters.subscribedTopics.subtract()
                            if audit { counters.auditTopics.subtract() }
                        }
                    }
                }
                guard poller.events(at: 0).contains(.readable) else { continue }
                // Drain what is queued, then look at subscriptions again.
                for _ in 0..<4096 {
                    guard let count = try sockets.inbox.receiveMultipart(into: &frames, wait: false) else { break }
                    if count == 1 {
                        stops += 1
                        continue
                    }
                    // A bundle of [topic][header][payload] triples (see Publisher).
                    guard count % 3 == 0 else {
                        counters.unexpectedInternal.add()
                        logger.error("egress got a bundle of \(count) frames; expected triples", metadata: [:])
                        continue
                    }
                    for index in 0..<count { try sockets.xpub.send(frames[index], more: index % 3 != 2) }
                }
            }
            logger.debug("egress stopped", metadata: ["producers": "\(producers)"])
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("egress ended by context shutdown")
        }
    }
}
