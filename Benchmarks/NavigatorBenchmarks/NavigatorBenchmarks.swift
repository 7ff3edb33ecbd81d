@preconcurrency import Benchmark
import NavigatorCore
import NavigatorMix
import NavigatorWire

/// The realistic mix of `navload resolver` (IntentMix on the demo map) over 1,000 signed-in
/// sessions: 1,000 operations (intents and client events) per iteration.
struct MixFixture {
    let resolver: Resolver
    var states: [SessionState]
    let actions: [(session: Int, action: IntentMix.Action)]
    var index = 0
    var now: Int64 = 1_700_000_000_000_000_000
    /// Each resolution's arrays, handed back for the next (as a worker does).
    var buffers = ResolutionBuffers()

    init() throws {
        resolver = try Resolver(map: .demo)
        var mix = IntentMix(map: .demo, seed: 1)
        var random = SplitMix64(seed: 2)
        actions = (0..<100_000).map { _ in
            let session = Int(random.next() % 1000)
            return (session, mix.next(session: "s\(session)"))
        }
        var signedIn = resolver.initialState()
        _ = resolver.apply(.conditions(["authenticated": true]), to: &signedIn, now: 0)
        states = Array(repeating: signedIn, count: 1000)
    }

    /// One operation of the mix, as a worker does it.
    mutating func step() {
        let (session, action) = actions[index]
        index = index + 1 == actions.count ? 0 : index + 1
        now += 5_000_000
        blackHole(resolver.expire(&states[session], now: now))
        switch action {
        case .intent(let intent):
            var resolution = resolver.resolve(intent, into: &states[session], now: now, buffers: &buffers)
            blackHole(resolution.outcome)
            buffers.recycle(&resolution)
        case .event(let event):
            var result = resolver.apply(event, to: &states[session], now: now, buffers: &buffers)
            blackHole(result.echo)
            buffers.recycle(&result)
        }
    }
}

/// A batch as a typical push makes it: select a tab, push a screen with one info entry.
let typicalBatch = Batch(
    session: "session-0042", seq: 17, intentID: "9f0c4c1e-2b7d-4d5f-a1e3-000000000017", animated: true,
    commands: [
        .selectTab("chats"),
        .push(Screen(id: 31, ScreenContext("chat", ["conversationId": "42"])), onto: .tab("chats")),
    ], treeVersion: 18, summary: "push chat(conversationId=42) onto tab chats", cause: .intent, epoch: 7)

let benchmarks: @Sendable () -> Void = {
    // Names without spaces: the thresholds' file names are read back as given.
    // Allocation counts are what these benchmarks keep as thresholds: they are the same on every
    // machine, so a change that allocates more shows (beyond 1 % over the stored p90). Throughput
    // is shown, never checked.
    Benchmark.defaultConfiguration = .init(
        metrics: [.mallocCountTotal, .throughput], maxDuration: .seconds(2), maxIterations: 200,
        thresholds: [.mallocCountTotal: BenchmarkThresholds(relative: [.p90: 1.0])])

    // 1,000 operations of the mix.
    Benchmark("resolve") { benchmark in
        var fixture = try MixFixture()
        for _ in 0..<20_000 { fixture.step() }  // trees and parked lists grow to their usual size
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            for _ in 0..<1000 { fixture.step() }
        }
    }

    // 1,000 typical batches, encoded as a worker's publisher encodes them: into the one array it
    // keeps (its frames are refilled too, so publishing a batch makes no object of its own).
    Benchmark("encodeBatch") { benchmark in
        var bytes: [UInt8] = []
        typicalBatch.encode(into: &bytes)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            for _ in 0..<1000 {
                typicalBatch.encode(into: &bytes)
                blackHole(bytes.count)
            }
        }
    }

    // 1,000 summaries of a typical resolution (a push onto a tab), as every batch carries one.
    Benchmark("summary") { benchmark in
        let resolver = try Resolver(map: .demo)
        var state = resolver.initialState()
        _ = resolver.apply(.conditions(["authenticated": true]), to: &state, now: 0)
        let intent = Intent(
            id: "9f0c4c1e-2b7d-4d5f-a1e3-000000000017", session: "session-0042",
            target: .path([ScreenContext("chat", ["conversationId": "42"])]))
        let resolution = resolver.resolve(intent, into: &state, now: 1)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            for _ in 0..<1000 { blackHole(resolution.summary) }
        }
    }

    // 1,000 wire intents, read as a worker reads them (IntentReader).
    Benchmark("decodeIntent") { benchmark in
        let intent = Navigator_V1_Intent.with {
            $0.id = "9f0c4c1e-2b7d-4d5f-a1e3-000000000017"
            $0.session = "session-0042"
            $0.path = [
                .with {
                    $0.screen = "chat"
                    $0.info = ["conversationId": "42"]
                }
            ]
            $0.source = "push"
        }
        let bytes: [UInt8] = try intent.serializedBytes()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            for _ in 0..<1000 {
                blackHole(try bytes.withUnsafeBytes { try IntentReader.read($0, session: "session-0042") })
            }
        }
    }

    // 1,000 encodings of the session holding the most ids after the mix, as the flush writes
    // them (hand-written, parked intents apart: they are encoded once and kept while unchanged).
    Benchmark("storeSession") { benchmark in
        var fixture = try MixFixture()
        for _ in 0..<20_000 { fixture.step() }
        let state = fixture.states.max { $0.recentIntentIDs.count < $1.recentIntentIDs.count }!
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            for _ in 0..<1000 { blackHole(Navigator_V1_StoredSession.encodedWithoutParked(state, seq: 99)) }
        }
    }
}
