import Logging
import NavigatorPort
import ZeroMQ

/// Binds the XPUB that shells subscribe to and reads its subscriptions (the workers publish onto
/// it themselves, under its lock: see ``Publisher``). Keeps the book of
/// subscriptions (``SubscriptionBook``): the topics for the stats and the audit switch, and each
/// connection's count, so that a peer holding more than `maxSubscriptionsPerPeer` topics is
/// dropped (its subscriptions go with it). In secure mode it applies each subscription the
/// client may hold (XPUB_MANUAL), and only while the connection it came from is there
/// (``ConnectionLedger``, fed by the XPUB's monitor). It closes the XPUB once every publisher
/// has stopped.
struct EgressLoop: SocketLoop {
    let context: Context
    let commands: SharedSocket
    let endpoints: [String]
    let highWaterMark: Int32
    /// Messages queued from the publishers (stop markers, word of waiting subscriptions).
    let handoffHighWaterMark: Int32
    /// Stop markers to wait for: every worker's.
    let producers: Int
    let maxSubscriptionsPerPeer: Int
    /// Secure mode: every subscription is checked against the access list (XPUB_MANUAL).
    let security: Security?
    let counters: EngineCounters
    let bound: BindingRecord
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-egress" }

    struct Sockets {
        let inbox: Socket
        /// The XPUB's monitor: connections accepted and ended, by descriptor.
        let connections: Socket
        let limiter: LogLimiter
    }

    static let monitorEndpoint = "inproc://navigator-egress-monitor"

    func open() throws -> Sockets {
        try commands.withSocket { xpub in try configure(xpub) }
        let connections = try Socket(context, type: .pair)
        try connections.connect(Self.monitorEndpoint)
        let inbox = try Socket(context, type: .pull)
        try inbox.set(.receiveHighWaterMark, handoffHighWaterMark)
        try inbox.bind(Internal.egress)
        return Sockets(inbox: inbox, connections: connections, limiter: LogLimiter(logger: logger))
    }

    /// The XPUB's options, its monitor, and its binds.
    private func configure(_ xpub: Socket) throws {
        try xpub.set(.sendHighWaterMark, highWaterMark)
        // Subscriptions are messages from the peers: a longer one than any topic makes libzmq
        // drop that peer, instead of storing a topic of the peer's choosing. (CURVE's handshake
        // needs more; in secure mode no topic takes effect before egress has checked it.)
        try xpub.set(.maxMessageSize, Int64(security == nil ? Self.maxSubscriptionBytes : 4096))
        try xpub.set(.linger, .milliseconds(500))
        // Every subscription and unsubscription, of each peer: the book counts them per peer.
        try xpub.set(.xpubVerboser, true)
        // Secure mode: a subscription takes effect only when egress applies it (``note``).
        if security != nil { try xpub.set(.xpubManual, true) }
        try xpub.monitor(Self.monitorEndpoint, events: [.accepted, .disconnected])
        bound.set(commands: try bindAll(xpub, endpoints, "commands", security: security))
    }

    /// Enters one (un)subscription message into the book; drops a peer beyond its limit. In
    /// secure mode, applies it first if its client may read the topic — at once, before the
    /// next receive, since XPUB_MANUAL applies a subscription to the peer of the last message
    /// received.
    private func note(
        _ message: Message, in book: inout SubscriptionBook, _ ledger: inout ConnectionLedger, _ xpub: Socket,
        _ sockets: Sockets
    ) throws {
        // ``readSubscriptions`` passes only messages whose first byte is 1 or 0.
        let (subscribes, topic) = message.withUnsafeBytes { ($0[0] == 1, Array($0.dropFirst())) }
        let peer = message.sourceDescriptor
        if subscribes {
            if let security {
                let name = Security.clientName(of: message)
                guard let client = security.client(named: name), let peer, topic.count < Self.maxSubscriptionBytes,
                    client.maySubscribe(to: String(decoding: topic, as: UTF8.self))
                else {
                    return forbid(topic, name: name, message, sockets)
                }
                // Applied only to a connection that is still there (``ConnectionLedger``).
                guard try isLive(message, peer, &book, &ledger, sockets) else { return }
                try xpub.set(.subscribe, topic)
                book.note(client: client.name, peer: peer)
            }
            guard case .overLimit(let holding) = book.subscribe(topic, peer: peer), let peer else { return }
            let address = message.property("Peer-Address") ?? "?"
            if sockets.limiter.allow(address) {
                logger.warning(
                    "a subscriber holds more topics than maxSubscriptionsPerPeer; its connection is dropped",
                    metadata: [
                        "peer": "\(LogText(address))", "topics": "\(holding)", "limit": "\(maxSubscriptionsPerPeer)",
                    ])
            }
            // Only while its connection is there: once it ended, its descriptor number can be
            // anything else's in the process (another socket's listener: shut down, its accept
            // fails with EINVAL and libzmq aborts — seen under ThreadSanitizer).
            try guardedDrop(peer, &book, &ledger, sockets)
        } else {
            if security != nil {
                // Those libzmq makes for a peer that went away carry no descriptor and apply to
                // no pipe; a peer's own, only while it is there (its pipe could have been freed,
                // and its address reused by another peer's).
                guard let peer, try isLive(message, peer, &book, &ledger, sockets) else { return }
                try xpub.set(.unsubscribe, topic)
            }
            book.unsubscribe(topic, peer: peer)
        }
    }

    /// Secure mode: a subscription the client may not hold; nothing is delivered to it.
    private func forbid(_ topic: [UInt8], name: String?, _ message: Message, _ sockets: Sockets) {
        counters.subscriptionsForbidden.add()
        let address = message.property("Peer-Address") ?? "?"
        guard sockets.limiter.allow("forbidden:\(name ?? address)") else { return }
        logger.notice(
            "subscription refused: the client may not read this topic",
            metadata: [
                "client": "\(LogText(name ?? "(none)"))", "peer": "\(LogText(address))",
                "topic": "\(LogText(String(decoding: topic.prefix(Self.maxSubscriptionBytes), as: UTF8.self)))",
            ])
    }

    /// Secure mode: whether the connection a message came in on is still there, after reading
    /// every connection event queued so far — and whether libzmq would apply a subscription to
    /// it at all. When the ledger cannot tell, the descriptor's current connection is dropped
    /// (it reconnects and subscribes again) and nothing is applied.
    private func isLive(
        _ message: Message, _ peer: Int32, _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger,
        _ sockets: Sockets
    ) throws -> Bool {
        try readConnections(sockets, &book, &ledger)
        guard !ledger.misaligned else {
            // A stray message was read since the queue was last empty: libzmq's "last pipe"
            // belongs to another message now (``strayMessage(_:_:_:_:)``). Nothing is applied;
            // the connection, if there, is dropped (counted there) and subscribes again.
            try dropConnection(of: message, peer, &book, &ledger, sockets)
            return false
        }
        guard let number = message.property(Security.connectionProperty).flatMap(UInt64.init) else {
            counters.unexpectedInternal.add()
            logger.warning(
                "a subscription without the connection number the ZAP handler gives; not applied, its connection dropped",
                metadata: ["peer": "\(LogText(message.property("Peer-Address") ?? "?"))"])
            if ledger.isOpen(peer) { try guardedDrop(peer, &book, &ledger, sockets) }
            return false
        }
        switch ledger.verdict(descriptor: peer, connection: number) {
        case .open:
            return true
        case .gone:
            counters.subscriptionsOfEndedConnections.add()
            return false
        case .unsure:
            counters.subscriptionsOfEndedConnections.add()
            logger.debug(
                "a subscription from a connection that may have ended: the descriptor's connection is dropped",
                metadata: ["descriptor": "\(peer)", "connection": "\(number)"])
            try guardedDrop(peer, &book, &ledger, sockets)
            return false
        }
    }

    /// Secure mode: a message on the commands socket that is not a subscription (empty, a first
    /// byte other than 0 or 1, or more than one frame). libzmq 4.3.4's XPUB queues such a
    /// message without the pipe it came from, so from then until its queue is read empty each
    /// receive takes the pipe of a *later* message: no subscription may be applied meanwhile
    /// (``ConnectionLedger/misaligned``). Its sender, which no SUB socket would be, is dropped.
    private func strayMessage(
        _ message: Message, _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger, _ sockets: Sockets
    ) throws {
        ledger.misaligned = true
        counters.subscriptionsForbidden.add()
        let address = message.property("Peer-Address") ?? "?"
        if sockets.limiter.allow("stray:\(address)") {
            logger.notice(
                "a message that is not a subscription on the commands socket; its connection is dropped",
                metadata: ["peer": "\(LogText(address))", "bytes": "\(message.count)"])
        }
        guard let peer = message.sourceDescriptor else { return }
        try readConnections(sockets, &book, &ledger)
        try dropConnection(of: message, peer, &book, &ledger, sockets)
    }

    /// Drops the connection `message` came in on, if the ledger does not know it to be gone.
    private func dropConnection(
        of message: Message, _ peer: Int32, _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger,
        _ sockets: Sockets
    ) throws {
        let verdict =
            message.property(Security.connectionProperty).flatMap(UInt64.init).map {
                ledger.verdict(descriptor: peer, connection: $0)
            } ?? (ledger.isOpen(peer) ? .unsure : .gone)
        guard verdict != .gone else { return }
        try guardedDrop(peer, &book, &ledger, sockets)
    }

    /// Drops the descriptor's current connection — unless it ended meanwhile (its descriptor could
    /// then belong to anything else in the process): the events are read once more just before.
    private func guardedDrop(
        _ peer: Int32, _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger, _ sockets: Sockets
    ) throws {
        let before = ledger.openConnection(peer)
        try readConnections(sockets, &book, &ledger)
        guard let before, ledger.openConnection(peer) == before else { return }
        counters.subscribersDropped.add()
        ledger.dropped(peer)
        drop(peer, &book)
    }

    /// Enters the monitor's queued events: a connection accepted or ended on a descriptor.
    private func readConnections(_ sockets: Sockets, _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger)
        throws
    {
        var frames: [Message] = []
        while let count = try sockets.connections.receiveMultipart(into: &frames, wait: false) {
            guard count == 2, frames[0].count == 6 else { continue }
            let (event, descriptor) = frames[0].withUnsafeBytes {
                (
                    UInt32($0.loadUnaligned(fromByteOffset: 0, as: UInt16.self)),
                    Int32(bitPattern: $0.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
                )
            }
            if event == MonitorEvents.accepted.rawValue {
                ledger.accepted(descriptor)
            } else if event == MonitorEvents.disconnected.rawValue {
                ledger.disconnected(descriptor)
            }
            // A descriptor seen again belongs to a new peer: what the old one held is forgotten.
            book.forget(peer: descriptor)
        }
    }

    private func drop(_ peer: Int32, _ book: inout SubscriptionBook) {
        book.forget(peer: peer)
        Connection.drop(descriptor: peer)
    }

    /// Secure mode, after the access file was reloaded: drops each connection whose client was
    /// removed or may no longer read a topic it holds (it may connect again, and is checked
    /// anew).
    private func recheck(
        _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger, _ security: Security, _ sockets: Sockets
    ) throws {
        for (peer, name) in book.clients {
            let client = security.client(named: name)
            let allowed = client.map { client in
                book.topics(of: peer).allSatisfy { client.maySubscribe(to: String(decoding: $0, as: UTF8.self)) }
            }
            guard allowed != true else { continue }
            logger.notice(
                "subscriber dropped: the access file no longer allows what it holds",
                metadata: ["client": "\(LogText(name))"])
            try guardedDrop(peer, &book, &ledger, sockets)
        }
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
        defer { commands.close() }
        var poller = Poller()
        poller.add(sockets.inbox)
        // The XPUB's descriptor, polled outside its lock: readable when it has commands to
        // process (subscriptions among them). A publisher's send may take that signal; it then
        // says so on the inbox (``Internal/subscriptionsWaiting``).
        poller.add(fileDescriptor: commands.fileDescriptor)
        poller.add(sockets.connections)
        var frames: [Message] = []
        var stops = 0
        var book = SubscriptionBook(limit: maxSubscriptionsPerPeer)
        book.manual = security != nil
        var ledger = ConnectionLedger()
        var accessGeneration = security?.generation ?? 0
        do {
            while stops < producers {
                // At least once a second: a reload is noticed (secure mode), and subscriptions
                // are read even if some wake-up was missed.
                try poller.poll(timeout: .seconds(1))
                try supervisor.checkInjected(name)
                if let security, security.generation != accessGeneration {
                    accessGeneration = security.generation
                    try recheck(&book, &ledger, security, sockets)
                }
                while let count = try sockets.inbox.receiveMultipart(into: &frames, wait: false) {
                    switch Internal.kind(of: frames, count: count, at: .egress) {
                    case .stop: stops += 1
                    case .subscriptionsWaiting: break  // read below
                    default: Internal.unexpected(count, at: .egress, counters: counters, logger: logger)
                    }
                }
                // Connections first, whatever woke us: a descriptor seen again belongs to a new
                // peer, and its "accepted" event is queued before any subscription of its can be
                // read — read after one, it would forget that subscription.
                try readConnections(sockets, &book, &ledger)
                try readSubscriptions(&book, &ledger, &frames, sockets)
            }
            logger.debug("egress stopped", metadata: ["producers": "\(producers)"])
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("egress ended by context shutdown")
        }
    }

    /// Reads every (un)subscription the XPUB holds, under its lock taken for at most 64 at a
    /// time, so that a burst of subscriptions delays the workers' publishing only briefly (in
    /// secure mode each is applied right after it is received, as XPUB_MANUAL requires).
    private func readSubscriptions(
        _ book: inout SubscriptionBook, _ ledger: inout ConnectionLedger, _ frames: inout [Message], _ sockets: Sockets
    ) throws {
        var changed = false
        while true {
            let read =
                try commands.withSocket { xpub in
                    var read = 0
                    while read < 64 {
                        guard let count = try xpub.receiveMultipart(into: &frames, wait: false, maxFrames: 1) else {
                            // Read empty, every command the XPUB had processed: the ledger's
                            // barrier (see ``ConnectionLedger/drained()``).
                            ledger.drained()
                            break
                        }
                        read += 1
                        // A subscription (1) or an unsubscription (0), one frame; anything else
                        // (an XSUB may send it) has nothing to publish to.
                        let isSubscription = count == 1 && frames[0].withUnsafeBytes { ($0.first ?? 2) <= 1 }
                        if isSubscription {
                            try note(frames[0], in: &book, &ledger, xpub, sockets)
                        } else if security != nil {
                            try strayMessage(frames[0], &book, &ledger, sockets)
                        }
                    }
                    return read
                } ?? 0
            if read > 0 { changed = true }
            if read < 64 { break }
        }
        guard changed else { return }
        counters.subscribedTopics.store(UInt64(book.topics))
        counters.auditTopics.store(UInt64(book.auditTopics))
    }
}
