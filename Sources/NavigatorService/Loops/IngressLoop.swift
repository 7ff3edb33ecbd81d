import Logging
import NavigatorCore
import NavigatorWire
import ZeroMQ

/// Owns the intents PULL: checks each message's frames and session, rejects what is malformed,
/// and hands the rest, without copying, to the session's worker.
///
/// Backpressure: the hand-off to each worker holds at most `handoffHighWaterMark` bundles. When
/// a worker's is full, ingress keeps that bundle and stops reading the PULL until the worker has
/// taken it; meanwhile the PULL's queue fills to `highWaterMark` per producer, TCP's window closes,
/// and the producers' PUSH blocks. Nothing is dropped and memory stays bounded.
struct IngressLoop: SocketLoop {
    let context: Context
    let commands: SharedSocket
    let endpoints: [String]
    let workers: Int
    let maxMessageBytes: Int
    let highWaterMark: Int32
    let handoffHighWaterMark: Int32
    let counters: ServiceCounters
    /// The epoch of this run's streams (rejection headers carry it).
    let epoch: UInt64
    let bound: BoundEndpoints
    /// Secure mode: each intent's client (User-Id) must be allowed to publish to its session.
    let security: Security?
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-ingress" }

    struct Sockets {
        let pull: Socket
        let control: Socket
        let workers: [Socket]
        let publisher: Publisher
        let limiter: LogLimiter
    }

    /// Intents waiting to go to each worker, handed over in bundles of `[kind]` and then
    /// `[session][Intent]` pairs: one inproc message (and at most one wake-up) per bundle.
    final class Bundles {
        private var pending: [[ZeroMQ.Message]]
        static let limit = 64
        /// Frames per intent: session and Intent, and in secure mode the client's name.
        let stride: Int
        private var full: Int { Self.limit * stride }

        init(workers: Int, withClients: Bool) {
            pending = Array(repeating: [], count: workers)
            stride = withClients ? 3 : 2
        }

        /// Workers with a full bundle waiting (their queue was full): read nothing more until
        /// they take it.
        var fullWorkers: [Int] { pending.indices.filter { pending[$0].count >= full } }
        /// Whether some worker has a full bundle waiting.
        var hasFull: Bool { pending.contains { $0.count >= full } }

        /// Adds an intent for `worker`, taking over the frames' contents (and, in secure mode,
        /// naming its client); sends the bundle when full, if the worker takes it.
        func add(
            _ session: ZeroMQ.Message, _ payload: ZeroMQ.Message, client: String?, for worker: Int, _ sockets: Sockets
        ) throws {
            pending[worker].append(ZeroMQ.Message(moving: session))
            pending[worker].append(ZeroMQ.Message(moving: payload))
            if stride == 3 { pending[worker].append(try ZeroMQ.Message(copying: Array((client ?? "").utf8))) }
            if pending[worker].count >= full { _ = try flush(worker, sockets) }
        }

        /// Offers every waiting bundle; returns whether all were taken.
        @discardableResult
        func flushAll(_ sockets: Sockets) throws -> Bool {
            var all = true
            for worker in pending.indices where !(try flush(worker, sockets)) { all = false }
            return all
        }

        /// Sends the bundle for `worker` unless its queue is full; returns whether nothing waits.
        private func flush(_ worker: Int, _ sockets: Sockets) throws -> Bool {
            guard !pending[worker].isEmpty else { return true }
            guard try Internal.trySendIntents(on: sockets.workers[worker], pending[worker], stride: stride) else {
                return false
            }
            pending[worker].removeAll(keepingCapacity: true)
            return true
        }
    }

    func open() throws -> Sockets {
        let pull = try Socket(context, type: .pull)
        try pull.set(.receiveHighWaterMark, highWaterMark)
        // libzmq drops a peer that sends more than this; anything between maxMessageBytes and it
        // is refused here with a rejection the producer can read.
        try pull.set(.maxMessageSize, Int64(max(maxMessageBytes * 4, 1 << 20)))
        bound.set(intents: try bindAll(pull, endpoints, "intents", security: security))
        let control = try Socket(context, type: .pull)
        try control.bind(Internal.ingressControl)
        let pushes = try (0..<workers).map { index in
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, handoffHighWaterMark)
            try push.connect(Internal.worker(index))
            return push
        }
        return Sockets(
            pull: pull, control: control, workers: pushes,
            publisher: try Publisher(context: context, commands: commands, counters: counters, epoch: epoch),
            limiter: LogLimiter(logger: logger))
    }

    func run(_ sockets: Sockets) throws {
        var reading = Poller()
        reading.add(sockets.pull)
        reading.add(sockets.control)
        var frames: [Message] = []
        let bundles = Bundles(workers: sockets.workers.count, withClients: security != nil)
        // Whether a bundle waits for a worker whose queue is full.
        var backlog = false
        do {
            while true {
                let stopAsked: Bool
                let full = bundles.fullWorkers
                if full.isEmpty {
                    // Reading; with a backlog, offer it again soon.
                    try reading.poll(timeout: backlog ? .milliseconds(1) : nil)
                    stopAsked = reading.events(at: 1).contains(.readable)
                } else {
                    // A full bundle waits: read nothing (the PULL fills, producers block) until
                    // its worker has room, or a stop comes.
                    var waiting = Poller()
                    waiting.add(sockets.control)
                    for worker in full { waiting.add(sockets.workers[worker], for: .writable) }
                    try waiting.poll(timeout: nil)
                    stopAsked = waiting.events(at: 0).contains(.readable)
                }
                if stopAsked {
                    _ = try sockets.control.receiveMultipart()
                    try stop(sockets, bundles, &frames)
                    return
                }
                try supervisor.checkInjected(name)
                for _ in 0..<1024 {
                    guard !bundles.hasFull,
                        let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2)
                    else { break }
                    try handle(frames, count, sockets, bundles)
                }
                // Nothing more to read (or no room): hand over what waits.
                backlog = try !bundles.flushAll(sockets)
                try sockets.publisher.flush()
            }
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("ingress ended by context shutdown")
        }
    }

    /// Stop intake: take what is already queued (waiting for the workers' room as long as it
    /// takes: they keep working through their queues), then tell the workers.
    private func stop(_ sockets: Sockets, _ bundles: Bundles, _ frames: inout [Message]) throws {
        var room = Poller()
        for worker in sockets.workers { room.add(worker, for: .writable) }
        func handOver() throws {
            while !(try bundles.flushAll(sockets)) { try room.poll(timeout: .milliseconds(100)) }
        }
        while true {
            try handOver()
            guard let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2) else { break }
            try handle(frames, count, sockets, bundles)
        }
        try handOver()
        sockets.pull.close()
        for worker in sockets.workers { try worker.send(Internal.stop) }
        try sockets.publisher.stop()
        logger.debug("ingress stopped")
    }

    private func handle(_ frames: [Message], _ count: Int, _ sockets: Sockets, _ bundles: Bundles) throws {
        let sessionProblem: String?
        var session = ""
        do {
            session = try frames[0].withUnsafeBytes { (bytes) throws(WireError) in try SessionID.decode(bytes) }
            sessionProblem = nil
        } catch {
            sessionProblem = error.message
        }
        if count != 2 {
            return try reject(
                sessionProblem == nil ? session : "", .badFrames,
                "intent message has \(count) frame\(count == 1 ? "" : "s"); expected 2: [session][Intent]", frames[0],
                sockets)
        }
        if let sessionProblem { return try reject("", .invalidSession, sessionProblem, frames[0], sockets) }
        if frames[1].count > maxMessageBytes {
            return try reject(
                session, .tooLarge, "intent is \(frames[1].count) bytes; expected at most \(maxMessageBytes)",
                frames[0], sockets)
        }
        var client: String?
        if let security {
            client = Security.clientName(of: frames[0])
            if let refusal = security.refusal(of: .publish(session: session), by: client) {
                return try reject(session, .forbidden, refusal, frames[0], sockets)
            }
        }
        let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
        counters.forwarded[worker].add()
        try bundles.add(frames[0], frames[1], client: client, for: worker, sockets)
    }

    private func reject(
        _ session: String, _ code: Navigator_V1_RejectCode, _ message: String, _ frame: Message, _ sockets: Sockets
    ) throws {
        counters.refused(code, intent: true)
        let peer = peerKey(frame, "intents")
        if sockets.limiter.allow(peer) {
            logger.notice(
                "intent rejected at ingress",
                metadata: [
                    "session": "\(LogText(session))", "code": "\(code.label)", "reason": "\(LogText(message))",
                    "peer": "\(LogText(peer))",
                ])
        }
        try sockets.publisher.rejection(
            session: session, intentID: "", source: "", code: code, message: message, sentAt: 0)
    }
}
