import NavigatorCore
import NavigatorPort
import NavigatorWire
import ZeroMQ

// Replies: acknowledged intents and client events, forwarded by the requests thread; the reply
// goes to the flush thread, which makes the session durable and sends it on.
extension WorkerLoop {
    func handleRequest(_ frames: [Message], _ state: inout WorkerState, _ sockets: Sockets) throws {
        var reply = Navigator_V1_Reply()
        var durableSession: String?
        // Secure mode: the client, as the requests thread checked it.
        let client = frames[4].string
        do {
            let request = try Navigator_V1_Request(serializedBytes: frames[3].bytes)
            reply.requestID = request.requestID
            switch request.kind {
            case .intent(let wire):
                try answer(intent: wire, client: client, &reply, &state, sockets)
                durableSession = wire.session
            case .clientEvent(let wire):
                try answer(event: wire, client: client, &reply, &state, sockets)
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
        if case .rejected(let rejected)? = reply.kind, rejected.code == .moved {
            // Another instance's session: nothing here to write; say which instance serves it.
            if let session = durableSession { reply.rejected.owner = store.owner(of: session) ?? "" }
            durableSession = nil
        }
        try sockets.publisher.flush()  // the batch goes out no later than the reply
        // Durable before the reply (the client may act on it): the flush thread writes the
        // session, then sends the reply on. No SQLite wait happens on this thread.
        let bytes: [UInt8] = try reply.serializedBytes()
        // Counted before it goes: the flush thread takes it off as it sends it on.
        counters.repliesWaiting.add()
        try Internal.sendDurableReply(
            on: sockets.replies, routingID: frames[1], delimiter: frames[2], session: durableSession ?? "",
            reply: bytes)
    }

    func answer(
        intent wire: Navigator_V1_Intent, client: String, _ reply: inout Navigator_V1_Reply,
        _ state: inout WorkerState,
        _ sockets: Sockets
    ) throws {
        let taken = WallClock.now()
        let intent: Intent
        do {
            intent = try wire.core()
            if wire.hasInvalidTraceparent {
                noteInvalidTraceparent(
                    session: wire.session, intentID: wire.id, traceparent: wire.traceparent,
                    peer: client.isEmpty ? "requests" : client, sockets)
            }
        } catch {
            counters.refused(Navigator_V1_RejectCode(error.code), intent: true)
            reply.rejected = .rejection(error)
            return
        }
        var resolved = try resolve(intent, client: client, taken: taken, &state, sockets)
        defer { state.recycle(&resolved) }
        reply.explanationSteps = resolved.resolution.explanation.map(Navigator_V1_ExplanationStep.init)
        switch resolved.resolution.outcome {
        case .resolved, .refreshed:
            reply.resolved = .with {
                $0.outcome = Navigator_V1_Outcome(resolved.resolution.outcome)
                if let batch = resolved.batch { $0.batch = batch.message }
            }
        case .ignored(let reason):
            reply.ignored = .with { $0.reason = reason }
        case .parked(let reason, _):
            reply.parked = .with {
                $0.reason = reason.description
                $0.expiresAtUnixNanos = resolved.expiresAt
                if let batch = resolved.batch { $0.redirect = batch.message }
            }
        case .rejected(let error):
            counters.refused(Navigator_V1_RejectCode(error.code), intent: false)  // counted with its outcome
            reply.rejected = .rejection(error)
        }
    }

    func answer(
        event wire: Navigator_V1_ClientEvent, client: String, _ reply: inout Navigator_V1_Reply,
        _ state: inout WorkerState,
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
        let resolver = state.maps.pick(wire.session).resolver
        var change = SessionWork.apply(
            event, session: wire.session, lastSeq: wire.lastSeq, epoch: wire.epoch, store: store, resolver: resolver,
            maxSessions: maxSessions, now: WallClock.now(), buffers: &state.buffers)
        defer {
            // The batches share the echo's and the released intents' commands, and go first.
            change.batches = []
            change.releasedBatches = []
            state.buffers.recycle(&change.result)
        }
        if let error = change.result.error {
            let code = Navigator_V1_RejectCode(error.code)
            counters.refused(code, intent: false)
            let stale = error.code == .staleEvent
            reply.rejected = .rejection(
                code, error.message, seq: stale ? change.seq : 0, epoch: stale ? store.epoch(of: wire.session) : 0)
            return
        }
        state.noteParked(wire.session, change.parked, limit: resolver.options.maxParked)
        let publishing = WallClock.now()
        for (batch, sentAt) in change.batches { try sockets.publisher.batch(batch, sentAt: sentAt) }
        try publish(
            released: change.result.released, change.releasedBatches, session: wire.session, client: client,
            published: publishing..<WallClock.now(), &state, sockets)
        // An ack beyond the session's seq names batches that were never published: it lands
        // nothing (the event itself changes nothing either).
        if case .ack(let seq) = event, seq <= change.seq {
            state.landings.acknowledged(session: wire.session, seq: seq, now: WallClock.now(), metrics: counters.routes)
        }
        reply.eventApplied = .with {
            $0.seq = change.seq
            $0.epoch = store.epoch(of: wire.session)
            $0.releasedIntentIds = change.result.released.filter { $0.rejection == nil }.map(\.intent.id)
        }
    }
}
