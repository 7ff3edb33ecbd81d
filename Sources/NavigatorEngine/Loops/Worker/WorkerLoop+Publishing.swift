import NavigatorCore
import NavigatorPort
import NavigatorWire
import Tracing
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
    /// `client`: who sent it (secure mode; "" otherwise), named in the audit records; `taken`:
    /// when its message was taken, before decoding (the trace's `navigator.receive`).
    func resolve(
        _ intent: Intent, client: String, taken: Int64? = nil, _ state: inout WorkerState, _ sockets: Sockets
    ) throws -> Resolved {
        let started = WallClock.now()
        var trace: IntentTrace?
        // A producer's sampled flag is followed within the budget: producers cannot make
        // navigatord trace every intent.
        if tracing, let tracer, !intent.traceparentSaysSampled || state.traceBudget.take(at: started) {
            trace = IntentTrace.begin(intent, session: intent.session, taken: taken ?? started, tracer: tracer)
        }
        if let trace, let taken { trace.child("navigator.receive", from: taken, to: started) }
        let (resolver, version) = state.maps.pick(intent.session)
        let change = SessionWork.resolve(
            intent, store: store, resolver: resolver, maxSessions: maxSessions, now: started,
            recording: recorder.capacity > 0, buffers: &state.buffers, batches: &state.batches)
        let resolvedAt = WallClock.now()
        // Not duplicates: their replay would not be one (the remembered ids are not kept).
        if let before = change.before, change.resolution.explanation.last?.step != .dedup {
            recorder.record(intent, before: before, at: started)
        }
        counters.recordLatency(nanoseconds: resolvedAt - started)
        if change.hadParked || !change.parked.isEmpty {
            state.noteParked(intent.session, change.parked, limit: resolver.options.maxParked)
        }
        counters.count(Navigator_V1_Outcome(change.resolution.outcome))
        for (batch, sentAt) in change.batches { try sockets.publisher.batch(batch, sentAt: sentAt) }
        let published = resolvedAt..<WallClock.now()
        account(
            change.resolution, own: change.own, source: counters.routes.source(of: intent), map: resolver.map,
            version: state.maps.counted(version), at: started, &state)
        if let trace {
            self.trace(trace, change, map: resolver.map, resolved: started..<resolvedAt, published: published, &state)
        }
        try sockets.publisher.audit(
            Self.audit(change.resolution, .resolution, change.own, client: client, map: version),
            sentAt: intent.sentAt)
        try publish(
            released: change.resolution.released, change.releasedBatches, session: intent.session, client: client,
            published: published, &state, sockets)
        return Resolved(resolution: change.resolution, batch: change.own, expiresAt: change.expiresAt)
    }

    /// A traced intent's spans after resolving: `navigator.resolve`, then as its outcome says —
    /// published (its ack awaited in the landing book), parked (until released or expired), or
    /// settled (ignored, rejected) — and its persisting awaited by the write-behind.
    func trace(
        _ trace: IntentTrace, _ change: SessionWork.IntentChange, map: RouteMap, resolved: Range<Int64>,
        published: Range<Int64>, _ state: inout WorkerState
    ) {
        let resolution = change.resolution
        let session = resolution.intent.session
        trace.resolved(
            resolution, route: RouteMetrics.route(of: resolution.intent, map: map),
            from: resolved.lowerBound, to: resolved.upperBound)
        let now = published.upperBound
        switch resolution.outcome {
        case .resolved, .refreshed:
            if let own = change.own {
                trace.published(
                    seq: own.seq, commands: own.commands.count, from: published.lowerBound, to: published.upperBound)
                state.landings.trace(trace, session: session, seq: own.seq)
            } else {
                trace.settle(at: now, landed: false, outcome: Navigator_V1_Outcome(resolution.outcome).label)
            }
        case .ignored:
            let shown = resolution.explanation.last(where: \.decisive)?.step == .alreadyShown
            trace.settle(at: now, landed: shown, outcome: "ignored")
        case .parked(let reason, _):
            if let redirect = change.own {  // a guard's redirect (the login screen, say)
                trace.child(
                    "navigator.publish", from: published.lowerBound, to: published.upperBound,
                    [
                        "navigator.seq": .int64(Int64(redirect.seq)),
                        "navigator.command_count": .int64(Int64(redirect.commands.count)), "navigator.redirect": true,
                    ])
            }
            trace.wait("navigator.park", from: now, ["navigator.park.reason": .string(reason.description)])
            if !state.parkedTraces.keep(
                trace, session: session, intent: resolution.intent,
                expiresAt: change.expiresAt > 0 ? change.expiresAt : .max / 2, at: now)
            {
                trace.span.attributes["navigator.trace.truncated"] = true
                trace.settle(at: now, landed: false, outcome: "parked")
            }
        case .rejected(let error):
            trace.settle(at: now, landed: false, outcome: "rejected", failure: error.message)
            return  // nothing changed, nothing to write
        }
        persistence.traced?.changed(session, by: trace, at: resolved.upperBound)
    }

    /// Accounts for each released intent: shown (its batch is out already, in `published`) or
    /// refused (a Rejection; after a reload, say, its screen may be gone), with its audit
    /// record.
    func publish(
        released: [Resolution], _ batches: [Batch?], session: String, client: String, published: Range<Int64>,
        _ state: inout WorkerState, _ sockets: Sockets
    ) throws {
        guard !released.isEmpty else { return }
        let now = WallClock.now()
        let (resolver, version) = state.maps.pick(session)  // what released them
        let counted = state.maps.counted(version)
        for (resolution, batch) in zip(released, batches) {
            let route = RouteMetrics.route(of: resolution.intent, map: resolver.map)
            let source = counters.routes.source(of: resolution.intent)
            // Released when the change was made, before its batches went out.
            let trace = releasedTrace(resolution.intent, session: session, at: published.lowerBound, &state)
            if case .rejected(let error) = resolution.outcome {
                // Counted once as parked when it came; now refused, not rejected a second time.
                counters.routes.count(.refused, route: route, map: counted, source: source, code: error.code.rawValue)
                counters.routes.notLanded(route: route, map: counted)
                let code = Navigator_V1_RejectCode(error.code)
                counters.refused(code, intent: false)  // counted as parked when it came
                trace?.settle(at: published.lowerBound, landed: false, outcome: "refused", failure: error.message)
                try sockets.publisher.rejection(
                    session: session, intentID: resolution.intent.id, source: resolution.intent.source, code: code,
                    message: "parked intent refused on release: \(error.message)", sentAt: resolution.intent.sentAt)
            } else {
                counters.released.add()  // its own outcome was counted when it parked
                counters.routes.count(.released, route: route, map: counted, source: source)
                trace?.endWaiting(at: published.lowerBound, ["navigator.park.result": "released"])
                if let batch {
                    let origin = Self.origin(resolution.intent.sentAt, now: now)
                    counters.routes.published(route: route, after: now - origin)
                    state.landings.published(
                        session: session, seq: batch.seq, route: route, map: counted, origin: origin,
                        metrics: counters.routes)
                    if let trace {
                        trace.published(
                            seq: batch.seq, commands: batch.commands.count, from: published.lowerBound,
                            to: published.upperBound)
                        state.landings.trace(trace, session: session, seq: batch.seq)
                    }
                } else if resolution.explanation.last(where: \.decisive)?.step == .alreadyShown {
                    counters.routes.landed(route: route, map: counted, after: nil)  // onto a screen already shown
                    trace?.settle(at: now, landed: true, outcome: "released")
                } else {
                    trace?.settle(at: now, landed: false, outcome: "released")
                }
            }
            if let trace { persistence.traced?.changed(session, by: trace, at: published.lowerBound) }
            try sockets.publisher.audit(
                Self.audit(resolution, .release, batch, client: client, map: version), sentAt: resolution.intent.sentAt)
        }
    }

    /// The trace of a parked intent leaving its session's list: the one kept since it parked,
    /// or (parked before a restart) a new one under its producer's span, marked resumed.
    func releasedTrace(_ intent: Intent, session: String, at now: Int64, _ state: inout WorkerState) -> IntentTrace? {
        guard tracing, let tracer else { return nil }
        if let kept = state.parkedTraces.take(session: session, intent: intent) { return kept }
        // Only an intent taken by an earlier run (not one this run chose not to trace, or could
        // not keep: the budget, the sampler, a full book).
        guard !intent.traceparent.isEmpty, intent.sentAt > 0, intent.sentAt < state.startedAt,
            !intent.traceparentSaysSampled || state.traceBudget.take(at: now),
            let trace = IntentTrace.begin(intent, session: session, taken: now, tracer: tracer)
        else { return nil }
        trace.span.attributes["navigator.resumed"] = true
        trace.span.attributes["navigator.route"] = RouteMetrics.route(
            of: intent, map: state.maps.pick(session).resolver.map)
        trace.span.attributes["navigator.outcome"] = "parked"
        return trace
    }

    /// An intent whose traceparent is not of W3C's form: it goes on without one (as W3C says),
    /// counted, and logged (a few a second per peer at most).
    func noteInvalidTraceparent(
        session: String, intentID: String, traceparent: String, peer: String, _ sockets: Sockets
    ) {
        counters.traceparentInvalid.add()
        if sockets.limiter.allow(peer) {
            logger.notice(
                "intent traceparent ignored",
                metadata: [
                    "session": "\(LogText(session))", "intent": "\(LogText(intentID))",
                    "traceparent": "\(LogText(traceparent))",
                    "reason": "expected 00-<32 lowercase hex>-<16 lowercase hex>-<2 lowercase hex>, ids not all zero",
                ])
        }
    }

    /// Counts an intent's outcome by route and source, and books its batch until a shell
    /// acknowledges it (``LandingBook``). `now`: when the intent was taken.
    /// `map`: the route map that decided; `version`: its version while a rollout splits sessions.
    func account(
        _ resolution: Resolution, own: Batch?, source: String, map: RouteMap, version: String?, at now: Int64,
        _ state: inout WorkerState
    ) {
        let routes = counters.routes
        let route = RouteMetrics.route(of: resolution.intent, map: map)
        switch resolution.outcome {
        case .resolved, .refreshed:
            if case .refreshed = resolution.outcome {
                routes.count(.refreshed, route: route, map: version, source: source)
            } else {
                routes.count(.resolved, route: route, map: version, source: source)
            }
            if let own {
                let origin = Self.origin(resolution.intent.sentAt, now: now)
                routes.published(route: route, after: WallClock.now() - origin)  // published just now
                state.landings.published(
                    session: resolution.intent.session, seq: own.seq, route: route, map: version, origin: origin,
                    metrics: routes)
            }
        case .ignored:
            routes.count(.ignored, route: route, map: version, source: source)
            // Already shown: the user is there. (A duplicate was settled when it first came.)
            if resolution.explanation.last(where: \.decisive)?.step == .alreadyShown {
                routes.landed(route: route, map: version, after: nil)
            }
        case .parked:
            routes.count(.parked, route: route, map: version, source: source)  // settled when released or expired
        case .rejected(let error):
            routes.count(.rejected, route: route, map: version, source: source, code: error.code.rawValue)
            routes.notLanded(route: route, map: version)
        }
    }

    /// Where an intent's time to publish and to land start: its sending, as the producer's
    /// clock says, unless it does not say or says later than `now` (by a second or more: clocks
    /// differ); then `now`.
    static func origin(_ sentAt: Int64, now: Int64) -> Int64 {
        sentAt > 0 && sentAt <= now + 1_000_000_000 ? sentAt : now
    }

    /// The audit record of a decision; `client` is whoever caused it (for a release: the sender
    /// of the intent or event that released it).
    static func audit(
        _ resolution: Resolution, _ kind: Navigator_V1_AuditKind, _ batch: Batch?,
        client: String, map version: String
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
        record.traceparent = resolution.intent.traceparent
        record.fallback = resolution.fallback ?? ""
        record.mapVersion = version
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
    func publish(
        expired parked: ParkedIntent, session: String, at now: Int64, _ state: inout WorkerState, _ sockets: Sockets
    ) throws {
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
        record.traceparent = parked.intent.traceparent
        record.mapVersion = state.maps.pick(session).version
        record.atUnixNanos = now
        try sockets.publisher.audit(record, sentAt: parked.intent.sentAt)
        releasedTrace(parked.intent, session: session, at: now, &state)?
            .settle(at: now, landed: false, outcome: "expired", failure: message)
    }
}
