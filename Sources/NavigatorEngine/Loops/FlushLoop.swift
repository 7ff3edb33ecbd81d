import Locking
import Logging
import NavigatorStore
import NavigatorWire
import ZeroMQ

/// The only thread that writes the state file: every `interval` it writes the sessions changed
/// since (write-behind) and packs idle ones; in between it makes acknowledged requests durable.
///
/// A worker never waits for SQLite: it hands an acknowledged request's reply here as
/// `[routing id][delimiter][session][Reply]` (its batch is published already); this thread
/// writes the sessions of every reply waiting, in one transaction, then sends the replies on to
/// the requests thread — or, when the write failed, each reply turned into `UNAVAILABLE` (the
/// change stands; a retry with the same intent id is a duplicate). Every reply of a worker takes
/// this way, those that need no write too, so they keep their order; a worker's `[stop]` is
/// passed on after its replies, so the requests thread stops only when every reply is out.
struct FlushLoop: SocketLoop {
    let context: Context
    let persistence: Persistence
    let interval: Duration
    /// Sessions unchanged this long (ns) are forgotten; 0: never.
    let idleExpiry: Int64
    /// Nice values below the workers' the thread runs (``EngineConfiguration/writeBehindNice``);
    /// 0 leaves it at theirs.
    let nice: Int32
    let counters: EngineCounters
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-flush" }

    struct Sockets {
        let acks: Socket
        let replies: Socket
    }

    func open() throws -> Sockets {
        let acks = try Socket(context, type: .pull)
        try acks.set(.receiveHighWaterMark, 0)
        try acks.bind(Internal.acks)
        let replies = try Socket(context, type: .push)
        try replies.set(.sendHighWaterMark, 0)
        try replies.connect(Internal.replies)
        return Sockets(acks: acks, replies: replies)
    }

    func run(_ sockets: Sockets) throws {
        // First, so that whatever this thread goes on to do (and any thread it starts) runs at
        // the lower priority.
        if let problem = GiveWay.lowerPriority(ofThisThreadBy: nice) {
            // It works on at the workers' priority: their tail waits more for its rounds.
            logger.warning(
                "the flush thread's priority could not be lowered; it runs at the workers'",
                metadata: ["writeBehindNice": "\(nice)", "reason": "\(problem)"])
        }
        var poller = Poller()
        poller.add(sockets.acks)
        var frames: [Message] = []
        let step = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
        var nextFlush = MonotonicClock.now() + step
        // Looking for idle sessions walks them all: once a minute at most.
        let expiryStep = min(max(idleExpiry / 10, 1_000_000_000), 60_000_000_000)
        var nextExpiry = MonotonicClock.now() + expiryStep
        do {
            while !persistence.isStopping {
                try poller.poll(timeout: .nanoseconds(max(0, min(nextFlush - MonotonicClock.now(), 50_000_000))))
                try supervisor.checkInjected(name)
                try answerWaiting(sockets, &frames)
                if MonotonicClock.now() >= nextFlush {
                    // Between chunks of the round, the replies that arrived meanwhile go first.
                    try persistence.flushAndPack { try answerWaiting(sockets, &frames) }
                    nextFlush = MonotonicClock.now() + step
                }
                if idleExpiry > 0, MonotonicClock.now() >= nextExpiry {
                    persistence.expireIdle(after: idleExpiry)
                    nextExpiry = MonotonicClock.now() + expiryStep
                }
            }
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("flush thread ended by context shutdown")
        }
    }

    /// Takes the replies waiting from the workers (and their stops) and answers them: their
    /// sessions are written in one transaction, then the replies go on.
    private func answerWaiting(_ sockets: Sockets, _ frames: inout [Message]) throws {
        var waiting: [[Message]] = []
        while let count = try sockets.acks.receiveMultipart(into: &frames, wait: false) {
            switch Internal.kind(of: frames, count: count, at: .flush) {
            case .stop:
                // Replies received before a worker's stop go out before it.
                try answer(waiting, sockets)
                waiting.removeAll()
                try sockets.replies.send(Internal.stop)
            case .durableReply:
                waiting.append(frames.prefix(4).map { Message(moving: $0) })
            default:
                Internal.unexpected(count, at: .flush, counters: counters, logger: logger)
            }
        }
        try answer(waiting, sockets)
    }

    /// Makes the sessions of these replies durable in one write, then sends the replies on.
    private func answer(_ waiting: [[Message]], _ sockets: Sockets) throws {
        guard !waiting.isEmpty else { return }
        let sessions = Set(waiting.map { $0[2].string }.filter { !$0.isEmpty })
        var failure: (any Error)?
        do {
            try persistence.flush(sessions)
        } catch let error where error is FencedWrite || error is Persistence.NotServed {
            // Partitions changing hands (several instances), not the store away: each said.
            failure = error
            logger.warning(
                "sessions of \(waiting.count) replies were not written here; they are answered UNAVAILABLE",
                metadata: ["sessions": "\(sessions.count)", "reason": "\(error)"])
        } catch {
            failure = error  // logged by Persistence: once, then a line a minute while it lasts
        }
        for frames in waiting {
            counters.repliesWaiting.subtract()  // before it goes: whoever gets it sees it gone
            guard let failure, frames[2].count > 0 else {
                try Internal.sendReply(
                    on: sockets.replies, routingID: frames[0], delimiter: frames[1], reply: frames[3])
                continue
            }
            // Not INTERNAL: that says nothing changed. The change stands and was published.
            var reply = (try? Navigator_V1_Reply(serializedBytes: frames[3].bytes)) ?? Navigator_V1_Reply()
            reply.explanationSteps = []
            reply.rejected = .rejection(
                .unavailable,
                "the change was applied and published but is not yet durable (\(persistence.database.kind) could not be written: \(failure)); retry the same request later"
            )
            counters.refused(.unavailable, intent: false)  // its outcome was counted when it was applied
            try Internal.sendReply(
                on: sockets.replies, routingID: frames[0], delimiter: frames[1],
                reply: try reply.serializedBytes() as [UInt8])
        }
    }
}
