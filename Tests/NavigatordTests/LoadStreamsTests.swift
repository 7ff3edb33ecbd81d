import Foundation
import NavigatorClient
import NavigatorLoad
import NavigatorTestSupport
import Testing

@testable import NavigatorEngine
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

@Suite("navload against navigatord")
struct LoadStreamsTests {
    @Test("--streams: the run's sessions followed over SSE too; each batch's delivery measured from its due time")
    func streams() async throws {
        try await withNavigatord { server, endpoints in
            var plan = LoadPlan()
            plan.endpoints = ServerEndpoints(
                intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0])
            plan.rate = 400
            plan.duration = 1
            plan.warmup = 0.2
            plan.sessions = 20
            plan.streams = 20
            plan.http = try #require(server.httpAddress)
            plan.servicePID = getpid()
            let report = try await LoadRunner.run(plan)
            #expect(report.accounted == 480)
            #expect(report.streams == 20)
            // One stream per session, each open before the run: every batch the ZeroMQ subscriber
            // received reached a stream. (Counted whole: the subscriber measures a batch from its
            // intent's sent-at, a stream from its due time, so the warm-up's edge differs.)
            #expect(report.streamBatchesMeasured > 0)
            #expect(report.batches > 0 && report.streamBatches == report.batches, "\(report)")
            #expect((report.streamLatency?.p50 ?? 0) > 0)
        }
    }
    @Test("--ack-share: shells that acknowledge make intents land; the report says how many and how fast")
    func acknowledging() async throws {
        try await withNavigatord { _, endpoints in
            var plan = LoadPlan()
            plan.endpoints = ServerEndpoints(
                intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0])
            plan.rate = 300
            plan.duration = 1
            plan.warmup = 0
            plan.sessions = 40
            plan.ackShare = 100
            plan.servicePID = getpid()
            let report = try await LoadRunner.run(plan)
            #expect(report.acknowledged > 0 && report.acknowledgementsFailed == 0, "\(report)")
            // Landed: acknowledged in time, or already shown; at most what was resolved,
            // refreshed, ignored or released.
            #expect(
                report.landed > 0
                    && report.landed <= report.resolved + report.refreshed + report.ignored + report.released)
            // Acknowledged within the window (10 s): the median's bucket is one of its bounds.
            let median = try #require(report.landQuantile(0.5))
            #expect(median <= 10 && report.landBounds.contains(median), "\(report.landBounds) \(median)")
        }
    }
}
