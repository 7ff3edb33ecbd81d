import Locking
import NavigatorClient
import Synchronization
import ZeroMQ

/// The transport's limit on this machine: a raw libzmq PUSH -> PULL pipe over tcp loopback,
/// messages of the intents' size, one sending and one receiving thread — so a run's rate also
/// reads as a share of what the transport itself moves.
public enum Baseline {
    /// Messages per second through the pipe over `seconds`.
    public static func measure(messageSize: Int, seconds: Double) async throws -> Double {
        let context = try Context()
        let bound = Locked<String?>(nil)
        let received = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let receiver = try await Self.start("navload-base-rx") {
            let pull = try Socket(context, type: .pull)
            try pull.set(.receiveHighWaterMark, 100_000)
            try pull.bind("tcp://127.0.0.1:*")
            bound.withLock { $0 = try? pull.lastEndpoint }
            return {
                let message = Message()
                var poller = Poller()
                poller.add(pull)
                while !stop.load(ordering: .acquiring) {
                    guard (try? poller.poll(timeout: .milliseconds(20))) != nil else { return }
                    while (try? pull.tryReceive(into: message)) == true { received.wrappingAdd(1, ordering: .relaxed) }
                }
            }
        }
        let endpoint = bound.withLock { $0 } ?? ""
        let payload = [UInt8](repeating: 0x2A, count: messageSize)
        let sender = try await Self.start("navload-base-tx") {
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, 100_000)
            try push.connect(endpoint)
            return {
                while !stop.load(ordering: .acquiring) {
                    for _ in 0..<256 { _ = try? push.send(payload) }
                }
            }
        }
        let clock = ContinuousClock()
        try await Task.sleep(for: .milliseconds(300))  // connect and settle
        let start = received.load(ordering: .relaxed)
        let began = clock.now
        try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        let count = received.load(ordering: .relaxed) - start
        let elapsed = clock.now - began
        stop.store(true, ordering: .releasing)
        context.shutdown()
        for thread in [sender, receiver] { _ = try? await DedicatedThread.run(name: "navload-join") { thread.join() } }
        return Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// Runs `setup` on a new thread, then the loop it returns; returns once setup is done.
    private static func start(_ name: String, _ setup: @escaping @Sendable () throws -> (() -> Void)) async throws
        -> DedicatedThread
    {
        var started: DedicatedThread?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            started = DedicatedThread(name: name) {
                let loop: () -> Void
                do {
                    loop = try setup()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume()
                loop()
            }
        }
        return started!
    }
}

/// Steps the rate up until latency or loss says stop, and keeps the last rate that passed.
public enum FindMax {
    public struct Result: Sendable {
        public var best: LoadReport?
        public var steps: [LoadReport]
    }

    /// Whether a run sustained its rate: batches were measured at all, p99 within `bound`
    /// microseconds, nothing lost, every intent accounted for, and at least 95% of the target rate
    /// achieved.
    public static func passed(_ report: LoadReport, p99Bound bound: UInt64) -> Bool {
        report.batchesMeasured > 0 && report.latency.p99 <= bound && report.batchesLost == 0
            && report.accounted == UInt64(report.sent) && report.achievedRate >= 0.95 * report.targetRate
    }

    public static func run(
        _ plan: LoadPlan, p99Bound: UInt64, factor: Double = 1.5, maxSteps: Int = 12,
        progress: (@Sendable (LoadReport) -> Void)? = nil
    ) async throws -> Result {
        var result = Result(best: nil, steps: [])
        var step = plan
        for _ in 0..<maxSteps {
            let report = try await LoadRunner.run(step)
            result.steps.append(report)
            progress?(report)
            guard passed(report, p99Bound: p99Bound) else { break }
            result.best = report
            step.rate *= factor
        }
        return result
    }
}
