import NavigatorCore
import NavigatorMix
import TestThreads
import Testing

/// `navload resolver`'s benchmark, stopped after a number of operations so that its report is
/// the same on any machine.
@Suite("Resolver benchmark")
struct ResolverBenchmarkTests {
    @Test("keeping each session as it was found does not change what the resolutions do")
    func keepingBefore() async throws {
        try await offPool {
            let plain = ResolverBenchmark(map: .demo, sessions: 50, seed: 3, operationLimit: 8_000)
            var keeping = plain
            keeping.keepingBefore = true
            let a = try plain.run()
            let b = try keeping.run()
            #expect(a.operations == 8_192 && b.operations == 8_192)
            #expect(a.outcomes == b.outcomes)
            #expect(a.events == b.events && a.released == b.released)
            #expect(a.meanScreens == b.meanScreens && a.meanParked == b.meanParked)
            // The mix reaches the resolver's outcomes, not only the easy ones.
            for outcome in ["resolved", "ignored", "rejected"] { #expect((a.outcomes[outcome] ?? 0) > 0, "\(outcome)") }
            #expect(a.outcomes.keys.contains { $0.hasPrefix("parked") } && a.released > 0)
        }
    }
}
