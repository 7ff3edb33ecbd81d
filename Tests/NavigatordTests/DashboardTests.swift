import Foundation
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorHTTP

@Suite("Dashboard: an hour of samples in a ring, each the counters' change over its interval")
struct DashboardTests {
    static func stats(
        resolved: UInt64, rejections: [String: UInt64] = [:], landed: UInt64 = 0, notLanded: UInt64 = 0,
        land: [UInt64] = [0, 0, 0], expired: UInt64 = 0, sessions: UInt64 = 0
    ) -> Navigator_V1_Stats {
        .with {
            $0.intentsByOutcome = ["resolved": resolved, "parked": 3]
            $0.rejectionsByCode = rejections
            $0.sessions = sessions
            $0.landingWindowSeconds = 10
            $0.routes = [
                .with {
                    $0.route = "chat"
                    $0.intentsByOutcome = ["expired": expired]
                    $0.landed = landed
                    $0.notLanded = notLanded
                    $0.landBucketBoundsSeconds = [0.001, 0.01]
                    $0.landBucketCounts = land
                }
            ]
        }
    }

    @Test("a sample is the change of each counter; the gauges are as they are at its end")
    func difference() {
        let sample = DashboardHistory.difference(
            from: Self.stats(resolved: 10, rejections: ["expired": 1], landed: 4, land: [1, 2, 0]), at: 1_000,
            to: Self.stats(
                resolved: 25, rejections: ["expired": 3, "unknown_screen": 2], landed: 9, notLanded: 2,
                land: [1, 5, 2], expired: 2, sessions: 7),
            at: 6_000)
        #expect(sample.at == 6_000 && sample.seconds == 5)
        #expect(sample.intents == ["resolved": 15, "expired": 2])  // parked did not change
        #expect(sample.rejections == ["expired": 2, "unknown_screen": 2])
        #expect(sample.landed == ["chat": 5] && sample.notLanded == ["chat": 2])
        #expect(sample.land == [0, 3, 2])
        #expect(sample.sessions == 7)
    }

    @Test("the ring keeps the last samples, oldest first, and a last one up to now")
    func ring() {
        let history = DashboardHistory(interval: .seconds(5), capacity: 3)
        for step in 0...5 { history.record(Self.stats(resolved: UInt64(step * 10)), at: Int64(step) * 5_000) }
        let document = history.document(Self.stats(resolved: 52), at: 27_000)
        #expect(document.samples.map(\.at) == [15_000, 20_000, 25_000, 27_000])
        #expect(document.samples.map { $0.intents["resolved"] ?? 0 } == [10, 10, 10, 2])
        #expect(document.capacity == 3 && document.intervalSeconds == 5 && document.bounds == [0.001, 0.01])
        // Nothing before the first sample.
        let empty = DashboardHistory().document(Self.stats(resolved: 1), at: 1)
        #expect(empty.samples.isEmpty)
    }
}
