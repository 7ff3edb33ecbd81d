import NavigatorCore
import NavigatorWire

/// What the worker does to one session for an intent, a client event or an expiry pass, under
/// the session's shard lock: the resolver's decision, then the numbered batches to publish. No
/// sockets: the worker publishes the result, and the semantic fuzzer drives the very same code.
enum SessionWork {
    /// A batch to publish, with the originating intent's sent-at.
    typealias Publishable = (batch: Batch, sentAt: Int64)

    /// What an intent did.
    struct IntentChange {
        var resolution: Resolution
        var batches: [Publishable]
        /// The intent's own batch (a guard's redirect included), if it had commands.
        var own: Batch?
        /// For each of `resolution.released`, its batch, if it had commands.
        var releasedBatches: [Batch?]
        /// The session's parked intents afterwards.
        var parked: [ParkedIntent]
        /// When the intent expires, if it parked.
        var expiresAt: Int64
        /// The session as the resolver found it (tree, conditions, parked intents, readiness, its
        /// shell's app version),
        /// when asked for (`recording`): what the flight recorder keeps.
        var before: SessionState? = nil
        /// Whether the session had parked intents before: with none before and none after,
        /// the worker's book of sessions with parked intents has nothing to change.
        var hadParked = false
    }

    /// What a client event did.
    struct EventChange {
        var result: EventResolution
        var batches: [Publishable]
        var releasedBatches: [Batch?]
        /// The session's seq afterwards.
        var seq: UInt64
        var parked: [ParkedIntent]
    }

    static func sessionLimit(_ store: SessionStore) -> ResolveError {
        ResolveError(
            .limitExceeded,
            "the service holds \(store.sessionCount) sessions, its limit (maxSessions); expected an existing session")
    }

    /// Resolves an intent into its session (refused if it would create a session beyond
    /// `maxSessions`).
    static func resolve(
        _ intent: Intent, store: SessionStore, resolver: Resolver, maxSessions: Int, now: Int64,
        recording: Bool = false
    ) -> IntentChange {
        var buffers = ResolutionBuffers()
        var batches: [Publishable] = []
        return resolve(
            intent, store: store, resolver: resolver, maxSessions: maxSessions, now: now, recording: recording,
            buffers: &buffers, batches: &batches)
    }

    /// ``resolve(_:store:resolver:maxSessions:now:recording:)`` built in a worker's arrays,
    /// which it takes back once the intent is published (``ResolutionBuffers``). The batches are
    /// listed in `batches`, emptied first: a worker's own array, whose room serves every intent
    /// (the change shares it until the worker is done with it).
    static func resolve(
        _ intent: Intent, store: SessionStore, resolver: Resolver, maxSessions: Int, now: Int64,
        recording: Bool = false, buffers: inout ResolutionBuffers, batches list: inout [Publishable]
    ) -> IntentChange {
        let refusal = store.notServed(intent.session).map { ResolveError(.moved, $0) }
        if let refusal = refusal ?? (store.admits(intent.session, limit: maxSessions) ? nil : sessionLimit(store)) {
            let resolution = Resolution(intent: intent, outcome: .rejected(refusal), explanation: [], released: [])
            return IntentChange(
                resolution: resolution, batches: [], own: nil, releasedBatches: [], parked: [], expiresAt: 0)
        }
        let epoch = store.epoch(of: intent.session)
        return store.update(intent.session) { record in
            let before = record.tree
            let found = recording ? record.state.recordable : nil
            let hadParked = record.parkedCount != 0
            let resolution = resolver.resolve(intent, into: &record.state, now: now, buffers: &buffers)
            list.removeAll(keepingCapacity: true)
            let (own, released) = Self.batches(
                session: intent.session, epoch: epoch, resolution: resolution, released: resolution.released,
                before: before, record: &record, into: &list)
            let expiresAt = record.parked.last { $0.intent.id == intent.id }?.expiresAt ?? 0
            return IntentChange(
                resolution: resolution, batches: list, own: own, releasedBatches: released,
                parked: record.parked, expiresAt: expiresAt, before: found, hadParked: hadParked)
        }
    }

    /// Applies a client event made at (`lastSeq`, `epoch`) to its session: refused if stale
    /// (``Resolver/staleness(of:lastSeq:epoch:session:seq:currentEpoch:)``) or if it would
    /// create a session beyond `maxSessions`.
    static func apply(
        _ event: ClientEvent, session: String, lastSeq: UInt64, epoch: UInt64, store: SessionStore,
        resolver: Resolver, maxSessions: Int, now: Int64
    ) -> EventChange {
        var buffers = ResolutionBuffers()
        return apply(
            event, session: session, lastSeq: lastSeq, epoch: epoch, store: store, resolver: resolver,
            maxSessions: maxSessions, now: now, buffers: &buffers)
    }

    /// ``apply(_:session:lastSeq:epoch:store:resolver:maxSessions:now:)`` built in a worker's
    /// arrays, which it takes back once the event is answered (``ResolutionBuffers``).
    static func apply(
        _ event: ClientEvent, session: String, lastSeq: UInt64, epoch: UInt64, store: SessionStore,
        resolver: Resolver, maxSessions: Int, now: Int64, buffers: inout ResolutionBuffers
    ) -> EventChange {
        let refusal = store.notServed(session).map { ResolveError(.moved, $0) }
        if let refusal = refusal ?? (store.admits(session, limit: maxSessions) ? nil : sessionLimit(store)) {
            return EventChange(
                result: EventResolution(echo: [], released: [], error: refusal), batches: [],
                releasedBatches: [], seq: 0, parked: [])
        }
        let current = store.epoch(of: session)
        return store.update(session) { record in
            if let stale = resolver.staleness(
                of: event, lastSeq: lastSeq, epoch: epoch, session: record.state, seq: record.seq,
                currentEpoch: current)
            {
                return EventChange(
                    result: EventResolution(echo: [], released: [], error: stale), batches: [], releasedBatches: [],
                    seq: record.seq, parked: record.parked)
            }
            let before = record.tree
            let result = resolver.apply(
                event, to: &record.state, now: now, authoritative: lastSeq == 0 && epoch == 0, buffers: &buffers)
            guard result.error == nil else {
                return EventChange(
                    result: result, batches: [], releasedBatches: [], seq: record.seq, parked: record.parked)
            }
            var batches: [Publishable] = []
            let (_, released) = Self.batches(
                session: session, epoch: current, resolution: nil, echo: result.echo, released: result.released,
                before: before, record: &record, into: &batches)
            return EventChange(
                result: result, batches: batches, releasedBatches: released, seq: record.seq,
                parked: record.parked)
        }
    }

    /// Expires the session's parked intents that are due; returns them and what stays parked.
    ///
    /// A packed session with nothing due is only read, not unpacked into its shard: after a
    /// restart the expiry pass looks at every session with parked intents at once, and most of
    /// them had their whole state made live again (kilobytes each) only to be packed back later.
    static func expire(_ session: String, store: SessionStore, resolver: Resolver, now: Int64)
        -> (expired: [ParkedIntent], parked: [ParkedIntent])
    {
        let record = store.read(session)
        if record.isPacked {
            // The worker is the shard's only writer: nothing changes it between here and `update`.
            let parked = record.parked
            let due = parked.count > resolver.options.maxParked || parked.contains { $0.expiresAt <= now }
            guard due else { return ([], parked) }
        }
        return store.update(session) { record in (resolver.expire(&record.state, now: now), record.parked) }
    }

    /// A resolution's summary as a batch keeps it: its step, written out when read.
    static func summary(of resolution: Resolution) -> Batch.Summary {
        resolution.summaryStep.map(Batch.Summary.step) ?? .text("")
    }

    /// The batches to publish, in order, with their seqs and tree versions, appended to `result`:
    /// the intent's own (if it has commands), or a client event's echo, then one per released
    /// intent that has commands. Returns the intent's own batch and, for each released intent,
    /// its batch (nil when it had none: it was shown already, or was refused).
    static func batches(
        session: String, epoch: UInt64, resolution: Resolution?, echo: [Command] = [], released: [Resolution],
        before: ScreenTree, record: inout SessionStore.Record, into result: inout [Publishable]
    ) -> (own: Batch?, released: [Batch?]) {
        // A batch carries the tree's version after it. With one batch that is the session's
        // version now; only when released intents add batches is the sequence replayed on a copy
        // (they are all applied to the session already).
        let batchCount =
            (resolution?.commands.isEmpty == false ? 1 : 0) + (echo.isEmpty ? 0 : 1)
            + released.count { !$0.commands.isEmpty }
        var tree = before
        // The summary's step is kept, and written out only where the batch is encoded or read.
        func add(
            _ commands: [Command], _ intent: Intent?, _ cause: Navigator_V1_BatchCause, _ summary: Batch.Summary
        ) -> Batch? {
            guard !commands.isEmpty else { return nil }
            if batchCount > 1 { try? tree.apply(commands) } else { tree = record.tree }
            record.seq += 1
            // Shells whose events were made before this batch sent them on a tree they no
            // longer have (echoes only repeat what shells did themselves).
            if cause != .clientEvent { record.state.lastServiceSeq = record.seq }
            let batch = Batch(
                session: session, seq: record.seq, intentID: intent?.id ?? "", animated: intent?.animated ?? true,
                commands: commands, treeVersion: tree.version, summary: summary, cause: cause, epoch: epoch)
            result.append((batch, intent?.sentAt ?? 0))
            return batch
        }
        var own: Batch?
        if let resolution {
            let isGuard = if case .parked = resolution.outcome { true } else { false }
            own = add(resolution.commands, resolution.intent, isGuard ? .guard : .intent, Self.summary(of: resolution))
        }
        _ = add(echo, nil, .clientEvent, .text("client event"))
        let releasedBatches = released.map { add($0.commands, $0.intent, .release, Self.summary(of: $0)) }
        return (own, releasedBatches)
    }
}
