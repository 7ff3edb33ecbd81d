import Locking
import Logging
import ZeroMQ

/// The service's own inproc endpoints and the messages between its threads, encoded and told
/// apart here and nowhere else.
///
/// | inbox | message | frames |
/// |---|---|---|
/// | a worker | ``Kind/intents(count:stride:)`` from the intake (worker 0) | `[1]` then `[session][Intent]` pairs; in secure mode `[3]` then `[session][Intent][client]` triples |
/// | a worker | ``Kind/request`` from requests | `[2][routing id][delimiter][Request][client]` |
/// | the flush thread | ``Kind/durableReply`` from a worker | `[routing id][delimiter][session][Reply]` (an empty session: nothing to write) |
/// | requests | ``Kind/reply`` from the flush thread | `[routing id][delimiter][Reply]` |
/// | egress | ``Kind/subscriptionsWaiting`` from a publisher that found the XPUB holding subscriptions | `[0xFE]` alone |
/// | requests' calls | ``Kind/calledRequest`` from ``CallDesk`` (a call in process) | `[4][call id][Request][client]` |
/// | requests' calls | ``Kind/calledIntent`` from ``CallDesk`` | `[5][call id][session][Intent][client]` |
/// | any | ``Kind/stop`` | `[0xFF]` alone |
///
/// `delimiter` is one byte: 1 if the client sent an empty delimiter frame (DEALER or REQ
/// clients), 0 if not; the reply mirrors it. A message of any other shape is a fault of the
/// service itself: ``unexpected(_:at:counters:logger:)`` counts and logs it. `client` is the
/// access file's name of the sender (secure mode; empty otherwise): libzmq drops a message's
/// metadata (its User-Id) when it is sent on, so it travels as a frame.
enum Internal {
    static func worker(_ index: Int) -> String { "inproc://navigator-worker-\(index)" }
    static let egress = "inproc://navigator-egress"
    static let replies = "inproc://navigator-replies"
    static let acks = "inproc://navigator-acks"
    static let ingressControl = "inproc://navigator-control-ingress"
    static let requestsControl = "inproc://navigator-control-requests"
    static let calls = "inproc://navigator-calls"

    static let intentKind: UInt8 = 1
    static let requestKind: UInt8 = 2
    static let clientIntentKind: UInt8 = 3
    static let calledRequestKind: UInt8 = 4
    static let calledIntentKind: UInt8 = 5
    static let stop: [UInt8] = [0xFF]
    static let subscriptionsWaiting: [UInt8] = [0xFE]

    enum Inbox: String {
        case worker, flush, requests, egress, calls
    }

    enum Kind: Equatable {
        case stop
        /// `count` intents of `stride` frames each: session, Intent and (stride 3) client.
        case intents(count: Int, stride: Int)
        case request
        case durableReply
        case reply
        case subscriptionsWaiting
        /// A request made in process, to be admitted as a client's.
        case calledRequest
        /// A fire-and-forget intent made in process.
        case calledIntent
    }

    /// What the `count` frames received at `inbox` are; nil for a shape nobody sends there.
    static func kind(of frames: [Message], count: Int, at inbox: Inbox) -> Kind? {
        if count == 1 {
            let byte = frames[0].withUnsafeBytes { $0.count == 1 ? $0[0] : 0 }
            if byte == stop[0] { return .stop }
            return byte == subscriptionsWaiting[0] && inbox == .egress ? .subscriptionsWaiting : nil
        }
        switch inbox {
        case .worker:
            let first = frames[0].withUnsafeBytes { $0.count == 1 ? $0[0] : 0 }
            if first == intentKind, count % 2 == 1 { return .intents(count: count / 2, stride: 2) }
            if first == clientIntentKind, count % 3 == 1 { return .intents(count: count / 3, stride: 3) }
            if first == requestKind, count == 5 { return .request }
            return nil
        case .flush: return count == 4 ? .durableReply : nil
        case .requests: return count == 3 ? .reply : nil
        case .egress: return nil
        case .calls:
            let first = frames[0].withUnsafeBytes { $0.count == 1 ? $0[0] : 0 }
            if first == calledRequestKind, count == 4 { return .calledRequest }
            if first == calledIntentKind, count == 5 { return .calledIntent }
            return nil
        }
    }

    /// Counts and logs a message of a shape nobody sends to `inbox`: every one counted, at most
    /// ``unexpectedLinesPerWindow`` lines a minute logged for each inbox, and then how many were not
    /// (some come from outside: another instance's messages on the cluster endpoint, an owner's
    /// replies, which a peer of another version or a stranger could send at any rate).
    static func unexpected(
        _ count: Int, at inbox: Inbox, counters: EngineCounters, logger: Logger, now: Int64 = MonotonicClock.now()
    ) {
        counters.unexpectedInternal.add()
        let (log, dropped) = unexpectedLines.withLock { lines -> (Bool, Int) in
            var entry = lines[inbox] ?? (start: now, logged: 0, dropped: 0)
            var droppedBefore = 0
            if now - entry.start >= unexpectedWindow {
                droppedBefore = entry.dropped
                entry = (now, 0, 0)
            }
            let log = entry.logged < unexpectedLinesPerWindow
            if log { entry.logged += 1 } else { entry.dropped += 1 }
            lines[inbox] = entry
            return (log, droppedBefore)
        }
        if dropped > 0 {
            logger.error(
                "messages of a shape nobody sends were dropped without a line each",
                metadata: ["inbox": "\(inbox.rawValue)", "not logged": "\(dropped)"])
        }
        guard log else { return }
        logger.error(
            "a message between navigatord's threads has a shape nobody sends; dropped",
            metadata: ["inbox": "\(inbox.rawValue)", "frames": "\(count)"])
    }

    static let unexpectedLinesPerWindow = 10
    /// A minute, in nanoseconds.
    static let unexpectedWindow: Int64 = 60_000_000_000
    private static let unexpectedLines = Locked<[Inbox: (start: Int64, logged: Int, dropped: Int)]>([:])

    // MARK: Encoding

    /// `[2][routing id][delimiter][Request][client]` to a worker; false (nothing sent) if its
    /// queue is full. libzmq checks the mark on a message's first frame only: once that is
    /// taken, the rest goes too.
    static func trySendRequest(
        on socket: Socket, routingID: Message, delimited: Bool, request: Message, client: String
    ) throws(ZeroMQError) -> Bool {
        guard try socket.trySend([requestKind], more: true) else { return false }
        try socket.send(routingID, more: true)
        try socket.send([delimited ? 1 : 0] as [UInt8], more: true)
        try socket.send(request, more: true)
        try socket.send(Array(client.utf8))
        return true
    }

    /// `[1]` then `[session][Intent]` pairs (`stride` 2), or `[3]` then
    /// `[session][Intent][client]` triples (`stride` 3), to a worker, the frames' contents
    /// moved; false (nothing sent) if its queue is full.
    static func trySendIntents(on socket: Socket, _ frames: [Message], stride: Int) throws(ZeroMQError) -> Bool {
        guard try socket.trySend([stride == 3 ? clientIntentKind : intentKind], more: true) else { return false }
        for (index, frame) in frames.enumerated() { try socket.send(frame, more: index < frames.count - 1) }
        return true
    }

    /// `[routing id][delimiter][session][Reply]` to the flush thread.
    static func sendDurableReply(
        on socket: Socket, routingID: Message, delimiter: Message, session: String, reply: [UInt8]
    ) throws(ZeroMQError) {
        try socket.send(routingID, more: true)
        try socket.send(delimiter, more: true)
        try socket.send(Array(session.utf8), more: true)
        try socket.send(reply)
    }

    /// `[routing id][delimiter][Reply]` to the requests thread.
    static func sendReply(
        on socket: Socket, routingID: Message, delimiter: Message, reply: some FrameBytes
    ) throws(ZeroMQError) {
        try socket.send(routingID, more: true)
        try socket.send(delimiter, more: true)
        try socket.send(reply)
    }

    /// `[routing id][delimiter][Reply]` to the requests thread, the reply as received: moved,
    /// not copied (the ``FrameBytes`` overload copies).
    static func sendReply(
        on socket: Socket, routingID: Message, delimiter: Message, reply: Message
    ) throws(ZeroMQError) {
        try socket.send(routingID, more: true)
        try socket.send(delimiter, more: true)
        try socket.send(reply)
    }
}
