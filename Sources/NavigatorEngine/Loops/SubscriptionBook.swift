/// The commands socket's subscriptions as egress keeps them: which topics each connection holds
/// and how many connections hold each topic. The XPUB passes every subscription and
/// unsubscription up (ZMQ_XPUB_VERBOSER); those a peer sent carry its connection's descriptor,
/// those libzmq makes when a peer goes away carry none.
///
/// - A peer's repeated subscription, or its unsubscription from a topic it does not hold,
///   changes nothing (libzmq's own count would drift by them).
/// - A peer holding more than `limit` topics is to be dropped (``subscribe(_:peer:)`` says so).
/// - A peer that goes away: libzmq passes up one unsubscription per topic it held, which counts
///   the topics down; its book is cleared on the monitor's disconnected or accepted event for
///   its descriptor (a descriptor is reused by the next connection).
/// - Inproc peers carry no descriptor: their messages are counted as they come, without a limit.
///
/// In secure mode (XPUB_MANUAL) the book holds only the subscriptions egress applied; libzmq's
/// unsubscriptions for a peer that went away also name the topics it was refused, so they are
/// not used: ``forget(peer:)`` counts the peer's topics down instead.
struct SubscriptionBook {
    let limit: Int
    /// Secure mode: a peer's topics are counted down when it is forgotten.
    var manual = false
    private var byPeer: [Int32: Set<[UInt8]>] = [:]
    /// Secure mode: the client (access-file name) behind each connection.
    private(set) var clients: [Int32: String] = [:]
    private var holders: [[UInt8]: Int] = [:]
    /// Topics at least one peer holds.
    private(set) var topics = 0
    /// Of those, the ones that receive audit records.
    private(set) var auditTopics = 0

    init(limit: Int) { self.limit = limit }

    enum Verdict: Equatable {
        case counted
        case unchanged
        /// The peer now holds more than `limit` topics: drop it.
        case overLimit(holding: Int)
    }

    mutating func subscribe(_ topic: [UInt8], peer: Int32?) -> Verdict {
        guard let peer else {
            hold(topic, by: 1)
            return .counted
        }
        guard byPeer[peer, default: []].insert(topic).inserted else { return .unchanged }
        hold(topic, by: 1)
        let holding = byPeer[peer]!.count
        return holding > limit ? .overLimit(holding: holding) : .counted
    }

    mutating func unsubscribe(_ topic: [UInt8], peer: Int32?) {
        if let peer {
            guard byPeer[peer]?.remove(topic) != nil else { return }
        } else if manual {
            return
        }
        hold(topic, by: -1)
    }

    /// Secure mode: the connection on `peer` belongs to `client`.
    mutating func note(client: String, peer: Int32) { clients[peer] = client }

    /// The connection on `peer` ended, or a new one has its descriptor: forget what the old one
    /// held (the topics themselves are counted down by libzmq's unsubscriptions, or here in
    /// secure mode).
    mutating func forget(peer: Int32) {
        if manual, let held = byPeer[peer] {
            for topic in held { hold(topic, by: -1) }
        }
        byPeer[peer] = nil
        clients[peer] = nil
    }

    /// The topics the connection on `peer` holds.
    func topics(of peer: Int32) -> Set<[UInt8]> { byPeer[peer] ?? [] }

    /// How many topics the connection on `peer` holds.
    func holding(_ peer: Int32) -> Int { byPeer[peer]?.count ?? 0 }

    private mutating func hold(_ topic: [UInt8], by change: Int) {
        let before = holders[topic, default: 0]
        let after = max(0, before + change)
        holders[topic] = after == 0 ? nil : after
        guard (before == 0) != (after == 0) else { return }
        let delta = after > 0 ? 1 : -1
        topics += delta
        if EgressLoop.receivesAudit(topic: topic) { auditTopics += delta }
    }
}
