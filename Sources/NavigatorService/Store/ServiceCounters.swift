import NavigatorWire
import Synchronization

/// One counter that any thread may bump. (Atomics cannot live in arrays; this class can.)
final class Counter: Sendable {
    private let value = Atomic<UInt64>(0)

    func add(_ amount: UInt64 = 1) { value.wrappingAdd(amount, ordering: .relaxed) }
    func subtract(_ amount: UInt64 = 1) { value.wrappingSubtract(amount, ordering: .relaxed) }
    /// Adds and returns the new value.
    func next() -> UInt64 { value.wrappingAdd(1, ordering: .relaxed).newValue }
    var load: UInt64 { value.load(ordering: .relaxed) }
}

/// Counters every thread bumps and stats and /metrics read. Plain atomics: no locks on the path
/// of an intent.
final class ServiceCounters: Sendable {
    /// By Navigator_V1_Outcome raw value.
    let outcomes = (0..<8).map { _ in Counter() }
    /// By Navigator_V1_RejectCode raw value.
    let rejections = (0..<32).map { _ in Counter() }
    let clientEvents = Counter()
    let batches = Counter()
    let expired = Counter()
    let requests = Counter()
    /// Topics with at least one subscriber, as the XPUB reports them (subscribe minus unsubscribe).
    let subscribedTopics = Counter()
    /// Messages handed to each worker, and handled by it: the difference is its queue.
    let forwarded: [Counter]
    let handled: [Counter]
    /// Running counts for the header seq of rejections and audit records.
    let rejectionSeq = Counter()
    let auditSeq = Counter()
    /// Latency of a resolution in microseconds, as a histogram (upper bounds below, then +Inf).
    static let latencyBounds: [UInt64] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]
    let latencyBuckets = (0...12).map { _ in Counter() }
    let latencySumMicros = Counter()

    init(workers: Int) {
        forwarded = (0..<workers).map { _ in Counter() }
        handled = (0..<workers).map { _ in Counter() }
    }

    func count(_ outcome: Navigator_V1_Outcome) { outcomes[outcome.rawValue].add() }

    func count(_ code: Navigator_V1_RejectCode) { rejections[min(code.rawValue, rejections.count - 1)].add() }

    func recordLatency(nanoseconds: Int64) {
        let micros = UInt64(max(0, nanoseconds / 1000))
        let bucket = Self.latencyBounds.firstIndex { micros <= $0 } ?? Self.latencyBounds.count
        latencyBuckets[bucket].add()
        latencySumMicros.add(micros)
    }

    func queueDepth(_ worker: Int) -> UInt64 {
        let sent = forwarded[worker].load
        let done = handled[worker].load
        return sent > done ? sent - done : 0
    }
}
