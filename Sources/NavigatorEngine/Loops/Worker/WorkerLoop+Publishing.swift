import NavigatorCore
import NavigatorPort
import NavigatorWire
import ZeroMQ

// Publishing: what a worker publishes (``Publisher``: onto the commands XPUB, and to the session's
// follows in process) for a change SessionWork made — the batches, the
// rejections, the audit records — and what it counts.
extension WorkerLoop {
    struct Resolved {
        var resolution: Resolution
        var batch: Batch?
        var expiresAt: Int64
    }

    /// Resolves under the shard's lock (``SessionWork``), then publishes the batches (the
    /// intent's, then those of the parked intents it released), the audit records, and counts.
    /// `client`: who sent it (secure mode; "" otherwise), named in the audit records.
    func resolve(_ intent: Intent, client: String, _ state: inout WorkerState, _ sockets: Sockets) throws -> Resolved {
        let started = WallClock.now()
        let resolver = state.resolver
        let change = SessionWork.resolve(
            intent, store: store, resolver: resolver, maxSessions: maxSessions, now: started)
        counters.recordLatency(nanoseconds: WallClock.now() - started)
        state.noteParked(intent.session, change.parked, limit: resolver.options.maxParked)
        counters.count(Navigator_V1_Outcome(change.resolution.outcome))
        for (batch, sentAt) in change.batches { try sockets.publisher.batch(batch, sentAt: sentAt) }
        try sockets.publisher.audit(
            Self.audit(change.resolution, .resolution, change.own, client: client), sentAt: intent.sentAt)
        try publish(
            released: change.resolution.released, change.releasedBatches, session: intent.session, client: client,
            sockets)
        return Resolved(resolution: change.resolution, batch: change.own, expiresAt: change.expiresAt)
    }

    /// Accounts for each released intent: shown (its batch is out already) or refused (a
    /// Rejection; after a reload, say, its screen may be gone), with its audit record.
    func publish(
        released: [Resolution], _ batches: [Batch?], session: String, client: String,
        _ sockets: Sockets
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
            try sockets.publisher.audit(
                Self.audit(resolution, .release, batch, client: client), sentAt: resolution.intent.sentAt)
        }
    }

    /// The audit record of a decision; `client` is whoever caused it (for a release: the sender
    /// of the intent or event that released it).
    static func audit(
        _ resolution: Resolution, _ kind: Navigator_V1_AuditKind, _ batch: Batch?,
        client: String
    ) -> Navigator_V1_AuditRecord {
        var record = Navigator_V1_AuditRecord()
        record.client = client
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

    func reject(
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

    /// Refuses an expired parked intent: its Rejection (EXPIRED) and its audit record.
    func publish(expired parked: ParkedIntent, session: String, at now: Int64, _ sockets: Sockets) throws {
        let message = ExpiredIntent(
            intentID: parked.intent.id, source: parked.intent.source, reason: parked.reason,
            parkedAt: parked.parkedAt, expiredAt: now
        ).rejectionMessage
        try sockets.publisher.rejection(
            session: session, intentID: parked.intent.id, source: parked.intent.source, code: .expired,
            message: message, sentAt: parked.intent.sentAt)
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
