import Logging
import NavigatorCore
import NavigatorWire
import Tracing
import ZeroMQ

/// Resolves the intents and client events of its shard of sessions, in arrival order per
/// session: assigns seqs, publishes batches, rejections and audit records, answers acknowledged
/// requests, and expires parked intents. Worker 0 also reads the intents socket (``Intake``).
struct WorkerLoop: SocketLoop {
    let index: Int
    let context: Context
    let commands: SharedSocket
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: EngineCounters
    let persistence: Persistence
    /// Follows made in process: the publisher hands them what it publishes.
    let follows: SessionFollows
    /// Sessions in memory at most: an intent or event that would create one more is refused.
    let maxSessions: Int
    /// Messages queued to this worker before the sender waits.
    let handoffHighWaterMark: Int32
    /// Worker 0's: the intents socket.
    let intake: Intake?
    /// Every worker's desk (``WorkerDesk``); this worker's is `desks[index]`.
    let desks: [WorkerDesk]
    /// Where spans of traced intents go (``IntentTrace``); nil: none are traced.
    let tracer: (any Tracer)?
    /// Whether `tracer` is there (checked as the loop opens), asked for every intent: asking the
    /// optional existential itself copies it, traced or not.
    let tracing: Bool
    /// Intents traced a second for their producer's sampled flag, on all workers together.
    let maxTracedIntentsPerSecond: Int
    /// This worker's part of the flight recorder (routes_impact replays it).
    let recorder: FlightRecorder
    let workers: Int
    let supervisor: Supervisor
    let logger: Logger
    /// Stop markers to wait for: from the intake (worker 0's own, counted when it stops) and
    /// from the requests thread.
    let producers = 2

    var name: String { "nav-worker-\(index)" }

    struct Sockets {
        let inbox: Socket
        /// To the flush thread, which makes a reply's session durable and sends the reply on.
        let replies: Socket
        let publisher: Publisher
        let limiter: LogLimiter
        let intake: Intake.Sockets?
    }

    func open() throws -> Sockets {
        precondition(tracing == (tracer != nil), "a worker's tracing flag must say whether it has a tracer")
        let inbox = try Socket(context, type: .pull)
        try inbox.set(.receiveHighWaterMark, handoffHighWaterMark)
        try inbox.bind(Internal.worker(index))
        // Unbounded, and need not be: one reply per acknowledged request, and those are bounded
        // by the workers' queues (a full one answers OVERLOADED). A mark here could close a
        // circle of waits: requests -> worker -> flush -> requests.
        let replies = try Socket(context, type: .push)
        try replies.set(.sendHighWaterMark, 0)
        try replies.connect(Internal.acks)
        return Sockets(
            inbox: inbox, replies: replies,
            publisher: try Publisher(
                context: context, commands: commands, follows: follows, counters: counters, epoch: store.epoch),
            limiter: LogLimiter(logger: logger), intake: try intake?.open(context))
    }

    /// The state a worker starts with.
    private func initialState() -> WorkerState {
        var state = WorkerState(
            maps: resolvers.snapshot,
            traceBudget: TraceBudget(perSecond: max(1, maxTracedIntentsPerSecond / max(1, workers))))
        // Sessions of this shard with parked intents, for the expiry pass (due at once: their
        // times are read when the pass unpacks them).
        state.parkedSessions = store.shards[index].records.withLock { records in
            records.table.filter { $0.value.parkedCount > 0 }.mapValues { _ in 0 }
        }
        return state
    }

    func run(_ sockets: Sockets) throws {
        let desk = desks[index]
        // Handed to the desk as it is made: a copy kept in a local of this function lived as long
        // as the loop, and with it the first table of parked sessions — after a restart one entry
        // for each session with an intent parked, some 400 KB a worker at 20,000 sessions, held at
        // rest long after the expiry pass emptied the desk's copy (heaptrack, BENCHMARKS.md).
        desk.open(WorkerDesk.Held(state: initialState(), sockets: sockets, loop: self))
        defer { desk.close() }
        var frames: [Message] = []
        var stops = 0
        // On the monotonic clock: a wall clock stepped back would hold the sweeps off for the
        // length of the step (and past 24.9 days made a wait no Int32 holds).
        var nextExpiry = MonotonicClock.now() + Self.expiryInterval
        // Worker 0: the intents socket, its control, the other workers' bundles.
        var taking = sockets.intake
        let bundles = Intake.Bundles(
            workers: intake?.workers ?? 0, withClients: intake?.security != nil, desks: desks)
        var backlog = false  // a bundle waits for a worker whose queue is full
        var intakeFrames: [Message] = []
        // Waiting, usually: one poll(2) of the sockets' descriptors, and only the sockets that
        // fired are read (``ReadinessPoll``: zmq_poll asks each socket before and after).
        // Indices: the inbox, then worker 0's intents control and PULL.
        var ready = try ReadinessPoll([sockets.inbox] + (taking.map { [$0.control, $0.pull] } ?? []))
        // While a full bundle waits, zmq_poll: for room at its worker as well.
        var poller = Poller()
        var polled: [Int] = []  // the workers `poller` was made for
        do {
            while stops < producers {
                let full = taking == nil ? [] : bundles.fullWorkers
                var wait = max(0, nextExpiry - MonotonicClock.now())
                if backlog { wait = min(wait, 1_000_000) }  // offer the waiting bundles again soon
                let milliseconds = Int32((wait + 999_999) / 1_000_000)
                let readInbox: Bool
                let readControl: Bool
                if full.isEmpty {
                    try ready.wait(milliseconds: milliseconds)
                    readInbox = ready.fired(0)
                    readControl = taking != nil && ready.fired(1)
                } else {
                    if poller.count == 0 || polled != full, let taking {
                        // A full bundle waits: read no intents (the PULL fills, producers
                        // block) until its worker has room.
                        poller = Poller()
                        poller.add(sockets.inbox)
                        poller.add(taking.control)
                        for worker in full { poller.add(taking.workers[worker]!, for: .writable) }
                        polled = full
                    }
                    try poller.poll(timeout: .milliseconds(milliseconds))
                    readInbox = true
                    readControl = poller.events(at: 1).contains(.readable)
                }
                // Awake: the desk is this worker's until it waits again (worker 0 resolves
                // none of this shard's intents meanwhile).
                try desk.withHeld { (held) throws in
                    try supervisor.checkInjected(name)
                    if resolvers.generation != held.state.maps.generation { held.state.maps = resolvers.snapshot }
                    if let intake, let open = taking {
                        func local(_ session: String, _ frame: Message, _ payload: Message, _ client: String) throws {
                            counters.handled[index].add()
                            try handleIntent(
                                session: session, payload: payload, from: frame, client: client, &held.state, sockets)
                        }
                        if readControl, try open.control.receiveMultipart(into: &intakeFrames, wait: false) != nil {
                            try intake.stop(open, bundles, &intakeFrames, publisher: sockets.publisher, local: local)
                            taking = nil
                            stops += 1
                            ready = try ReadinessPoll([sockets.inbox])  // the PULL is closed
                        } else {
                            try intake.keepPeers(open)
                            if readControl { ready.read(1, drained: true) }
                            // A bundle still waiting (`backlog`) is offered again by a read.
                            if backlog || !full.isEmpty || ready.fired(2) {
                                let read = try intake.read(
                                    open, bundles, &intakeFrames, limit: 1024, desks: desks,
                                    publisher: sockets.publisher,
                                    local: local)
                                backlog = read.backlog
                                ready.read(2, drained: read.drained)
                            }
                        }
                    }
                    var drained = !readInbox
                    for _ in 0..<(readInbox ? 1024 : 0) {
                        guard let count = try sockets.inbox.receiveMultipart(into: &frames, wait: false) else {
                            drained = true
                            break
                        }
                        switch Internal.kind(of: frames, count: count, at: .worker) {
                        case .stop:
                            stops += 1
                        case .intents(let intents, let stride):
                            for intent in 0..<intents {
                                counters.handled[index].add()
                                let session = frames[1 + stride * intent]
                                try handleIntent(
                                    session: session.string, payload: frames[2 + stride * intent], from: session,
                                    client: stride == 3 ? frames[3 + stride * intent].string : "", &held.state, sockets)
                            }
                            desk.noteTaken()
                        case .request:
                            counters.handled[index].add()
                            try handleRequest(frames, &held.state, sockets)
                        default:
                            Internal.unexpected(count, at: .worker, counters: counters, logger: logger)
                        }
                    }
                    if readInbox { ready.read(0, drained: drained) }
                    if MonotonicClock.now() >= nextExpiry {
                        try expire(&held.state, sockets)
                        held.state.landings.sweep(now: WallClock.now(), metrics: counters.routes)
                        if tracing { held.state.parkedTraces.sweep(now: WallClock.now()) }
                        nextExpiry = MonotonicClock.now() + Self.expiryInterval
                    }
                    try sockets.publisher.flush()  // nothing more to read: hand over what waits
                }
            }
            // What is still open is settled, so that no trace is left without its intent span.
            try desk.withHeld { (held) throws in
                held.state.parkedTraces.settleAll(at: WallClock.now())
                held.state.landings.settleTraces(at: WallClock.now())
                try sockets.publisher.stop()
                try sockets.replies.send(Internal.stop)
            }
            logger.debug("worker stopped", metadata: ["worker": "\(index)"])
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("worker ended by context shutdown", metadata: ["worker": "\(index)"])
        }
    }

    static let expiryInterval: Int64 = 100_000_000

    struct WorkerState {
        /// The route maps: the one in use, and a rollout's candidate for its share of sessions
        /// (``ResolverHolder/Snapshot/pick(_:)``).
        var maps: ResolverHolder.Snapshot
        /// Sessions with parked intents, and when the first of them is due to expire (unix ns;
        /// 0: at the next pass, for a session over its limit of parked intents).
        var parkedSessions: [String: Int64] = [:]
        /// Published batches no shell has acknowledged yet (landing ratio by route).
        var landings = LandingBook()
        /// The open traces of parked intents.
        var parkedTraces = ParkedTraces()
        /// Intents traced for their producer's sampled flag, at most so many a second.
        var traceBudget: TraceBudget
        /// When this worker started: a parked intent sent before had its trace in another run.
        let startedAt = WallClock.now()
        /// The arrays resolutions are built in, handed back once an intent is published
        /// (``ResolutionBuffers``).
        var buffers = ResolutionBuffers()
        /// The array an intent's batches are listed in (``SessionWork/resolve(_:store:resolver:maxSessions:now:recording:buffers:batches:)``):
        /// one for every intent, not one each.
        var batches: [SessionWork.Publishable] = []

        /// Takes back a published intent's arrays for the next one (its batches share its
        /// commands, and go first: the list of them emptied, its room kept).
        mutating func recycle(_ resolved: inout Resolved) {
            resolved.batch = nil
            batches.removeAll(keepingCapacity: true)
            buffers.recycle(&resolved.resolution)
        }

        mutating func noteParked(_ session: String, _ parked: [ParkedIntent], limit: Int) {
            if parked.isEmpty {
                parkedSessions[session] = nil
            } else {
                parkedSessions[session] = parked.count > limit ? 0 : parked.lazy.map(\.expiresAt).min()!
            }
        }
    }
}

extension WorkerLoop {
    /// An intent of this worker's shard that worker 0 resolves on its own thread, under this
    /// worker's desk (``WorkerDesk/resolveIfIdle(session:frame:payload:client:)``): published at
    /// once, since this worker is asleep and would not flush its publisher before it wakes.
    func resolveInline(
        session: String, frame: Message, payload: Message, client: String, _ state: inout WorkerState,
        _ sockets: Sockets
    ) throws {
        if resolvers.generation != state.maps.generation { state.maps = resolvers.snapshot }
        counters.handled[index].add()
        counters.resolvedByReader.add()
        try handleIntent(session: session, payload: payload, from: frame, client: client, &state, sockets)
        try sockets.publisher.flush()
    }

    /// A fire-and-forget intent from the intents socket.
    func handleIntent(
        session: String, payload: Message, from frame: Message, client: String, _ state: inout WorkerState,
        _ sockets: Sockets
    ) throws {
        let taken = WallClock.now()
        let intent: Intent
        do throws(WireError) {
            // Read where libzmq received it, straight into an Intent (no frame copy, no message).
            let read = try payload.withUnsafeBytes { (bytes) throws(WireError) in
                try IntentReader.read(bytes, session: session)
            }
            intent = read.intent
            if let ignored = read.ignoredTraceparent {
                noteInvalidTraceparent(
                    session: read.session, intentID: intent.id, traceparent: ignored, peer: peerKey(frame, "intents"),
                    sockets)
            }
        } catch {
            // Bytes that are not the message, or a message that contradicts itself or its frame.
            return try reject(
                session: session, intentID: "", source: "", Navigator_V1_RejectCode(error.code), error.message,
                peer: peerKey(frame, "intents"), sockets)
        }
        var outcome = try resolve(intent, client: client, taken: taken, &state, sockets)
        if case .rejected(let error) = outcome.resolution.outcome {
            try reject(
                session: session, intentID: intent.id, source: intent.source, Navigator_V1_RejectCode(error.code),
                error.message, peer: peerKey(frame, "intents"), sockets, counted: true)
        }
        state.recycle(&outcome)
    }
}
