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
/// session (its partition moved meanwhile) answers MOVED itself. Forwarding is plain mode only:
/// in secure mode the client's name could not be trusted across the link, and instances answer
/// MOVED instead.
enum ClusterLink {
    static let requestKind: UInt8 = 2
    static let intentKind: UInt8 = 1
    /// Messages queued to one peer before forwarding to it gives up (the client is told MOVED).
    static let highWaterMark: Int32 = 10_000

    /// A DEALER to a peer's cluster endpoint.
    static func dealer(_ context: Context, to endpoint: String) throws -> Socket {
        let socket = try Socket(context, type: .dealer)
        try socket.set(.linger, .zero)
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

/// The DEALERs of one thread to the peers it forwards to, made when first needed.
final class ClusterPeers {
    private let context: Context
    private(set) var sockets: [(endpoint: String, socket: Socket)] = []
    /// A DEALER was added since the owner last looked (its poller needs it).
    var added = false

    /// The longest a thread waits for a new peer connection (a peer that is down costs it once).
    static let connectWait: Duration = .milliseconds(200)

    init(context: Context) { self.context = context }

    func socket(to endpoint: String) throws -> Socket {
        if let existing = sockets.first(where: { $0.endpoint == endpoint }) { return existing.socket }
        let socket = try ClusterLink.dealer(context, to: endpoint)
        sockets.append((endpoint, socket))
        added = true
        // A new DEALER takes messages only once connected (ZMQ_IMMEDIATE): give the connection
        // a moment, once per peer, so that the first message to it is not refused for nothing.
        var poller = Poller()
        poller.add(socket, for: .writable)
        _ = try poller.poll(timeout: Self.connectWait)
        return socket
    }
}
