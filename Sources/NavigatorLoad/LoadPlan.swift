import NavigatorClient
import NavigatorWire

/// What one load run does.
public struct LoadPlan: Hashable, Sendable {
    public var endpoints = ServerEndpoints()
    /// Where the producers send intents: every producer connects to each (ZeroMQ's PUSH takes
    /// them in turn, like a load-balanced address). Empty: `endpoints.intents` alone.
    public var intentEndpoints: [String] = []
    /// Intents per second, in all.
    public var rate: Double = 10_000
    /// Measured time, after the warm-up.
    public var duration: Double = 10
    /// Time sent but not measured, first.
    public var warmup: Double = 2
    /// Sessions the intents are spread over (`load-0`, `load-1`, ...).
    public var sessions = 1000
    /// Producer threads, each with its own connection.
    public var producers = 2
    /// Measure every `sample`-th session's batches (1: all).
    public var sample = 1
    /// How long to wait for navigatord's answers.
    public var timeout: Double = 5
    /// The service's process id for CPU and RSS; when nil, the navigatord running here (of
    /// several, the one listening on the intents endpoint).
    public var servicePID: Int32?
    /// Soak: sample navigatord's RSS and CPU every this many seconds (nil: only at the end).
    public var soakInterval: Double?
    public var seed: UInt64 = 1
    /// HTTP streams (SSE) of the run's sessions to follow besides the ZeroMQ subscriber (0: none).
    public var streams = 0
    /// navigatord's HTTP endpoint, host:port, for the streams.
    public var http = "127.0.0.1:7480"
    /// The share of sessions (percent, chosen by a stable hash of the session id) whose batches
    /// navload acknowledges as a shell would (an `ack` client event with the batch's seq), so
    /// that navigatord's landing figures have shells to count.
    public var ackShare: Double = 0
    /// Write each measured batch's due time and latency to this file (CSV), to see when the
    /// slow ones came; at most ``LoadPlan/latencyLogLimit`` rows.
    public var latencyLog: String?
    /// The rows a latency log holds at most (16 bytes each in memory while the run lasts).
    public static let latencyLogLimit = 10_000_000

    public init() {}

    /// The intents endpoints the producers connect to.
    public var producerEndpoints: [String] { intentEndpoints.isEmpty ? [endpoints.intents] : intentEndpoints }

    public var measuredSessions: [String] {
        stride(from: 0, to: sessions, by: max(1, sample)).map { "load-\($0)" }
    }
}

/// What a run measured.
public struct LoadReport: Hashable, Sendable, Codable {
    public var targetRate: Double
    public var achievedRate: Double
    public var sent: Int
    public var measuredSeconds: Double
    /// Producers sending later than due by more than a millisecond.
    public var lateSends: Int
    /// End-to-end latency in microseconds, from the intent's due time to its batch's arrival.
    public var latency: Latency.Summary
    public var batchesMeasured: UInt64
    /// Batches the subscriber received, the warm-up's included.
    public var batches: UInt64 = 0
    /// Batches missed by the subscriber (seq gaps).
    public var batchesLost: UInt64
    /// From navigatord's stats, before and after.
    public var resolved: UInt64
    public var refreshed: UInt64
    public var ignored: UInt64
    public var parked: UInt64
    public var rejected: UInt64
    public var released: UInt64
    /// Intents per second navigatord got through: all sent, over the time from the first one's
    /// due time until its counters accounted for the last (to 0.1 s). Below the target rate
    /// when the service cannot keep up; `nil` when it did not account for all in time.
    public var serviceRate: Double?
    /// navigatord's CPU use over the whole run, warm-up to drained (1.0 = one core), and its
    /// resident memory after it.
    public var serviceCPU: Double?
    public var serviceRSSBytes: UInt64?
    /// The navigatord instances the run followed (several on PostgreSQL: the `instances`
    /// request's list): their batches, counters, CPU and memory are added up.
    public var instances: Int = 1
    /// HTTP streams followed (--streams), the batches they delivered, and the latency of those
    /// delivered after the warm-up.
    public var streams: Int = 0
    public var streamBatches: UInt64 = 0
    public var streamBatchesMeasured: UInt64 = 0
    public var streamLatency: Latency.Summary? = nil
    /// --ack-share: batches acknowledged (the event applied), and acknowledgements refused or
    /// unanswered.
    public var acknowledged: UInt64 = 0
    public var acknowledgementsFailed: UInt64 = 0
    /// navigatord's landing figures over the run (stats before and after): intents landed, and
    /// the time to land of the acknowledged ones by bucket (`landBounds`, in seconds; the last
    /// count is beyond them).
    public var landed: UInt64 = 0
    public var landTimes: [UInt64] = []
    public var landBounds: [Double] = []

    /// The `q` quantile of the time to land, as the upper bound of its bucket in seconds (nil:
    /// nothing acknowledged; infinity: beyond the last bound).
    public func landQuantile(_ q: Double) -> Double? {
        LandingHistogram.quantile(q, counts: landTimes, bounds: landBounds)
    }

    /// navigatord's CPU time per batch delivered on the HTTP streams, in microseconds; nil
    /// unless it accounted for every intent (``serviceRate``), as ``cpuMicrosecondsPerIntent``.
    public var cpuMicrosecondsPerStreamBatch: Double? {
        guard let serviceCPUSeconds, streamBatches > 0, serviceRate != nil else { return nil }
        return serviceCPUSeconds / Double(streamBatches) * 1_000_000
    }
    /// navload's own CPU use over the same time (it shares the machine).
    public var loadCPU: Double?
    /// Soak: navigatord's RSS and CPU (cores over the interval) every `soakInterval` seconds.
    public var samples: [Sample] = []

    public struct Sample: Hashable, Sendable, Codable {
        public var seconds: Double
        public var rssBytes: UInt64
        public var cpu: Double
    }

    /// Soak: RSS growth over the second half of the samples (last over the one at half time,
    /// minus 1); nil with fewer than four samples.
    public var rssGrowthSecondHalf: Double? { rssGrowth(since: samples.count / 2) }

    /// Soak: RSS growth over the last quarter of the samples (last over the one at three
    /// quarters of the time, minus 1) — whether it still grows at the end or has settled; nil
    /// with fewer than four samples.
    public var rssGrowthLastQuarter: Double? { rssGrowth(since: samples.count * 3 / 4) }

    private func rssGrowth(since index: Int) -> Double? {
        guard samples.count >= 4, let last = samples.last else { return nil }
        let start = samples[index]
        guard start.rssBytes > 0 else { return nil }
        return Double(last.rssBytes) / Double(start.rssBytes) - 1
    }

    /// navigatord's CPU seconds over the run (warm-up to drained).
    public var serviceCPUSeconds: Double?

    /// navigatord's CPU time per intent sent, in microseconds; nil unless it accounted for every
    /// intent (``serviceRate``): otherwise it was still working, and its CPU read at the end
    /// divided by all sent understated the figure (BENCHMARKS.md, saturation).
    public var cpuMicrosecondsPerIntent: Double? {
        guard let serviceCPUSeconds, sent > 0, serviceRate != nil else { return nil }
        return serviceCPUSeconds / Double(sent) * 1_000_000
    }
    /// The mean size of an intent message as sent (session frame plus payload), in bytes.
    public var meanIntentBytes: Int = 0

    /// Outcomes the service reported for this run's intents.
    public var accounted: UInt64 { resolved + refreshed + ignored + parked + rejected }
}
