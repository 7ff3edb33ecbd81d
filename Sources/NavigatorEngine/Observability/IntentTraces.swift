import Locking
import NavigatorCore
import NavigatorWire
import Synchronization
import Tracing

// The spans navigatord records of each traced intent (docs/operations.md, "Traces"), child of
// the producer's span when the intent carries a W3C `traceparent`:
//
//   navigator.intent            from taking the intent until it is settled: a shell acknowledged
//   ├─ navigator.receive        its batch, the landing window passed, or it was rejected,
//   ├─ navigator.resolve        ignored or expired (the shell's ack closes the trace)
//   ├─ navigator.park           while parked, until released, refused or expired
//   ├─ navigator.publish        its batch handed to the commands socket
//   ├─ navigator.persist        from the change until the store has it (write-behind)
//   └─ navigator.land           from publication until a shell's ack (or the window's end)
//
// Off unless the engine is given a tracer (navigatord: OpenTelemetry over OTLP/HTTP when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT variables say where). Whether an intent is traced is the
// tracer's sampler's decision on `navigator.intent`; an intent it drops costs no more spans.

/// A time as spans take it: unix nanoseconds (``WallClock``).
struct UnixInstant: TracerInstant {
    var nanosecondsSinceEpoch: UInt64

    init(_ unixNanoseconds: Int64) { nanosecondsSinceEpoch = UInt64(max(0, unixNanoseconds)) }

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch }
}

/// One traced intent's open spans while navigatord holds it. Owned by one worker (its persist
/// span goes to the flush thread as a parent context, ``TracedWrites``): no locks.
final class IntentTrace {
    let tracer: any Tracer
    /// `navigator.intent`: ends when the intent is settled.
    let span: any Span
    /// `navigator.park` while parked; `navigator.land` while its batch waits for an ack.
    var waiting: (any Span)?

    init(tracer: any Tracer, span: any Span) {
        self.tracer = tracer
        self.span = span
    }

    /// A finished child span of `navigator.intent`, from `start` to `end` (unix ns).
    func child(
        _ name: String, from start: Int64, to end: Int64, _ attributes: SpanAttributes = [:], failure: String? = nil
    ) {
        let child = tracer.startSpan(name, context: span.context, ofKind: .internal, at: UnixInstant(start))
        child.attributes = attributes
        if let failure { child.setStatus(SpanStatus(code: .error, message: failure)) }
        child.end(at: UnixInstant(end))
    }

    /// Starts the span that lasts while the intent waits (parked, or for an ack).
    func wait(_ name: String, from start: Int64, _ attributes: SpanAttributes = [:]) {
        let span = tracer.startSpan(name, context: span.context, ofKind: .internal, at: UnixInstant(start))
        span.attributes = attributes
        waiting = span
    }

    /// Ends the waiting span; `failure`: why it ended badly (the span's status is an error).
    func endWaiting(at time: Int64, failure: String? = nil, _ attributes: SpanAttributes = [:]) {
        guard let waiting else { return }
        self.waiting = nil
        if !attributes.isEmpty { waiting.updateAttributes { $0.merge(attributes) } }
        if let failure { waiting.setStatus(SpanStatus(code: .error, message: failure)) }
        waiting.end(at: UnixInstant(time))
    }

    /// Settles the intent: ends what waits and `navigator.intent`, with `navigator.landed` and
    /// the outcome, as an error when it did not land for a reason (`failure`).
    func settle(at time: Int64, landed: Bool, outcome: String, failure: String? = nil) {
        endWaiting(at: time, failure: failure)
        span.attributes["navigator.landed"] = landed
        span.attributes["navigator.settled"] = outcome
        if let failure { span.setStatus(SpanStatus(code: .error, message: failure)) }
        span.end(at: UnixInstant(time))
    }
}

/// A worker's open traces of parked intents, until each is released, refused or expires.
/// Bounded by ``maxParked``: one more parked intent is traced to its parking and settled there.
/// An intent that leaves its session otherwise (the session forgotten, or handed to another
/// instance) is settled by ``sweep(now:)`` once its time to live is past.
struct ParkedTraces {
    struct Key: Hashable {
        var session: String
        var intentID: String
        var sentAt: Int64
        var traceparent: String

        init(_ session: String, _ intent: Intent) {
            self.session = session
            intentID = intent.id
            sentAt = intent.sentAt
            traceparent = intent.traceparent
        }
    }

    struct Entry {
        var trace: IntentTrace
        var expiresAt: Int64
    }

    static let maxParked = 65_536
    /// How often the sweep looks for traces whose intents left without a release or expiry.
    static let sweepInterval: Int64 = 10_000_000_000
    /// How long past its expiry a parked intent's trace waits for the expiry pass to settle it.
    static let grace: Int64 = 5_000_000_000
    private(set) var traces: [Key: Entry] = [:]
    private var nextSweep: Int64 = 0

    /// Keeps `trace` until its intent leaves the parked list; false when the book is full.
    mutating func keep(_ trace: IntentTrace, session: String, intent: Intent, expiresAt: Int64, at now: Int64) -> Bool {
        guard traces.count < Self.maxParked else { return false }
        traces.updateValue(Entry(trace: trace, expiresAt: expiresAt), forKey: Key(session, intent))?.trace
            .settle(at: now, landed: false, outcome: "superseded", failure: "another parked intent of the same id")
        return true
    }

    mutating func take(session: String, intent: Intent) -> IntentTrace? {
        guard !traces.isEmpty else { return nil }
        defer { traces.releaseSpareRoom() }
        return traces.removeValue(forKey: Key(session, intent))?.trace
    }

    /// Settles the traces of intents past their expiry that no expiry pass took: their session
    /// was forgotten or handed to another instance with them.
    mutating func sweep(now: Int64) {
        guard now >= nextSweep, !traces.isEmpty else { return }
        nextSweep = now + Self.sweepInterval
        let gone = traces.filter { $0.value.expiresAt + Self.grace < now }
        for (key, entry) in gone {
            traces[key] = nil
            entry.trace.settle(
                at: now, landed: false, outcome: "left",
                failure:
                    "the intent left its session without a release or expiry here (the session forgotten or handed to another instance)"
            )
        }
        traces.releaseSpareRoom()
    }

    /// Settles every open trace: the worker stops.
    mutating func settleAll(at now: Int64) {
        for entry in traces.values {
            entry.trace.settle(
                at: now, landed: false, outcome: "shutdown", failure: "navigatord stopped while it waited")
        }
        traces = [:]
    }
}

/// At most ``limit`` new traces a second on one worker, so that producers that mark every intent
/// sampled cannot make navigatord trace (and pay for) all of them: a token bucket.
struct TraceBudget {
    let limit: Int
    private var tokens: Double
    private var refilledAt: Int64 = 0

    init(perSecond limit: Int) {
        self.limit = limit
        tokens = Double(limit)
    }

    /// Whether one more intent may be traced at `now`.
    mutating func take(at now: Int64) -> Bool {
        guard limit > 0 else { return false }
        let elapsed = Double(max(0, now - refilledAt)) / 1e9
        tokens = min(Double(limit), tokens + elapsed * Double(limit))
        refilledAt = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Changes of traced intents waiting for the write-behind: the flush thread records each one's
/// `navigator.persist` span once the store has the session as it was after the change. Bounded
/// by ``maxPending``.
final class TracedWrites: Sendable {
    /// A change: under which span, since when.
    struct Pending: Sendable {
        var tracer: any Tracer
        var parent: ServiceContext
        var since: Int64
    }

    static let maxPending = 16_384
    /// How long a change may wait to be written before its persist span is ended as not written
    /// (its session left this instance, say).
    static let staleAfter: Int64 = 300_000_000_000
    private let pending = Locked<(changes: [String: [Pending]], count: Int, nextPurge: Int64)>(([:], 0, 0))
    let store: String

    init(store: String) { self.store = store }

    /// A traced intent changed `session` at `since` (not recorded when ``maxPending`` wait).
    func changed(_ session: String, by trace: IntentTrace, at since: Int64) {
        let change = Pending(tracer: trace.tracer, parent: trace.span.context, since: since)
        pending.withLock { pending in
            guard pending.count < Self.maxPending else { return }
            pending.count += 1
            pending.changes[session, default: []].append(change)
        }
    }

    /// Takes the changes waiting for `sessions`, before the store is handed their records: the
    /// changes made after this are the next write's.
    func take(_ sessions: some Sequence<String>) -> [String: [Pending]] {
        pending.withLock { pending in
            guard pending.count > 0 else { return [:] }
            var taken: [String: [Pending]] = [:]
            for session in sessions {
                if let changes = pending.changes.removeValue(forKey: session) { taken[session] = changes }
            }
            pending.count -= taken.values.reduce(0) { $0 + $1.count }
            if pending.changes.isEmpty { pending.changes = [:] }
            return taken
        }
    }

    /// The write failed and will be tried again: the changes wait for it.
    func putBack(_ taken: [String: [Pending]]) {
        guard !taken.isEmpty else { return }
        pending.withLock { pending in
            for (session, changes) in taken {
                pending.changes[session, default: []].insert(contentsOf: changes, at: 0)
                pending.count += changes.count
            }
        }
    }

    /// Records the persist spans of `taken`: written at `now` (or not, for `failure`), and of
    /// changes that waited longer than ``staleAfter`` (looked for once a minute).
    func record(_ taken: [String: [Pending]], at now: Int64, failure: String? = nil) {
        for changes in taken.values {
            for change in changes { persisted(change, at: now, failure: failure) }
        }
        let stale: [Pending] = pending.withLock { pending in
            guard pending.count > 0, now >= pending.nextPurge else { return [] }
            pending.nextPurge = now + 60_000_000_000
            var stale: [Pending] = []
            for (session, changes) in pending.changes
            where changes.contains(where: { $0.since < now - Self.staleAfter }) {
                stale += changes.filter { $0.since < now - Self.staleAfter }
                let recent = changes.filter { $0.since >= now - Self.staleAfter }
                pending.changes[session] = recent.isEmpty ? nil : recent
            }
            pending.count -= stale.count
            return stale
        }
        for change in stale {
            persisted(
                change, at: now,
                failure: "not written within \(Self.staleAfter / 1_000_000_000) s: the session left this instance")
        }
    }

    private func persisted(_ change: Pending, at now: Int64, failure: String?) {
        let span = change.tracer.startSpan(
            "navigator.persist", context: change.parent, ofKind: .internal, at: UnixInstant(change.since))
        span.attributes["navigator.store"] = store
        if let failure { span.setStatus(SpanStatus(code: .error, message: failure)) }
        span.end(at: UnixInstant(now))
    }
}

extension IntentTrace {
    /// Starts the trace of an intent taken at `taken` (unix ns), a child of its producer's span
    /// when it carries a `traceparent`; nil when the tracer's sampler drops it.
    static func begin(_ intent: Intent, session: String, taken: Int64, tracer: any Tracer) -> IntentTrace? {
        var context = ServiceContext.topLevel
        if !intent.traceparent.isEmpty {
            tracer.extract(["traceparent": intent.traceparent], into: &context, using: HeaderExtractor())
        }
        let span = tracer.startSpan("navigator.intent", context: context, ofKind: .consumer, at: UnixInstant(taken))
        guard span.isRecording else { return nil }
        span.attributes["navigator.session"] = session
        span.attributes["navigator.intent.id"] = intent.id
        if !intent.source.isEmpty { span.attributes["navigator.intent.source"] = intent.source }
        return IntentTrace(tracer: tracer, span: span)
    }

    /// Records `navigator.resolve` and what the resolver decided.
    func resolved(_ resolution: Resolution, route: String, from start: Int64, to end: Int64) {
        span.attributes["navigator.route"] = route
        var attributes: SpanAttributes = ["navigator.outcome": .string(Navigator_V1_Outcome(resolution.outcome).label)]
        if let decisive = resolution.explanation.last(where: \.decisive) {
            attributes["navigator.decisive_step"] = decisive.step.rawValue
            attributes["navigator.decisive_detail"] = decisive.detail
        }
        attributes["navigator.command_count"] = Int64(resolution.commands.count)
        if case .rejected(let error) = resolution.outcome {
            attributes["navigator.reject_code"] = error.code.rawValue
        }
        child("navigator.resolve", from: start, to: end, attributes)
        span.attributes["navigator.outcome"] = Navigator_V1_Outcome(resolution.outcome).label
    }

    /// Records `navigator.publish` of the batch `seq` and starts `navigator.land`.
    func published(seq: UInt64, commands: Int, from start: Int64, to end: Int64) {
        span.attributes["navigator.seq"] = Int64(seq)
        child(
            "navigator.publish", from: start, to: end,
            ["navigator.seq": .int64(Int64(seq)), "navigator.command_count": .int64(Int64(commands))])
        wait("navigator.land", from: end, ["navigator.seq": .int64(Int64(seq))])
    }
}

/// Reads a `traceparent` out of a dictionary for the tracer's propagator.
struct HeaderExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

extension Intent {
    /// Whether its `traceparent` (checked already: W3C's form or empty) says its producer
    /// sampled it: the flags' lowest bit.
    var traceparentSaysSampled: Bool {
        guard let last = traceparent.utf8.last, let digit = Int(String(UnicodeScalar(last)), radix: 16) else {
            return false
        }
        return digit & 1 == 1
    }
}
