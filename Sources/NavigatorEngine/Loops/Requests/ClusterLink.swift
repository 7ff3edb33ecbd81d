import NavigatorWire
import ZeroMQ

/// Several instances: how a message for a session another instance serves reaches it, so that
/// producers and clients may use any instance. Each instance binds a ROUTER at its cluster
/// endpoint (advertised in `navigator_instances`) and keeps a DEALER to each peer it forwards
/// to. The requests thread owns the ROUTER and its DEALERs; worker 0's intake has DEALERs of
/// its own for fire-and-forget intents.
///
/// | from | message | frames |
/// |---|---|---|
/// | a peer's DEALER | a forwarded request | `[2][routing id][delimiter][Request][client]` |
/// | a peer's DEALER | a forwarded intent | `[1][session][Intent][client]` |
/// | the owner's ROUTER | the reply to a forwarded request | `[routing id][delimiter][Reply]` |
///
/// A forwarded message is never forwarded again: an instance that finds it does not serve the
/// session (its partition moved meanwhile) answers MOVED itself.
///
/// Secure mode: the cluster endpoint is a CURVE server like the others, and the instances of a
/// deployment connect to each other with the server key pair they share (as replicas share a TLS
/// certificate): the ZAP handler names such a connection ``Security/peerName``. Only a message
/// from a peer may carry a client's name (the last frame), and the owner takes the client from
/// there alone and authorizes it exactly as if the client had connected to it; a client's own
/// connection to the cluster endpoint gets nothing through, so no client can speak for another.
enum ClusterLink {
    static let requestKind: UInt8 = 2
    static let intentKind: UInt8 = 1
    /// Messages queued to one peer before forwarding to it gives up (the client is told MOVED).
    static let highWaterMark: Int32 = 10_000

    /// A DEALER to a peer's cluster endpoint; in secure mode a CURVE client with the shared
    /// server key pair.
    static func dealer(_ context: Context, to endpoint: String, keys: CurveKeyPair?) throws -> Socket {
        let socket = try Socket(context, type: .dealer)
        try socket.set(.linger, .zero)
        if let keys { try socket.makeCurveClient(keys, serverKey: keys.publicKey) }
        // Queue only to a live connection: while the peer is down a send fails at once (the
        // message is then handled here: MOVED), and nothing queued for a dead peer is delivered
        // late when it comes back. Heartbeats notice a peer that vanished without closing.
        try socket.set(.immediate, true)
        try socket.set(.heartbeatInterval, .seconds(1))
        try socket.set(.heartbeatTimeout, .seconds(3))
        try socket.set(.heartbeatTTL, .seconds(3))
        try socket.set(.sendHighWaterMark, highWaterMark)
        try socket.set(.receiveHighWaterMark, highWaterMark)
        try socket.connect(endpoint)
        return socket
    }

    /// Forwards a fire-and-forget intent to the peer that serves its session: `[1][session]
    /// [Intent][client]`; false (nothing sent) when the link is full.
    static func forward(intent: some FrameBytes, session: some FrameBytes, client: String, to peer: Socket)
        throws(ZeroMQError) -> Bool
    {
        guard try peer.trySend([intentKind], more: true) else { return false }
        try peer.send(session, more: true)
        try peer.send(intent, more: true)
        try peer.send(Array(client.utf8))
        return true
    }

    /// The routing id a forwarded request has inside its owner: `[0][C][peer length][peer id]
    /// [client's routing id]`. libzmq's own routing ids are 5 bytes and a ROUTER refuses ids set by
    /// peers that begin with a zero byte, so no client's id looks like this.
    static func compoundID(peer: Message, routingID: Message) -> [UInt8] {
        [0, 0x43, UInt8(truncatingIfNeeded: peer.count)] + peer.bytes + routingID.bytes
    }

    /// The peer and the client's routing id of a compound id; nil for a client's own id.
    static func split(_ id: Message) -> (peer: [UInt8], routingID: [UInt8])? {
        id.withUnsafeBytes { bytes in
            guard bytes.count > 3, bytes[0] == 0, bytes[1] == 0x43 else { return nil }
            let length = Int(bytes[2])
            guard bytes.count > 3 + length else { return nil }
            return (Array(bytes[3..<(3 + length)]), Array(bytes[(3 + length)...]))
        }
    }
}

/// The DEALERs of one thread to the peers it forwards to: opened once a peer is known to own
/// partitions (``open(_:now:interval:)``), or when first needed, and closed once it owns none.
final class ClusterPeers {
    private let context: Context
    /// Secure mode: the server key pair the instances share.
    private let keys: CurveKeyPair?
    private(set) var sockets: [(endpoint: String, socket: Socket)] = []
    /// A DEALER was added since the owner last looked (its poller needs it).
    var added = false

    /// When the DEALERs were last compared with the live peers (``prune(keeping:now:interval:)``).
    private var prunedAt: Int64 = 0
    /// When the live peers were last looked at for ones without a DEALER (``open(_:now:interval:)``).
    private var openedAt: Int64 = 0
    /// The peers whose first message has had its wait for the connection (``socket(to:)``).
    private var waited: Set<String> = []

    /// The longest a thread waits for a new peer connection (a peer that is down costs it once).
    static let connectWait: Duration = .milliseconds(200)

    init(context: Context, keys: CurveKeyPair?) {
        self.context = context
        self.keys = keys
    }

    /// Closes the DEALERs of peers that no longer own any partition (they left, or their
    /// leases ran out): a departed peer's connection is not retried forever. At most once every
    /// `interval`; returns whether one was closed (its poller must be made again).
    @discardableResult
    func prune(keeping live: @autoclosure () -> Set<String>, now: Int64, interval: Int64 = 5_000_000_000) -> Bool {
        guard now - prunedAt >= interval, !sockets.isEmpty else { return false }
        prunedAt = now
        let live = live()
        let gone = sockets.filter { !live.contains($0.endpoint) }
        guard !gone.isEmpty else { return false }
        for peer in gone { peer.socket.close() }
        sockets.removeAll { !live.contains($0.endpoint) }
        waited.formIntersection(live)
        added = true
        return true
    }

    /// A thread's DEALERs kept to the live peers (the instances that own partitions): closed to
    /// those that left (``prune(keeping:now:interval:)``, at most every 5 s) and opened to those
    /// that came (``open(_:now:interval:)``, at most every second). The requests thread and
    /// worker 0 call it whenever they wake.
    func keep(_ live: @autoclosure () -> Set<String>, now: Int64) throws {
        prune(keeping: live(), now: now)
        try open(live(), now: now)
    }

    /// Opens a DEALER to each live peer (an instance that owns partitions) that has none yet, at
    /// most once every `interval`, without waiting for it to connect: its connection (in secure
    /// mode a CURVE handshake) is made before the first message for that peer comes, which
    /// otherwise waits up to ``connectWait`` for it on this thread — and on a loaded machine
    /// could still find it not made, and be answered MOVED instead of forwarded. Returns whether
    /// one was opened (the owner must poll it too: ``added`` says so as well).
    @discardableResult
    func open(_ live: @autoclosure () -> Set<String>, now: Int64, interval: Int64 = 1_000_000_000) throws -> Bool {
        guard now - openedAt >= interval else { return false }
        openedAt = now
        var opened = false
        for endpoint in live().sorted() where !sockets.contains(where: { $0.endpoint == endpoint }) {
            sockets.append((endpoint, try ClusterLink.dealer(context, to: endpoint, keys: keys)))
            opened = true
        }
        if opened { added = true }
        return opened
    }

    /// The DEALER to `endpoint`, opened now if there is none. A DEALER takes messages only once
    /// connected (ZMQ_IMMEDIATE): the first message for a peer gives its connection a moment
    /// (``connectWait``), once per peer, so that it is not refused for nothing — no wait at all
    /// when the DEALER was opened ahead and has connected since.
    func socket(to endpoint: String) throws -> Socket {
        let socket: Socket
        if let existing = sockets.first(where: { $0.endpoint == endpoint }) {
            socket = existing.socket
        } else {
            socket = try ClusterLink.dealer(context, to: endpoint, keys: keys)
            sockets.append((endpoint, socket))
            added = true
        }
        if waited.insert(endpoint).inserted {
            var poller = Poller()
            poller.add(socket, for: .writable)
            _ = try poller.poll(timeout: Self.connectWait)
        }
        return socket
    }
}

/// The requests this thread forwarded whose reply has not come back: one whose owner does not
/// answer within ``patience`` (it stopped, or the link broke) is answered `UNAVAILABLE` here, and
/// a reply that comes later is dropped (its client has its answer).
final class ForwardedRequests {
    struct Entry {
        let requestID: String
        let session: String
        let endpoint: String
        let delimited: Bool
        let deadline: Int64
    }

    /// How long a forwarded request may wait for its owner's reply.
    let patience: Duration
    /// By the client's routing id and the request's id: a client may have several requests in
    /// flight on one connection (NavigatorConnection pipelines them).
    private var entries: [Key: Entry] = [:]

    struct Key: Hashable {
        let routingID: [UInt8]
        let requestID: String
    }

    init(patience: Duration = .seconds(5)) { self.patience = patience }

    var count: Int { entries.count }

    func add(routingID: [UInt8], requestID: String, session: String, endpoint: String, delimited: Bool, now: Int64) {
        entries[Key(routingID: routingID, requestID: requestID)] = Entry(
            requestID: requestID, session: session, endpoint: endpoint, delimited: delimited,
            deadline: now + Int64(patience / .nanoseconds(1)))
    }

    /// Takes the entry of a reply that came back (`reply`: its bytes); nil if none waits for it
    /// (answered already).
    func settle(_ routingID: [UInt8], reply: [UInt8]) -> Entry? {
        let requestID = (try? Navigator_V1_Reply(serializedBytes: reply))?.requestID ?? ""
        return entries.removeValue(forKey: Key(routingID: routingID, requestID: requestID))
    }

    /// The requests past their deadline, taken out.
    func overdue(now: Int64) -> [(routingID: [UInt8], entry: Entry)] {
        guard !entries.isEmpty else { return [] }
        let late = entries.filter { $0.value.deadline <= now }
        for key in late.keys { entries[key] = nil }
        return late.map { ($0.key.routingID, $0.value) }
    }

    /// The reply a client gets when its forwarded request's owner did not answer.
    func unavailable(_ entry: Entry) -> Navigator_V1_Reply {
        var reply = Navigator_V1_Reply()
        reply.requestID = entry.requestID
        reply.rejected = .with {
            $0.code = .unavailable
            $0.message =
                "the instance that serves session \(entry.session) (\(entry.endpoint)) did not answer within \(patience); it may have stopped: the request may or may not have been carried out — retry the same request"
        }
        return reply
    }
}
