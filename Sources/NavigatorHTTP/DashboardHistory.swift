import Foundation
import Locking
import NavigatorPort
import NavigatorWire

/// The dashboard's recent history (issue 32): what the service did in each `interval`, the last
/// `capacity` intervals kept (an hour at the defaults: 720 samples of 5 s). Each sample holds the
/// differences of the service's counters over its interval — intents by outcome, rejections by
/// code, landed and not landed by route, the time-to-land histogram of all routes — and the
/// sessions and parked intents at its end. A sample takes a few hundred bytes, and about 100 more
/// for each route and reject code active in its interval: the ring lives in memory only (a few
/// hundred kilobytes with the demo map; a map of hundreds of busy routes takes megabytes) and
/// starts empty with the service.
final class DashboardHistory: Sendable {
    struct Sample: Codable, Sendable {
        /// The interval's end, unix milliseconds, and its length in seconds.
        var at: Int64
        var seconds: Double
        var intents: [String: UInt64] = [:]
        var rejections: [String: UInt64] = [:]
        var landed: [String: UInt64] = [:]
        var notLanded: [String: UInt64] = [:]
        /// Acknowledged intents by time to land, in ``Document/bounds`` (the last: beyond).
        var land: [UInt64] = []
        var sessions: UInt64 = 0
        var parked: UInt64 = 0
    }

    /// What `GET /v1/dashboard` answers.
    struct Document: Codable, Sendable {
        var intervalSeconds: Double
        var capacity: Int
        var landingWindowSeconds: UInt32
        /// Upper bounds of the time-to-land buckets, in seconds.
        var bounds: [Double]
        /// Oldest first; the last covers the time since the last full interval.
        var samples: [Sample]
    }

    let interval: Duration
    let capacity: Int
    private let state = Locked(State())

    private struct State {
        var samples: [Sample] = []
        /// Where the next sample goes once the ring is full.
        var next = 0
        var last: (at: Int64, stats: Navigator_V1_Stats)?
    }

    init(interval: Duration = .seconds(5), capacity: Int = 720) {
        self.interval = interval
        self.capacity = capacity
    }

    /// Takes a sample: the counters' change since the last one.
    func record(_ stats: Navigator_V1_Stats, at now: Int64) {
        state.withLock { state in
            defer { state.last = (now, stats) }
            guard let last = state.last else { return }
            let sample = Self.difference(from: last.stats, at: last.at, to: stats, at: now)
            if state.samples.count < capacity {
                state.samples.append(sample)
            } else {
                state.samples[state.next] = sample
                state.next = (state.next + 1) % capacity
            }
        }
    }

    /// The history, oldest first, with a last sample from the last full one to `stats`.
    func document(_ stats: Navigator_V1_Stats, at now: Int64) -> Document {
        let bounds = stats.routes.first?.landBucketBoundsSeconds ?? []
        let samples = state.withLock { state in
            var samples = Array(state.samples[state.next...] + state.samples[..<state.next])
            if let last = state.last, now > last.at {
                samples.append(Self.difference(from: last.stats, at: last.at, to: stats, at: now))
            }
            return samples
        }
        return Document(
            intervalSeconds: Double(interval.components.seconds), capacity: capacity,
            landingWindowSeconds: stats.landingWindowSeconds, bounds: bounds, samples: samples)
    }

    /// Samples every `interval` until cancelled.
    func run(port: any NavigatorPort) async {
        while !Task.isCancelled {
            record(port.statistics(), at: Self.nowMilliseconds())
            try? await Task.sleep(for: interval)
        }
    }

    static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func difference(
        from old: Navigator_V1_Stats, at then: Int64, to new: Navigator_V1_Stats, at now: Int64
    ) -> Sample {
        func delta(_ old: [String: UInt64], _ new: [String: UInt64]) -> [String: UInt64] {
            var result: [String: UInt64] = [:]
            for (key, value) in new where value > old[key, default: 0] { result[key] = value - old[key, default: 0] }
            return result
        }
        var sample = Sample(at: now, seconds: Double(max(1, now - then)) / 1000)
        sample.intents = delta(old.intentsByOutcome, new.intentsByOutcome)
        // Parked intents that expired or were refused when released: counted by route only.
        for outcome in ["expired", "refused"] {
            let now = new.routes.reduce(UInt64(0)) { $0 + $1.intentsByOutcome[outcome, default: 0] }
            let then = old.routes.reduce(UInt64(0)) { $0 + $1.intentsByOutcome[outcome, default: 0] }
            if now > then { sample.intents[outcome] = now - then }
        }
        sample.rejections = delta(old.rejectionsByCode, new.rejectionsByCode)
        let before = Dictionary(old.routes.map { ($0.route, $0) }, uniquingKeysWith: { first, _ in first })
        for route in new.routes {
            let previous = before[route.route]
            if route.landed > previous?.landed ?? 0 {
                sample.landed[route.route] = route.landed - (previous?.landed ?? 0)
            }
            if route.notLanded > previous?.notLanded ?? 0 {
                sample.notLanded[route.route] = route.notLanded - (previous?.notLanded ?? 0)
            }
            if sample.land.count < route.landBucketCounts.count {
                sample.land += Array(repeating: 0, count: route.landBucketCounts.count - sample.land.count)
            }
            for (index, count) in route.landBucketCounts.enumerated() {
                let was = previous.map { index < $0.landBucketCounts.count ? $0.landBucketCounts[index] : 0 } ?? 0
                if count > was { sample.land[index] += count - was }
            }
        }
        sample.sessions = new.sessions
        sample.parked = new.parkedIntents
        return sample
    }
}
