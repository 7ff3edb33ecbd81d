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

/// One traced intent's open spans while navigatord holds it. Owned by one worker (or, for its
/// persist span, handed to the flush thread as a context): no locks.
final class IntentTrace: @unchecked Sendable {
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

    static let maxParked = 65_536
    private(set) var traces: [Key: IntentTrace] = [:]

    /// Keeps `trace` until its intent leaves the parked list; false when the book is full.
    mutating func keep(_ trace: IntentTrace, session: String, intent: Intent, at now: Int64) -> Bool {
        guard traces.count < Self.maxParked else { return false }
        traces.updateValue(trace, forKey: Key(session, intent))?
            .settle(at: now, landed: false, outcome: "superseded", failure: "another parked intent of the same id")
        return true
    }

    mutating func take(session: String, intent: Intent) -> IntentTrace? {
        guard !traces.isEmpty else { return nil }
        defer { traces.releaseSpareRoom() }
        return traces.removeValue(forKey: Key(session, intent))
    }
}

/// Changes of traced intents waiting for the write-behind: the flush thread records each one's
/// `navigator.persist` span when the store has the session. Bounded by ``maxPending``.
final class TracedWrites: Sendable {
    struct Pending: Sendable {
        var trace: IntentTrace
        var since: Int64
    }

    static let maxPending = 16_384
    private let pending = Mutex<[String: [Pending]]>([:])
    private let count = Atomic<Int>(0)
    let store: String

    init(store: String) { self.store = store }

    /// A traced intent changed `session` at `since` (not recorded when ``maxPending`` wait).
    func changed(_ session: String, by trace: IntentTrace, at since: Int64) {
        guard count.load(ordering: .relaxed) < Self.maxPending else { return }
        count.add(1, ordering: .relaxed)
        pending.withLock { $0[session, default: []].append(Pending(trace: trace, since: since)) }
    }

    /// The store has `sessions` as they are now: their waiting changes are persisted. (Or, with
    /// `failure`, will never have them: their partition is another instance's now.)
    func written(_ sessions: some Sequence<String>, at now: Int64, failure: String? = nil) {
        guard count.load(ordering: .relaxed) > 0 else { return }
        let (done, stale): ([Pending], [Pending]) = pending.withLock { pending in
            var done: [Pending] = []
            for session in sessions {
                if let changes = pending.removeValue(forKey: session) { done += changes }
            }
            // Changes of sessions that left without being written (handed to another instance,
            // forgotten) would hold their places for good: past ``staleAfter`` they go.
            var stale: [Pending] = []
            if count.load(ordering: .relaxed) - done.count > Self.maxPending / 2 {
                let cutoff = now - Self.staleAfter
                for (session, changes) in pending where changes.contains(where: { $0.since < cutoff }) {
                    let (old, recent) = (changes.filter { $0.since < cutoff }, changes.filter { $0.since >= cutoff })
                    stale += old
                    pending[session] = recent.isEmpty ? nil : recent
                }
            }
            if pending.isEmpty { pending = [:] }
            return (done, stale)
        }
        guard !done.isEmpty || !stale.isEmpty else { return }
        count.subtract(done.count + stale.count, ordering: .relaxed)
        for change in done {
            change.trace.child(
                "navigator.persist", from: change.since, to: now, ["navigator.store": .string(store)], failure: failure)
        }
        for change in stale {
            change.trace.child(
                "navigator.persist", from: change.since, to: now, ["navigator.store": .string(store)],
                failure: "not written within \(Self.staleAfter / 1_000_000_000) s: the session left this instance")
        }
    }

    /// How long a change may wait to be written before its persist span is ended as not written.
    static let staleAfter: Int64 = 300_000_000_000
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
