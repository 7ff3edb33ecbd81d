/// A worker's published batches that no shell has acknowledged yet, so that each intent is
/// settled once: landed when a shell acknowledges its batch (an `ack` event with that seq or a
/// later one), not landed when the landing window passes first (``RouteMetrics``).
///
/// Bounded: at most ``maxPerSession`` batches a session and ``maxTotal`` in all; beyond either,
/// the oldest is settled as not landed, and counted in `navigator_landing_evicted_total`.
/// Only the worker that owns the sessions touches its book: no locks.
struct LandingBook {
    struct Pending {
        var seq: UInt64
        var route: String
        /// The version of the route map that decided, while a rollout splits sessions (else nil).
        var map: String?
        /// When the intent was sent (or taken, when the producer did not say), unix ns.
        var origin: Int64
        /// Its trace, when it is traced: the ack (or the window's end) settles it.
        var trace: IntentTrace? = nil

        /// Counts it as not landed (and settles its trace).
        func notLanded(_ metrics: RouteMetrics, evicted: Bool) {
            metrics.notLanded(route: route, map: map, evicted: evicted)
            trace?.settle(
                at: WallClock.now(), landed: false, outcome: "not acknowledged",
                failure: evicted
                    ? "dropped from the full landing book before a shell acknowledged it"
                    : "no shell acknowledged it within the landing window (\(metrics.landingWindow / 1_000_000_000) s)")
        }
    }

    static let maxPerSession = 16
    static let maxTotal = 65_536

    /// Each session's unacknowledged batches, oldest first.
    private(set) var sessions: [String: [Pending]] = [:]
    private(set) var count = 0
    /// Every batch in the order it was published (some settled since): the oldest come first,
    /// for the sweep and for eviction. Entries before `head` are gone.
    private var order: [(session: String, seq: UInt64, origin: Int64)] = []
    private var head = 0

    /// A batch of `route` published for `session`.
    mutating func published(
        session: String, seq: UInt64, route: String, map: String?, origin: Int64, metrics: RouteMetrics
    ) {
        // The session's list changed where it is (one lookup of the id, not a removal and an
        // insertion): a worker books every batch it publishes.
        func book(_ pending: inout [Pending]) -> Pending? {
            let evicted = pending.count >= Self.maxPerSession ? pending.removeFirst() : nil
            pending.append(Pending(seq: seq, route: route, map: map, origin: origin))
            return evicted
        }
        if let evicted = book(&sessions[session, default: []]) {
            evicted.notLanded(metrics, evicted: true)
            count -= 1
        }
        count += 1
        order.append((session, seq, origin))
        while count > Self.maxTotal, head < order.count {
            let (session, seq, _) = order[head]
            head += 1
            settle(session, seq, metrics: metrics, evicted: true)
        }
        tidy()
    }

    /// The batch `seq` of `session`, booked just now, is traced: its ack settles `trace`.
    mutating func trace(_ trace: IntentTrace, session: String, seq: UInt64) {
        guard let index = sessions[session]?.lastIndex(where: { $0.seq == seq }) else {
            return trace.settle(at: WallClock.now(), landed: false, outcome: "not booked")
        }
        sessions[session]![index].trace = trace
    }

    /// Settles every open trace (the worker stops); the batches stay booked.
    mutating func settleTraces(at now: Int64) {
        for (session, pending) in sessions where pending.contains(where: { $0.trace != nil }) {
            for index in pending.indices {
                sessions[session]![index].trace?.settle(
                    at: now, landed: false, outcome: "shutdown",
                    failure: "navigatord stopped before a shell acknowledged it")
                sessions[session]![index].trace = nil
            }
        }
    }

    /// A shell of `session` applied the batches up to `seq`.
    mutating func acknowledged(session: String, seq: UInt64, now: Int64, metrics: RouteMetrics) {
        // The list changed where it is, in the dictionary's storage: one taken out and put back
        // is copied to be changed (the dictionary still holds it), an allocation an ack.
        guard let slot = sessions.index(forKey: session) else { return }
        let landed = sessions.values[slot].prefix { $0.seq <= seq }.count
        guard landed > 0 else { return }
        for entry in sessions.values[slot][..<landed] {
            metrics.landed(route: entry.route, map: entry.map, after: now - entry.origin)
            if let trace = entry.trace {
                trace.endWaiting(at: now, ["navigator.ack_seq": .int64(Int64(seq))])
                trace.settle(at: now, landed: true, outcome: "acknowledged")
            }
        }
        sessions.values[slot].removeFirst(landed)
        count -= landed
        if sessions.values[slot].isEmpty { sessions.remove(at: slot) }
    }

    /// Settles as not landed the batches unacknowledged for longer than the landing window, in
    /// the order they were published (a parked intent released late waits behind newer ones).
    mutating func sweep(now: Int64, metrics: RouteMetrics) {
        let cutoff = now - metrics.landingWindow
        while head < order.count, order[head].origin <= cutoff {
            let (session, seq, _) = order[head]
            head += 1
            settle(session, seq, metrics: metrics)
        }
        tidy()
        sessions.releaseSpareRoom()
    }

    /// Settles a batch as not landed if it is still unacknowledged.
    /// Changed in place, as in ``acknowledged(session:seq:now:metrics:)``: the sweep settles
    /// nearly every batch a run without shells publishes.
    private mutating func settle(_ session: String, _ seq: UInt64, metrics: RouteMetrics, evicted: Bool = false) {
        guard let slot = sessions.index(forKey: session),
            let index = sessions.values[slot].firstIndex(where: { $0.seq == seq })
        else { return }
        let settled = sessions.values[slot].remove(at: index)
        count -= 1
        if sessions.values[slot].isEmpty { sessions.remove(at: slot) }
        settled.notLanded(metrics, evicted: evicted)
    }

    /// Drops the order's gone and settled entries once they are the larger part: amortised,
    /// and the order never holds more than twice ``maxTotal`` live entries' worth.
    private mutating func tidy() {
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        if order.count - head > 2 * Self.maxTotal {
            order = order[head...].filter { entry in sessions[entry.session]?.contains { $0.seq == entry.seq } == true }
            head = 0
        }
    }
}
