import Logging
import NavigatorCore
import NavigatorWire
import ZeroMQ

/// Resolves the intents and client events of its shard of sessions, in arrival order per
/// session: assigns seqs, publishes batches, rejections and audit records, answers acknowledged
/// requests, and expires parked intents.
struct WorkerLoop: SocketLoop {
    let index: Int
    let context: Context
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: ServiceCounters
    let persistence: Persistence
    /// Sessions in memory at most: an intent or event that would create one more is refused.
    let maxSessions: Int
    /// Messages queued to this worker (and from it to egress) before the sender waits.
    let handoffHighWaterMark: Int32
    let supervisor: Supervisor
    let logger: Logger
    /// Stop markers to wait for: from ingress and from the requests thread.
    let producers = 2

    var name: String { "nav-worker-\(index)" }

    struct Sockets {
        let inbox: Socket
        /// To the flush thread, which makes a reply's session durable and sends the reply on.
        let replies: Socket
        let publisher: Publisher
        let limiter: LogLimiter
    }

    func open() throws -> Sockets {
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
                context: context, counters: counters, epoch: store.epoch, highWaterMark: handoffHighWaterMark),
            limiter: LogLimiter(logger: logger))
    }

    func run(_ sockets: Sockets) throws {
        let initial = resolvers.snapshot
        var state = WorkerState(resolver: initial.resolver, generation: initial.generation)
        // Sessions of this shard with parked intents, for the expiry pass (due at once: their
        // times are read when the pass unpacks them).
        state.parkedSessions = store.shards[index].records.withLock { records in
            records.filter { $0.value.parkedCount > 0 }.mapValues { _ in 0 }
        }
        var poller = Poller()
        poller.add(sockets.inbox)
        var frames: [Message] = []
        var stops = 0
        var nextExpiry = WallClock.now() + Self.expiryInterval
        do {
            while stops < producers {
                let wait = max(0, nextExpiry - WallClock.now())
                try poller.poll(timeout: .nanoseconds(wait))
                try supervisor.checkInjected(name)
                if resolvers.generation != state.generation {
                    let latest = resolvers.snapshot
                    state.resolver = latest.resolver
                    state.generation = latest.generation
                }
                for _ in 0..<1024 {
                    guard let count = try sockets.inbox.receiveMultipart(into: &frames, wait: false) else { break }
                    switch Internal.kind(of: frames, count: count, at: .worker) {
                    case .stop:
                        stops += 1
                    case .intents(let pairs):
                        for pair in 0..<pairs {
                            counters.handled[index].add()
                            let session = frames[1 + 2 * pair]
                            try handleIntent(
                                session: session.string, payload: frames[2 + 2 * pair].bytes, from: session, &state,
                                sockets)
                        }
                    case .request:
                        counters.handled[index].add()
                        try handleRequest(frames, &state, sockets)
                    default:
                        Internal.unexpected(count, at: .worker, counters: counters, logger: logger)
                    }
                }
                if WallClock.now() >= nextExpiry {
                    try expire(&state, sockets)
                    nextExpiry = WallClock.now() + Self.expiryInterval
                }
                try sockets.publisher.flush()  // nothing more to read: hand over what waits
            }
            try sockets.publisher.stop()
            try sockets.replies.send(Internal.stop)
            logger.debug("worker stopped", metadata: ["worker": "\(index)"])
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("worker ended by context shutdown", metadata: ["worker": "\(index)"])
        }
    }

    static let expiryInterval: Int64 = 100_000_000

    struct WorkerState {
        var resolver: Resolver
        var generation: Int
        /// Sessions with parked intents, and when the first of them is due to expire (unix ns;
        /// 0: at the next pass, for a session over its limit of parked intents).
        var parkedSessions: [String: Int64] = [:]

        mutating func noteParked(_ session: String, _ parked: [ParkedIntent], limit: Int) {
            if parked.isEmpty {
                parkedSessions[session] = nil
            } else {
                parkedSessions[session] = parked.count > limit ? 0 : parked.lazy.map(\.expiresAt).min()!
            }
        }
    }

    // MARK: Intents

    /// A fire-and-forget intent from ingress.
    private func handleIntent(
        session: String, payload: [UInt8], from frame: Message, _ state: inout WorkerState, _ sockets: Sockets
    ) throws {
        let intent: Intent
        do {
            intent = try Navigator_V1_Intent(serializedBytes: payload).core(session: session)
        } catch let error as WireError {
            return try reject(
                session: session, intentID: "", source: "", Navigator_V1_RejectCode(error.code), error.message,
                peer: peerKey(frame, "intents"), sockets)
        } catch {
            return try reject(
                session: session, intentID: "", source: "", .malformed,
                "intent is not a valid navigator.v1.Intent message: \(error)", peer: peerKey(frame, "intents"), sockets)
        }
        let outcome = try resolve(intent, &state, sockets)
        if case .rejected(let error) = outcome.resolution.outcome {
            try reject(
                session: session, intentID: intent.id, source: intent.source, Navigator_V1_RejectCode(error.code),
                error.message, peer: peerKey(frame, "intents"), sockets, counted: true)
        }
    }

    struct Resolved {
        var resolution: Resolution
        var batch: Navigator_V1_CommandBatch?
        var expiresAt: Int64
    }

    /// Resolves under the shard's lock (``SessionWork``), then publishes the batches (the
    /// intent's, then those of the parked intents it released), the audit records, and counts.
    private func resolve(_ intent: Intent, _ state: inout WorkerState, _ sockets: Sockets) throws -> Resolved {
        let started = WallClock.now()
        let resolver = state.resolver
        let change = SessionWork.resolve(
            intent, store: store, resolver: resolver, maxSessions: maxSessions, now: started)
        counters.recordLatency(nanoseconds: WallClock.now() - started)
        state.noteParked(intent.session, change.parked, limit: resolver.options.maxParked)
        counters.count(Navigator_V1_Outcome(change.resolution.outcome))
        for (batch, sentAt) in change.batches { try sockets.publisher.batch(batch, sentAt: sentAt) }
        try sockets.publisher.audit(Self.audit(change.resolution, .resolution, change.own), sentAt: intent.sentAt)
        try publish(released: change.resolution.released, change.releasedBatches, session: intent.session, sockets)
        return Resolved(resolution: change.resolution, batch: change.own, expiresAt: change.expiresAt)
    }

    /// Accounts for each released intent: shown (its batch is out already) or refused (a
    /// Rejection; after a reload, say, its screen may be gone), with its audit record.
    private func publish(
        released: [Resolution], _ batches: [Navigator_V1_CommandBatch?], session: String, _ sockets: Sockets
    ) throws {
        for (resolution, batch) in zip(released, batches) {
            if case .rejected(let error) = resolution.outcome {
                let code = Navigator_V1_RejectCode(error.code)
                counters.refused(code, intent: false)  // counted as parked when it came
                try sockets.publisher.rejection(
                    session: session, intentID: resolution.intent.id, source: resolution.intent.source, code: code,
                    message: "parked intent refused on release: \(error.message)", sentAt: resolution.intent.sentAt)
            } else {
                counters.released.add()  // its own outcome was counted when it parked
            }
            try sockets.publisher.audit(Self.audit(resolution, .release, batch), sentAt: resolution.intent.sentAt)
        }
    }

    static func audit(_ resolution: Resolution, _ kind: Navigator_V1_AuditKind, _ batch: Navigator_V1_CommandBatch?)
        -> Navigator_V1_AuditRecord
    {
        var record = Navigator_V1_AuditRecord()
        record.kind = kind
        record.session = resolution.intent.session
        record.intentID = resolution.intent.id
        record.source = resolution.intent.source
        record.outcome = Navigator_V1_Outcome(resolution.outcome)
        record.seq = batch?.seq ?? 0
        record.commandCount = UInt32(resolution.commands.count)
        record.summary = resolution.summary
        if case .rejected(let error) = resolution.outcome { record.rejectCode = Navigator_V1_RejectCode(error.code) }
        record.atUnixNanos = WallClock.now()
        return record
    }

    private func reject(
        session: String, intentID: String, source: String, _ code: Navigator_V1_RejectCode, _ message: String,
        peer: String, _ sockets: Sockets, counted: Bool = false
    ) throws {
        counters.refused(code, intent: !counted)
        if sockets.limiter.allow(peer) {
            logger.notice(
                "intent rejected",
                metadata: [
                    "session": "\(LogText(session))", "intent": "\(LogText(intentID))", "code": "\(code.label)",
                    "reason": "\(LogText(message))", "peer": "\(LogText(peer))",
                ])
        }
        try sockets.publisher.rejection(
            session: session, intentID: intentID, source: source, code: code, message: message, sentAt: 0)
    }

    // MARK: Acknowledged requests

    private func handleRequest(_ frames: [Message], _ state: inout WorkerState, _ sockets: Sockets) throws {
        var reply = Navigator_V1_Reply()
        var durableSession: String?
        do {
            let request = try Navigator_V1_Request(serializedBytes: frames[3].bytes)
            reply.requestID = request.requestID
            switch request.kind {
            case .intent(let wire):
                try answer(intent: wire, &reply, &state, sockets)
                durableSession = wire.session
            case .clientEvent(let wire):
                try answer(event: wire, &reply, &state, sockets)
                durableSession = wire.session
            default:
                counters.unexpectedInternal.add()
                counters.refused(.internal, intent: false)
                reply.rejected = .rejection(
                    .internal, "this request kind is not handled by workers; nothing was changed")
            }
        } catch {
            counters.refused(.malformed, intent: false)
            reply.rejected = .rejection(.malformed, "request is not a valid navigator.v1.Request message: \(error)")
        }
        if case .rejected(let rejected)? = reply.kind, sockets.limiter.allow(peerKey(frames[1], "requests")) {
            logger.notice(
                "request rejected",
                metadata: [
                    "request": "\(LogText(reply.requestID))", "code": "\(rejected.code.label)",
                    "reason": "\(LogText(rejected.message))",
                ])
        }
        try sockets.publisher.flush()  // the batch goes out no later than the reply
        // Durable before the reply (the client may act on it): the flush thread writes the
        // session, then sends the reply on. No SQLite wait happens on this thread.
        try Internal.sendDurableReply(
            on: sockets.replies, routingID: frames[1], delimiter: frames[2], session: durableSession ?? "",
            reply: try reply.serializedBytes())
    }

    private func answer(
        intent wire: Navigator_V1_Intent, _ reply: inout Navigator_V1_Reply, _ state: inout WorkerState,
        _ sockets: Sockets
    ) throws {
        let intent: Intent
        do {
            intent = try wire.core()
        } catch {
            counters.refused(Navigator_V1_RejectCode(error.code), intent: true)
            reply.rejected = .rejection(error)
            return
        }
        let resolved = try resolve(intent, &state, sockets)
        reply.explanationSteps = resolved.resolution.explanation.map(Navigator_V1_ExplanationStep.init)
        switch resolved.resolution.outcome {
        case .resolved, .refreshed:
            reply.resolved = .with {
                $0.outcome = Navigator_V1_Outcome(resolved.resolution.outcome)
                if let batch = resolved.batch { $0.batch = batch }
            }
        case .ignored(let reason):
            reply.ignored = .with { $0.reason = reason }
        case .parked(let reason, _):
            reply.parked = .with {
                $0.reason = reason.description
                $0.expiresAtUnixNanos = resolved.expiresAt
                if let batch = resolved.batch { $0.redirect = batch }
            }
        case .rejected(let error):
            counters.refused(Navigator_V1_RejectCode(error.code), intent: false)  // counted with its outcome
            reply.rejected = .rejection(error)
        }
    }

    private func answer(
        event wire: Navigator_V1_ClientEvent, _ reply: inout Navigator_V1_Reply, _ state: inout WorkerState,
        _ sockets: Sockets
    ) throws {
        counters.clientEvents.add()
        // The session id was checked where the request came in (the requests thread).
        let event: ClientEvent
        do {
            event = try wire.core()
        } catch {
            counters.refused(Navigator_V1_RejectCode(error.code), intent: false)
            reply.rejected = .rejection(error)
            return
        }
        let resolver = state.resolver
        let change = SessionWork.apply(
            event, session: wire.session, lastSeq: wire.lastSeq, epoch: wire.epoch, store: store, resolver: resolver,
            maxSessions: maxSessions, now: WallClock.now())
        if let error = change.result.error {
            let code = Navigator_V1_RejectCode(error.code)
            counters.refused(code, intent: false)
            let stale = error.code == .staleEvent
            reply.rejected = .rejection(
                code, error.message, seq: stale ? change.seq : 0, epoch: stale ? store.epoch : 0)
            return
        }
        state.noteParked(wire.session, change.parked, limit: resolver.options.maxParked)
        for (batch, sentAt) in change.batches { try sockets.publisher.batch(batch, sentAt: sentAt) }
        try publish(released: change.result.released, change.releasedBatches, session: wire.session, sockets)
        reply.eventApplied = .with {
            $0.seq = change.seq
            $0.epoch = store.epoch
            $0.releasedIntentIds = change.result.released.filter { $0.rejection == nil }.map(\.intent.id)
        }
    }

    // MARK: Expiry

    private func expire(_ state: inout WorkerState, _ sockets: Sockets) throws {
        guard !state.parkedSessions.isEmpty else { return }
        let now = WallClock.now()
        let resolver = state.resolver
        // Only sessions with an intent due (or too many parked) are touched.
        let due = state.parkedSessions.filter { $0.value <= now }.keys
        for session in due {
            let (expired, parked) = SessionWork.expire(session, store: store, resolver: resolver, now: now)
            state.noteParked(session, parked, limit: resolver.options.maxParked)
            for parked in expired {
                counters.expired.add()
                counters.refused(.expired, intent: false)  // counted as parked when it came
                let message = ExpiredIntent(
                    intentID: parked.intent.id, source: parked.intent.source, reason: parked.reason.description,
                    parkedAt: parked.parkedAt, expiredAt: now
                ).rejectionMessage
                try sockets.publisher.rejection(
                    session: session, intentID: parked.intent.id, source: parked.intent.source, code: .expired,
                    message: message,
                    sentAt: parked.intent.sentAt)
                var record = Navigator_V1_AuditRecord()
                record.kind = .expiry
                record.session = session
                record.intentID = parked.intent.id
                record.source = parked.intent.source
                record.outcome = .rejected
                record.rejectCode = .expired
                record.summary = message
                record.atUnixNanos = now
                try sockets.publisher.audit(record, sentAt: parked.intent.sentAt)
            }
        }
    }
}
