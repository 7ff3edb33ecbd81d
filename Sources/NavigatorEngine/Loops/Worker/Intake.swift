import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorWire
import ZeroMQ

/// The intents PULL, read by worker 0 on its own thread: checks each message's frames and
/// session, rejects what is malformed, resolves the intents of worker 0's own sessions at once,
/// and hands the rest, without copying, to their sessions' workers. No thread stands between the
/// socket and the worker that resolves: with one worker, an intent is read, resolved and
/// published by one thread. (Until issue 16 an ingress thread of its own did this and woke a
/// worker for every intent: at 2,000 intents/s that thread cost about 0.1 of a core.) With
/// several, an intent of another worker's shard is resolved here too, in that worker's place,
/// while that worker sleeps with nothing handed to it waiting and the read found little
/// (``WorkerDesk``): at a moderate rate one thread does the work, under load each worker its own.
///
/// Backpressure: the hand-off to each other worker holds at most `handoffHighWaterMark`
/// bundles. When one is full, worker 0 keeps that bundle and stops reading the PULL (it goes on
/// with its own inbox) until the worker has taken it; meanwhile the PULL's queue fills to
/// `highWaterMark` per producer, TCP's window closes, and the producers' PUSH blocks. When
/// worker 0 itself is busy it does not read either. Nothing is dropped and memory stays bounded.
struct Intake: Sendable {
    let endpoints: [String]
    let workers: Int
    let maxMessageBytes: Int
    let highWaterMark: Int32
    let handoffHighWaterMark: Int32
    let counters: EngineCounters
    let bound: BindingRecord
    /// Secure mode: each intent's client (User-Id) must be allowed to publish to its session.
    let security: Security?
    /// Several instances: intents for sessions another instance serves go there
    /// (``ClusterLink``); nil: they are refused MOVED by the worker.
    var forwarding: PartitionOwnership? = nil
    let logger: Logger

    /// The worker whose thread reads the intents socket.
    static let reader = 0

    var admission: IntentAdmission {
        IntentAdmission(workers: workers, maxMessageBytes: maxMessageBytes, security: security, forwarding: forwarding)
    }

    struct Sockets {
        let pull: Socket
        /// Where the stop marker comes from (``Internal/ingressControl``).
        let control: Socket
        /// To each worker; nil for the reader itself.
        let workers: [Socket?]
        let limiter: LogLimiter
        /// DEALERs to the instances intents are forwarded to.
        let peers: ClusterPeers
    }

    /// An intent for the reader's own sessions: resolve it now.
    typealias Local = (_ session: String, _ sessionFrame: Message, _ payload: Message, _ client: String) throws -> Void

    /// Intents waiting to go to each other worker, handed over in bundles of `[kind]` and then
    /// `[session][Intent]` pairs: one inproc message (and at most one wake-up) per bundle.
    final class Bundles {
        private var pending: [[ZeroMQ.Message]]
        /// Frames of bundles sent, filled again by the next intents: an intent handed over is
        /// not two new objects.
        private var spare = SpareMessages()
        static let limit = 64
        /// Frames per intent: session and Intent, and in secure mode the client's name.
        let stride: Int
        private var full: Int { Self.limit * stride }

        /// Each worker's desk: counts every bundle sent (``WorkerDesk/send(_:)``).
        private let desks: [WorkerDesk]

        init(workers: Int, withClients: Bool, desks: [WorkerDesk]) {
            pending = Array(repeating: [], count: workers)
            stride = withClients ? 3 : 2
            self.desks = desks
        }

        /// Whether no intent waits to go to `worker`.
        func isEmpty(_ worker: Int) -> Bool { pending[worker].isEmpty }

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
            pending[worker].append(spare.message(moving: session))
            pending[worker].append(spare.message(moving: payload))
            if stride == 3 { pending[worker].append(try spare.message(copying: client ?? "")) }
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
            guard !pending[worker].isEmpty, let socket = sockets.workers[worker] else { return true }
            guard try desks[worker].send({ try Internal.trySendIntents(on: socket, pending[worker], stride: stride) })
            else { return false }
            spare.keep(pending[worker])
            pending[worker].removeAll(keepingCapacity: true)
            return true
        }
    }

    /// Binds the PULL and its control socket and connects to the other workers.
    func open(_ context: Context) throws -> Sockets {
        let pull = try Socket(context, type: .pull)
        try pull.set(.receiveHighWaterMark, highWaterMark)
        // libzmq drops a peer that sends more than this; anything between maxMessageBytes and it
        // is refused here with a rejection the producer can read.
        try pull.set(.maxMessageSize, Int64(max(maxMessageBytes * 4, 1 << 20)))
        bound.set(intents: try bindAll(pull, endpoints, "intents", security: security))
        let control = try Socket(context, type: .pull)
        try control.bind(Internal.ingressControl)
        let pushes = try (0..<workers).map { index -> Socket? in
            guard index != Self.reader else { return nil }
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, handoffHighWaterMark)
            try push.connect(Internal.worker(index))
            return push
        }
        return Sockets(
            pull: pull, control: control, workers: pushes, limiter: LogLimiter(logger: logger),
            peers: ClusterPeers(context: context, keys: security?.serverKeys))
    }

    /// Keeps worker 0's DEALERs to the peers it forwards fire-and-forget intents to
    /// (``ClusterPeers/keep(_:now:)``), so that a connection is made before the first intent for
    /// a peer. Called whenever worker 0 wakes.
    func keepPeers(_ sockets: Sockets) throws {
        guard let forwarding else { return }
        try sockets.peers.keep(forwarding.peerEndpoints, now: MonotonicClock.now())
    }

    /// Reads what the PULL holds (at most `limit` messages, and nothing while a bundle waits for
    /// a full worker), then hands the bundles over; returns whether some bundle still waits, and
    /// whether the PULL was read until it had nothing.
    func read(
        _ sockets: Sockets, _ bundles: Bundles, _ frames: inout [Message], limit: Int, desks: [WorkerDesk],
        publisher: Publisher, local: Local
    ) throws -> (backlog: Bool, drained: Bool) {
        var drained = false
        for index in 0..<limit {
            if bundles.hasFull { break }
            guard let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2) else {
                drained = true
                break
            }
            // Little waiting: the other workers' intents too are resolved here while they sleep.
            try handle(frames, count, sockets, bundles, publisher, local, desks: index < Self.inlineReads ? desks : [])
        }
        return (try !bundles.flushAll(sockets), drained)
    }

    /// Intents a read takes before those of the other workers' shards go to them again rather
    /// than being resolved here (``WorkerDesk``): a read that finds more waits behind its work.
    static let inlineReads = 4

    /// Stop intake: take what is already queued (waiting for the other workers' room as long as
    /// it takes: they keep working through their queues), close the PULL, then tell the other
    /// workers; the reader counts its own stop.
    func stop(
        _ sockets: Sockets, _ bundles: Bundles, _ frames: inout [Message], publisher: Publisher, local: Local
    ) throws {
        var room = Poller()
        for worker in sockets.workers.compactMap({ $0 }) { room.add(worker, for: .writable) }
        func handOver() throws {
            while !(try bundles.flushAll(sockets)) { try room.poll(timeout: .milliseconds(100)) }
        }
        while true {
            try handOver()
            guard let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2) else { break }
            try handle(frames, count, sockets, bundles, publisher, local, desks: [])
        }
        try handOver()
        sockets.pull.close()
        for worker in sockets.workers.compactMap({ $0 }) { try worker.send(Internal.stop) }
        logger.debug("intake stopped")
    }

    /// `desks`: the workers' desks if another worker's intent may be resolved here (empty: not).
    private func handle(
        _ frames: [Message], _ count: Int, _ sockets: Sockets, _ bundles: Bundles, _ publisher: Publisher,
        _ local: Local, desks: [WorkerDesk]
    ) throws {
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
                sockets, publisher)
        }
        if let sessionProblem { return try reject("", .invalidSession, sessionProblem, frames[0], sockets, publisher) }
        let client = security == nil ? nil : Security.clientName(of: frames[0])
        let worker: Int
        switch try admission.route(
            session: session, sessionFrame: frames[0], intent: frames[1], client: client, peers: sockets.peers)
        {
        case .refused(let code, let message): return try reject(session, code, message, frames[0], sockets, publisher)
        case .forwarded: return counters.forwardsSent.add()
        case .worker(let index): worker = index
        }
        counters.handedOver[worker].add()
        if worker == Self.reader { return try local(session, frames[0], frames[1], client ?? "") }
        if !desks.isEmpty, bundles.isEmpty(worker),
            try desks[worker].resolveIfIdle(
                session: session, frame: frames[0], payload: frames[1], client: client ?? "")
        {
            return
        }
        try bundles.add(frames[0], frames[1], client: client, for: worker, sockets)
    }

    private func reject(
        _ session: String, _ code: Navigator_V1_RejectCode, _ message: String, _ frame: Message, _ sockets: Sockets,
        _ publisher: Publisher
    ) throws {
        counters.refused(code, intent: true)
        let peer = peerKey(frame, "intents")
        if sockets.limiter.allow(peer) {
            logger.notice(
                "intent rejected at intake",
                metadata: [
                    "session": "\(LogText(session))", "code": "\(code.label)", "reason": "\(LogText(message))",
                    "peer": "\(LogText(peer))",
                ])
        }
        try publisher.rejection(session: session, intentID: "", source: "", code: code, message: message, sentAt: 0)
    }
}

/// The checks every fire-and-forget intent passes once its session id is known to be valid, on
/// whichever path it came: the intents socket (``Intake``) or a call in process (the requests
/// thread, for the engine's ``NavigatorPort``). One function, so the two paths cannot drift apart.
struct IntentAdmission: Sendable {
    let workers: Int
    let maxMessageBytes: Int
    /// Secure mode: the sender must be allowed to publish to the session.
    let security: Security?
    /// Several instances: where sessions served elsewhere go (nil: nowhere; the
    /// worker refuses them MOVED).
    let forwarding: PartitionOwnership?

    enum Decision: Equatable {
        /// Refused: nothing reaches a worker.
        case refuse(Navigator_V1_RejectCode, String)
        /// Another instance serves the session: forward it there, or, if the link to it is full,
        /// hand it to `fallback`, the session's worker here (which refuses it MOVED).
        case forward(endpoint: String, fallback: Int)
        /// Resolve it on the session's worker.
        case resolve(worker: Int)
    }

    /// What became of an intent (``route(session:sessionFrame:intent:client:peers:)``).
    enum Route: Equatable {
        case refused(Navigator_V1_RejectCode, String)
        /// Sent to the instance that serves its session.
        case forwarded
        /// To hand to this worker here (the caller counts it once it did).
        case worker(Int)
    }

    /// Admits an intent whose session id is valid, from `client` (its access-file name in secure
    /// mode): refused, forwarded to the instance that serves its session (a full link to it — that
    /// instance gone or overwhelmed — leaves it to its worker here, which refuses it MOVED), or
    /// for its worker.
    func route(
        session: String, sessionFrame: some FrameBytes, intent: some FrameBytes, client: String?, peers: ClusterPeers
    ) throws -> Route {
        switch admit(session: session, bytes: intent.withFrameBytes { $0.count }, client: client) {
        case .refuse(let code, let message):
            return .refused(code, message)
        case .forward(let endpoint, let fallback):
            let peer = try peers.socket(to: endpoint)
            if try ClusterLink.forward(intent: intent, session: sessionFrame, client: client ?? "", to: peer) {
                return .forwarded
            }
            return .worker(fallback)
        case .resolve(let index):
            return .worker(index)
        }
    }

    /// What to do with an intent of `bytes` bytes for `session` from `client` (its access-file
    /// name in secure mode).
    func admit(session: String, bytes: Int, client: String?) -> Decision {
        if bytes > maxMessageBytes {
            return .refuse(.tooLarge, "intent is \(bytes) bytes; expected at most \(maxMessageBytes)")
        }
        if let security, let refusal = security.refusal(of: .publish(session: session), by: client) {
            return .refuse(.forbidden, refusal)
        }
        let worker = SessionStore.shardIndex(of: session, count: workers)
        if let forwarding, let endpoint = forwarding.forwardEndpoint(of: session) {
            return .forward(endpoint: endpoint, fallback: worker)
        }
        return .resolve(worker: worker)
    }
}
