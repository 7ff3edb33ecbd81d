import Histogram

/// End-to-end latencies in microseconds, recorded in an HdrHistogram (3 significant digits,
/// up to an hour).
public struct Latency: Sendable {
    public private(set) var histogram = Histogram<UInt64>(
        highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)

    public init() {}

    /// Records one latency given in nanoseconds (negative clock skew counts as 0).
    public mutating func record(nanoseconds: Int64) {
        _ = histogram.record(UInt64(max(0, nanoseconds / 1000)))
    }

    public mutating func merge(_ other: Latency) {
        histogram.add(other.histogram)
    }

    public var count: UInt64 { histogram.totalCount }

    /// The summary a report shows, in microseconds.
    public var summary: Summary {
        guard count > 0 else { return Summary(p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0) }
        return Summary(
            p50: histogram.valueAtPercentile(50), p90: histogram.valueAtPercentile(90),
            p99: histogram.valueAtPercentile(99),
            p999: histogram.valueAtPercentile(99.9), max: histogram.max, mean: histogram.mean)
    }

    public struct Summary: Hashable, Sendable, Codable {
        public var p50: UInt64
        public var p90: UInt64
        public var p99: UInt64
        public var p999: UInt64
        public var max: UInt64
        public var mean: Double
    }
}
