import Metrics
import NavigatorWire
import Synchronization

/// One counter that any thread may bump. (Atomics cannot live in arrays; this class can.)
final class AtomicCounter: Sendable {
    private let value = Atomic<UInt64>(0)
    /// A swift-metrics counter kept in step, for /metrics.
    private let mirror: Metrics.Counter?

    init(mirror: Metrics.Counter? = nil) { self.mirror = mirror }

    func add(_ amount: UInt64 = 1) {
        value.wrappingAdd(amount, ordering: .relaxed)
        mirror?.increment(by: Int64(amount))
    }
    func subtract(_ amount: UInt64 = 1) { value.wrappingSubtract(amount, ordering: .relaxed) }
    /// Sets the value (a gauge kept by one thread).
    func store(_ newValue: UInt64) { value.store(newValue, ordering: .relaxed) }
    /// Adds and returns the new value.
    func next() -> UInt64 { value.wrappingAdd(1, ordering: .relaxed).newValue }
    var load: UInt64 { value.load(ordering: .relaxed) }
}

/// Counters every thread bumps and stats and /metrics read. Plain atomics: no locks on the path
/// of an intent.
final class EngineCounters: Sendable {
    /// By Navigator_V1_Outcome raw value.
    let outcomes = (0..<8).map { _ in AtomicCounter() }
    /// By Navigator_V1_RejectCode raw value.
    let rejections = (0..<32).map { _ in AtomicCounter() }
    let clientEvents: AtomicCounter
    /// Parked intents released and resolved later (not counted again by outcome).
    let released: AtomicCounter
    let batches: AtomicCounter
    let expired: AtomicCounter
    let requests: AtomicCounter
    /// Messages between the service's own threads of a shape nobody expects (each also logged).
    let unexpectedInternal: AtomicCounter
    /// Messages a worker had for the commands socket after egress had closed it: only while the
    /// service stops because egress failed (logged at critical by the supervisor).
    let unpublished: AtomicCounter
    /// Topics with at least one subscriber (egress's ``SubscriptionBook``).
    let subscribedTopics = AtomicCounter()
    /// Replies of acknowledged requests handed to the flush thread and not yet sent on (their
    /// sessions wait to be written): the requests thread refuses new ones beyond
    /// ``RequestsLoop/maxRepliesWaiting`` while the store is slow or away.
    let repliesWaiting = AtomicCounter()
    /// Subscribers dropped for holding more than maxSubscriptionsPerPeer topics.
    let subscribersDropped: AtomicCounter
    /// Secure mode: connections the ZAP handler refused (unknown key, wrong mechanism or domain)
    /// and admitted.
    let authRefused: AtomicCounter
    let authAdmitted: AtomicCounter
    /// Secure mode: subscriptions refused because the client may not read the topic.
    let subscriptionsForbidden: AtomicCounter
    /// Secure mode: (un)subscriptions not applied because their connection had ended, or might
    /// have (``ConnectionLedger``; the descriptor's connection is then dropped, and counted
    /// in `subscribersDropped`).
    let subscriptionsOfEndedConnections: AtomicCounter
    /// Several instances: messages forwarded to the instance that serves their session, and
    /// taken from other instances.
    let forwardsSent: AtomicCounter
    let forwardsReceived: AtomicCounter
    /// Secure mode: messages on the cluster endpoint from a client rather than a peer instance
    /// (dropped).
    let forwardsRefused: AtomicCounter
    /// Rounds of partition leases that failed (the database could not be reached).
    let leaseRenewalsFailed: AtomicCounter
    /// The route map rollout's row that could not be read or written (a round, or storing the
    /// end a reload made).
    let rolloutStoreFailures: AtomicCounter
    /// Intents whose traceparent was not of W3C's form (dropped; the intent went on).
    let traceparentInvalid: AtomicCounter
    /// Intents of another worker's shard that worker 0, the intents socket's reader, resolved
    /// itself while that worker slept (``WorkerDesk``): hand-overs spared.
    let resolvedByReader: AtomicCounter
    /// Of those, the ones that receive audit records (`""`, `"a"`, `"a/..."`): audit records are
    /// built and published only while there is one.
    let auditTopics = AtomicCounter()
    /// Messages for each worker (handed to it, or resolved by worker 0 in its place while it
    /// slept), and handled: the difference is its queue.
    let handedOver: [AtomicCounter]
    let handled: [AtomicCounter]
    /// Running counts for the header seq of rejections and audit records.
    let rejectionSeq = AtomicCounter()
    let auditSeq = AtomicCounter()

    /// The same counts as swift-metrics instruments, for /metrics.
    let metrics: EngineMetrics

    /// Intents by route and source, time to publish and to land (issue 32).
    let routes: RouteMetrics

    init(workers: Int, landingWindow: Duration = .seconds(10)) {
        handedOver = (0..<workers).map { _ in AtomicCounter() }
        handled = (0..<workers).map { _ in AtomicCounter() }
        let metrics = EngineMetrics(workers: workers)
        routes = RouteMetrics(registry: metrics.registry, landingWindow: landingWindow)
        self.metrics = metrics
        clientEvents = AtomicCounter(mirror: metrics.clientEvents)
        released = AtomicCounter(mirror: metrics.released)
        batches = AtomicCounter(mirror: metrics.batches)
        expired = AtomicCounter(mirror: metrics.expired)
        requests = AtomicCounter(mirror: metrics.requests)
        unexpectedInternal = AtomicCounter(mirror: metrics.unexpectedInternal)
        unpublished = AtomicCounter(mirror: metrics.unpublished)
        subscribersDropped = AtomicCounter(mirror: metrics.subscribersDropped)
        authRefused = AtomicCounter(mirror: metrics.authRefused)
        authAdmitted = AtomicCounter(mirror: metrics.authAdmitted)
        subscriptionsForbidden = AtomicCounter(mirror: metrics.subscriptionsForbidden)
        subscriptionsOfEndedConnections = AtomicCounter(mirror: metrics.subscriptionsOfEndedConnections)
        forwardsSent = AtomicCounter(mirror: metrics.forwardsSent)
        forwardsReceived = AtomicCounter(mirror: metrics.forwardsReceived)
        forwardsRefused = AtomicCounter(mirror: metrics.clusterStrangers)
        leaseRenewalsFailed = AtomicCounter(mirror: metrics.leaseRenewalsFailed)
        rolloutStoreFailures = AtomicCounter(mirror: metrics.rolloutStoreFailures)
        traceparentInvalid = AtomicCounter(mirror: metrics.traceparentInvalid)
        resolvedByReader = AtomicCounter(mirror: metrics.resolvedByReader)
    }

    func count(_ outcome: Navigator_V1_Outcome) {
        outcomes[outcome.rawValue].add()
        if outcome.rawValue < metrics.intents.count { metrics.intents[outcome.rawValue]?.increment() }
    }

    func count(_ code: Navigator_V1_RejectCode) {
        let index = min(code.rawValue, rejections.count - 1)
        rejections[index].add()
        metrics.rejections[index]?.increment()
    }

    /// A resolution's duration, into the histogram /metrics serves.
    func recordLatency(nanoseconds: Int64) {
        metrics.resolveDuration.recordNanoseconds(nanoseconds)
    }

    func queueDepth(_ worker: Int) -> UInt64 {
        let sent = handedOver[worker].load
        let done = handled[worker].load
        return sent > done ? sent - done : 0
    }
}
