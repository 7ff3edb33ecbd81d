import Metrics
import NavigatorWire
import Prometheus

/// The service's swift-metrics instruments, backed by a Prometheus registry of its own (so
/// several services in one process, as in tests, keep apart), emitted at `/metrics`.
final class EngineMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// By Navigator_V1_Outcome raw value; none for `unspecified`, which no intent has.
    let intents: [Metrics.Counter?]
    /// By Navigator_V1_RejectCode raw value; none for `unspecified`, which no rejection has.
    let rejections: [Metrics.Counter?]
    let clientEvents: Metrics.Counter
    let released: Metrics.Counter
    let batches: Metrics.Counter
    let requests: Metrics.Counter
    let expired: Metrics.Counter
    let resolveDuration: Metrics.Timer
    let sessions: Metrics.Gauge
    let parked: Metrics.Gauge
    let subscribedTopics: Metrics.Gauge
    /// Replies waiting for their sessions' write (``EngineCounters/repliesWaiting``).
    let repliesWaiting: Metrics.Gauge
    /// The process's resident memory, and the ceiling it stops at (0: none).
    let residentBytes: Metrics.Gauge
    let memoryCeilingBytes: Metrics.Gauge
    let queueDepths: [Metrics.Gauge]
    let quarantined: Metrics.Gauge
    let unexpectedInternal: Metrics.Counter
    let unpublished: Metrics.Counter
    let subscribersDropped: Metrics.Counter
    let authRefused: Metrics.Counter
    let authAdmitted: Metrics.Counter
    let subscriptionsForbidden: Metrics.Counter
    let subscriptionsOfEndedConnections: Metrics.Counter
    let forwardsSent: Metrics.Counter
    let forwardsReceived: Metrics.Counter
    let clusterStrangers: Metrics.Counter
    let leaseRenewalsFailed: Metrics.Counter
    let rolloutStoreFailures: Metrics.Counter
    let traceparentInvalid: Metrics.Counter
    let resolvedByReader: Metrics.Counter
    let partitionsHeld: Metrics.Gauge
    let fencedWrites: Metrics.Gauge
    let failedWrites: Metrics.Gauge
    let packedSessions: Metrics.Gauge
    let packedMapped: Metrics.Gauge
    let packedLive: Metrics.Gauge

    init(workers: Int) {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["navigator_resolve_duration_seconds"] = [
            .microseconds(5), .microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100),
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
            .milliseconds(10),
        ]
        let outcomes = [Navigator_V1_Outcome.unspecified, .resolved, .refreshed, .ignored, .parked, .rejected]
        intents = outcomes.map {
            $0 == .unspecified
                ? nil
                : Metrics.Counter(
                    label: "navigator_intents_total", dimensions: [("outcome", $0.label)], factory: factory)
        }
        rejections = (0..<32).map { raw in
            raw == Navigator_V1_RejectCode.unspecified.rawValue
                ? nil
                : Counter(
                    label: "navigator_rejections_total",
                    dimensions: [("code", Navigator_V1_RejectCode(rawValue: raw)?.label ?? "code_\(raw)")],
                    factory: factory
                )
        }
        clientEvents = Metrics.Counter(label: "navigator_client_events_total", factory: factory)
        released = Metrics.Counter(label: "navigator_parked_released_total", factory: factory)
        batches = Metrics.Counter(label: "navigator_batches_published_total", factory: factory)
        requests = Metrics.Counter(label: "navigator_requests_total", factory: factory)
        expired = Metrics.Counter(label: "navigator_parked_expired_total", factory: factory)
        resolveDuration = Metrics.Timer(label: "navigator_resolve_duration_seconds", factory: factory)
        sessions = Metrics.Gauge(label: "navigator_sessions", factory: factory)
        parked = Metrics.Gauge(label: "navigator_parked_intents", factory: factory)
        subscribedTopics = Metrics.Gauge(label: "navigator_subscribed_topics", factory: factory)
        repliesWaiting = Metrics.Gauge(label: "navigator_replies_waiting_for_store", factory: factory)
        residentBytes = Metrics.Gauge(label: "navigator_resident_memory_bytes", factory: factory)
        memoryCeilingBytes = Metrics.Gauge(label: "navigator_memory_ceiling_bytes", factory: factory)
        quarantined = Metrics.Gauge(label: "navigator_sessions_quarantined", factory: factory)
        unexpectedInternal = Metrics.Counter(label: "navigator_unexpected_internal_messages_total", factory: factory)
        unpublished = Metrics.Counter(label: "navigator_unpublished_messages_total", factory: factory)
        subscribersDropped = Metrics.Counter(label: "navigator_subscribers_dropped_total", factory: factory)
        authRefused = Metrics.Counter(
            label: "navigator_auth_total", dimensions: [("result", "refused")], factory: factory)
        authAdmitted = Metrics.Counter(
            label: "navigator_auth_total", dimensions: [("result", "admitted")], factory: factory)
        subscriptionsForbidden = Metrics.Counter(
            label: "navigator_subscriptions_forbidden_total", factory: factory)
        subscriptionsOfEndedConnections = Metrics.Counter(
            label: "navigator_subscriptions_of_ended_connections_total", factory: factory)
        forwardsSent = Metrics.Counter(
            label: "navigator_forwarded_total", dimensions: [("direction", "sent")], factory: factory)
        forwardsReceived = Metrics.Counter(
            label: "navigator_forwarded_total", dimensions: [("direction", "received")], factory: factory)
        clusterStrangers = Metrics.Counter(label: "navigator_cluster_strangers_total", factory: factory)
        leaseRenewalsFailed = Metrics.Counter(label: "navigator_lease_renewals_failed_total", factory: factory)
        rolloutStoreFailures = Metrics.Counter(label: "navigator_rollout_store_failures_total", factory: factory)
        traceparentInvalid = Metrics.Counter(label: "navigator_traceparent_invalid_total", factory: factory)
        resolvedByReader = Metrics.Counter(label: "navigator_intents_resolved_by_reader_total", factory: factory)
        partitionsHeld = Metrics.Gauge(label: "navigator_partitions_held", factory: factory)
        // A count kept by the store's writer, read when /metrics is asked (never decreases).
        fencedWrites = Metrics.Gauge(label: "navigator_fenced_writes_total", factory: factory)
        failedWrites = Metrics.Gauge(label: "navigator_state_writes_failed_total", factory: factory)
        packedSessions = Metrics.Gauge(label: "navigator_sessions_packed", factory: factory)
        packedMapped = Metrics.Gauge(
            label: "navigator_packed_session_bytes", dimensions: [("of", "blocks")], factory: factory)
        packedLive = Metrics.Gauge(
            label: "navigator_packed_session_bytes", dimensions: [("of", "sessions")], factory: factory)
        queueDepths = (0..<workers).map {
            Metrics.Gauge(label: "navigator_worker_queue_depth", dimensions: [("worker", "\($0)")], factory: factory)
        }
    }
}
