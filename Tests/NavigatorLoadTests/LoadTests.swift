import Foundation
import Locking
import Logging
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

@testable import NavigatorEngine
@testable import NavigatorLoad

#if canImport(Glibc)
    import Glibc
#endif

@Suite("navload")
struct LoadTests {
    @Test(
        "a child navload spawns (the floor's relay) inherits its standard streams, not the parent's other descriptors")
    func spawnedChildInheritsStandardStreamsOnly() throws {
        // A descriptor without close-on-exec, at a number the child would not open for itself:
        // the lowest free one from 300 up (F_DUPFD; dup2 to a fixed number would close whatever
        // another test's sockets had there — libzmq then aborted on its epoll set).
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let high = fcntl(ends[0], F_DUPFD, 300)
        try #require(high >= 300)
        defer {
            close(high)
            close(ends[0])
            close(ends[1])
        }
        let child = try Spawned(executable: "/bin/ls", arguments: ["/proc/self/fd"])
        defer { child.stop() }
        let listed = String(decoding: child.output.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(listed.contains("0") && listed.contains("1") && listed.contains("2"))
        #expect(!listed.contains("\(high)"))
    }

    @Test("the schedule is open-loop: due times follow the rate, producers share the indices")
    func schedule() {
        let schedule = Schedule(start: 1_000, rate: 4)
        #expect(schedule.due(0) == 1_000)
        #expect(schedule.due(1) == 1_000 + 250_000_000)
        #expect(schedule.due(8) == 1_000 + 2_000_000_000)
        #expect(schedule.count(in: 2.6) == 10)
        let shares = (0..<3).map { Array(Schedule.indices(producer: $0, of: 3, total: 8)) }
        #expect(shares == [[0, 3, 6], [1, 4, 7], [2, 5]])
        #expect(Set(shares.flatMap { $0 }) == Set(0..<8))
    }

    @Test("prepared intents cover the producer's share of the schedule and take their sent-at when due")
    func prepared() throws {
        var plan = LoadPlan()
        plan.sessions = 7
        let list = LoadRunner.prepare(producer: 1, of: 3, run: "r", plan: plan, map: .demo, total: 30)
        #expect(list.map(\.index) == Array(stride(from: 1, to: 30, by: 3)))
        #expect(list.map(\.session) == list.map { "load-\($0.index % 7)" })
        for due: Int64 in [0, 1, 127, 128, 1_763_712_000_123_456_789, .max] {
            var payload = list[0].payload
            let capacity = payload.capacity
            LoadRunner.appendSentAt(due, to: &payload)
            #expect(payload.capacity == capacity)  // room was reserved: no copy when it is sent
            let intent = try Navigator_V1_Intent(serializedBytes: payload)
            #expect(intent.sentAtUnixNanos == due)
            #expect(intent.id.hasPrefix("r-") && intent.id.hasSuffix("-1"))
            #expect(intent.session == list[0].session)
        }
    }

    @Test("latency percentiles come out of the histogram in microseconds")
    func latency() {
        var latency = Latency()
        for microseconds in 1...1000 { latency.record(nanoseconds: Int64(microseconds) * 1000) }
        latency.record(nanoseconds: -5)  // clock skew reads as zero, never negative
        let summary = latency.summary
        #expect(latency.count == 1001)
        #expect((499...501).contains(summary.p50))
        #expect((989...991).contains(summary.p99))
        #expect((999...1001).contains(summary.max))
        var other = Latency()
        other.record(nanoseconds: 5_000_000)
        latency.merge(other)
        #expect(latency.summary.max >= 4_990)
        #expect(Latency().summary.p99 == 0)
    }

    @Test("a rate holds only with p99 in bound, nothing lost, everything accounted and the rate achieved")
    func passing() {
        var report = LoadReport(
            targetRate: 1000, achievedRate: 990, sent: 100, measuredSeconds: 1, lateSends: 0,
            latency: .init(p50: 100, p90: 200, p99: 900, p999: 1500, max: 2000, mean: 150), batchesMeasured: 100,
            batchesLost: 0, resolved: 90, refreshed: 0, ignored: 5, parked: 3, rejected: 2, released: 0,
            serviceRate: 990, serviceCPU: nil, serviceRSSBytes: nil)
        #expect(FindMax.passed(report, p99Bound: 1000))
        #expect(!FindMax.passed(report, p99Bound: 800))
        report.batchesLost = 1
        #expect(!FindMax.passed(report, p99Bound: 1000))
        report.batchesLost = 0
        report.rejected = 1
        #expect(!FindMax.passed(report, p99Bound: 1000))
        report.rejected = 2
        report.achievedRate = 900
        #expect(!FindMax.passed(report, p99Bound: 1000))
        report.achievedRate = 990
        report.batchesMeasured = 0  // nothing measured proves nothing
        #expect(!FindMax.passed(report, p99Bound: 1000))
    }

    @Test("a short run against a service: every intent is accounted for and nothing is lost")
    func shortRun() async throws {
        let directory = TestService.temporaryDirectory("navload")
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = TestService.configuration(dataDirectory: directory)
        let server = try Engine(
            configuration: configuration, logger: TestService.logger("navload-test", level: .critical))
        try await server.start()
        do {
            var plan = LoadPlan()
            let endpoints = server.endpoints
            plan.endpoints = ServerEndpoints(
                intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0])
            plan.rate = 500
            plan.duration = 1
            plan.warmup = 0.2
            plan.sessions = 20
            plan.producers = 2
            plan.servicePID = getpid()
            plan.soakInterval = 0.5
            plan.latencyLog = directory.appendingPathComponent("latency.csv").path
            let samples = Locked(0)
            let report = try await LoadRunner.run(plan, soakProgress: { _ in samples.withLock { $0 += 1 } })
            // --latency-log: a row for each measured batch, by due time, within the measured
            // second (and its drain); the slowest is the report's max (3 significant digits).
            let log = try String(contentsOfFile: plan.latencyLog!, encoding: .utf8).split(separator: "\n")
            #expect(log.first?.hasPrefix("# due_ms,latency_us") == true && log.first?.contains(" ns") == true)
            let rows = log.dropFirst().map { $0.split(separator: ",").map { Double($0)! } }
            #expect(UInt64(rows.count) == report.batchesMeasured)
            #expect(rows.allSatisfy { $0.count == 2 && $0[0] >= 0 && $0[0] <= 1_000 && $0[1] >= 0 })
            #expect(zip(rows, rows.dropFirst()).allSatisfy { $0[0] <= $1[0] })
            let slowest = rows.map { $0[1] }.max() ?? 0
            #expect(abs(slowest - Double(report.latency.max)) <= Double(report.latency.max) / 500 + 1)
            // Soak samples every 0.5 s of the ~1.2 s run and its drain (how many depends on how
            // the machine's load delays the sampler), and one more at the end; each is reported
            // as it is taken. navload's own CPU too.
            #expect(report.samples.count >= 1 && report.samples.count == samples.withLock { $0 })
            #expect(report.samples.allSatisfy { $0.rssBytes > 0 && $0.cpu >= 0 })
            #expect(report.loadCPU != nil)
            #expect((report.cpuMicrosecondsPerIntent ?? 0) > 0)
            #expect(report.sent == 600)
            #expect(report.accounted == 600)
            #expect(report.batchesLost == 0)
            #expect(report.batchesMeasured > 0)
            #expect(report.resolved > 0 && report.rejected > 0)  // the mix has a share of invalid intents
            #expect(report.serviceRSSBytes != nil)
            #expect(report.meanIntentBytes > 30 && report.meanIntentBytes < 300)
            // The service cannot have got through the 600 intents before the last was due, 599
            // intervals of 2 ms after the first.
            let rate = try #require(report.serviceRate)
            #expect(rate > 0 && rate <= 600 / (599 / 500.0))
            // CPU is a share of the machine's cores over the whole run, not of the send time alone.
            let cpu = try #require(report.serviceCPU)
            #expect(cpu >= 0 && cpu <= Double(EngineConfiguration.onlineCores) * 1.05)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("the latency log: rows by due time in milliseconds from the start, three decimals; what did not fit is said")
    func latencyLogRows() throws {
        let directory = TestService.temporaryDirectory("latency-log")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("log.csv").path
        let start: Int64 = 1_000_000_000
        try LoadRunner.writeLatencyLog(
            (rows: [(start + 1_234_567, 2_500_000), (start + 5_000, 99_999), (start - 10, 7_000)], dropped: 0),
            from: start, to: path)
        #expect(
            try String(contentsOfFile: path, encoding: .utf8)
                == "# due_ms,latency_us: each measured batch, by its intent's due time; due_ms 0 is 1000000000 ns\n"
                + "0.000,7\n0.005,99\n1.234,2500\n")
        try LoadRunner.writeLatencyLog((rows: [(start, 1_000)], dropped: 3), from: start, to: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("(the first 10000000; 3 later batches left out)") && text.hasSuffix("\n0.000,1\n"))
        // A path that cannot be written is an error that names it.
        #expect(throws: ClientError.self) {
            try LoadRunner.writeLatencyLog(
                (rows: [], dropped: 0), from: start, to: directory.appendingPathComponent("no/such/dir.csv").path)
        }
    }

    @Test("--latency-log to a path that cannot be written is refused before the run, saying so")
    func latencyLogPathRefused() async throws {
        let (status, output) = try await runBuilt(
            "navload",
            ["--intents", "tcp://127.0.0.1:1", "--duration", "1", "--latency-log", "/nonexistent-navload-dir/log.csv"])
        #expect(status == 64, "\(output)")
        #expect(output.contains("--latency-log /nonexistent-navload-dir/log.csv cannot be created"), "\(output)")
    }

    @Test("soak growth is measured over the second half; CPU per intent is CPU seconds over intents sent")
    func soakFigures() {
        var report = LoadReport(
            targetRate: 1000, achievedRate: 1000, sent: 2_000, measuredSeconds: 2, lateSends: 0,
            latency: .init(p50: 1, p90: 1, p99: 1, p999: 1, max: 1, mean: 1), batchesMeasured: 1, batchesLost: 0,
            resolved: 2_000, refreshed: 0, ignored: 0, parked: 0, rejected: 0, released: 0, serviceRate: 1000,
            serviceCPU: 0.5, serviceRSSBytes: 100)
        #expect(report.rssGrowthSecondHalf == nil)
        report.samples = [100, 200, 400, 420, 440].enumerated().map {
            .init(seconds: Double($0.offset), rssBytes: UInt64($0.element), cpu: 0.1)
        }
        // The sample at half time is the third (400); the last is 440: +10 %.
        #expect(abs((report.rssGrowthSecondHalf ?? 0) - 0.10) < 1e-9)
        // The sample at three quarters of the time is the fourth (420): +4.76 %.
        #expect(abs((report.rssGrowthLastQuarter ?? 0) - (440.0 / 420 - 1)) < 1e-9)
        report.serviceCPUSeconds = 0.05
        #expect(abs((report.cpuMicrosecondsPerIntent ?? 0) - 25) < 1e-9)
        report.streamBatches = 4_000
        #expect(abs((report.cpuMicrosecondsPerStreamBatch ?? 0) - 12.5) < 1e-9)
        // Not all accounted for: navigatord was still working, so its CPU says nothing per intent
        // or per batch.
        report.serviceRate = nil
        #expect(report.cpuMicrosecondsPerIntent == nil)
        #expect(report.cpuMicrosecondsPerStreamBatch == nil)
    }

    @Test("the navigatord under test is told by the socket it listens on")
    func listeningSocket() async throws {
        let (endpoint, owned) = try await DedicatedThread.run(name: "navload-test") {
            let context = try Context()
            defer { context.shutdown() }
            let pull = try Socket(context, type: .pull)
            try pull.set(.linger, .zero)
            try pull.bind("tcp://127.0.0.1:*")
            let endpoint = try pull.lastEndpoint
            let inodes = ProcessStats.listeningSockets(endpoint)
            // One of this process's descriptors is that socket (any of them: other tests in
            // this process may hold thousands).
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            let owned = descriptors.contains { fd in
                var target = [CChar](repeating: 0, count: 128)
                let count = readlink("/proc/self/fd/\(fd)", &target, 127)
                guard count > 0 else { return false }
                let link = String(decoding: target.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                return link.hasPrefix("socket:[") && inodes.contains(UInt64(link.dropFirst(8).dropLast()) ?? 0)
            }
            pull.close()
            return (endpoint, owned)
        }
        #expect(owned, "no descriptor of this process listens on \(endpoint)")
        #expect(ProcessStats.listeningSockets("tcp://127.0.0.1:1").isEmpty)
    }

    /// The built navload (the relay is navload itself), or nil with the test's issue recorded.
    private static func builtNavload() -> String? {
        let navload = BuiltProducts.executable("navload").path
        guard FileManager.default.isExecutableFile(atPath: navload) else {
            Issue.record("navload is not built at \(navload); run swift build first (./dev test does)")
            return nil
        }
        return navload
    }

    @Test("the floor: navload relay passes every message on, and its CPU is read while it runs")
    func relayFloor() async throws {
        guard let navload = Self.builtNavload() else { return }
        // measure() throws unless the relay passed on every message sent; it stops the relay.
        // The CPU is read from /proc in clock ticks (10 ms): 4,000 messages cost the relay some
        // 25 of them (~60 µs each on this kind of machine); 500 in CI once read as none at all.
        let result = try await RelayFloor.measure(executable: navload, rate: 2_000, messageBytes: 80, seconds: 2)
        #expect(result.messages >= 3_600 && result.messages <= 4_400, "\(result.messages) messages in 2 s at 2,000/s")
        #expect(result.cores > 0, "the relay's CPU was not counted")
        // Every message carries its due time: the floor's latency is measured, in order.
        #expect(result.latency.p50 > 0 && result.latency.p50 <= result.latency.p99, "\(result.latency)")
        #expect(result.latency.p99 <= result.latency.max, "\(result.latency)")
        // The raw relay publishes the topic and the message as it came.
        #expect(
            result.frames == 2 && result.lastFrameBytes == 80,
            "\(result.frames) frames, the last \(result.lastFrameBytes) bytes")
    }

    @Test("the floor over ipc: the relay binds its sockets as Unix sockets, and their directory goes with it")
    func relayFloorOverIPC() async throws {
        guard let navload = Self.builtNavload() else { return }
        let result = try await RelayFloor.measure(
            executable: navload, rate: 200, messageBytes: 80, seconds: 1, pull: .ipc, xpub: .ipc)
        #expect(result.frames == 2 && result.latency.p50 > 0, "\(result.frames) frames, \(result.latency)")
        let paths = result.endpoints.map { $0.hasPrefix("ipc://") ? String($0.dropFirst(6)) : $0 }
        #expect(
            paths.count == 2 && paths[0].hasSuffix("/pull") && paths[1].hasSuffix("/xpub"),
            "the relay bound \(result.endpoints)")
        // Made for the run and removed after it (the relay is stopped with a signal).
        let directory = (paths[0] as NSString).deletingLastPathComponent
        #expect(!FileManager.default.fileExists(atPath: directory), "\(directory) outlived the relay")
        // One socket each way: as a run reaching intents over ipc and commands over tcp.
        let mixed = try await RelayFloor.measure(
            executable: navload, rate: 200, messageBytes: 80, seconds: 1, pull: .ipc, xpub: .tcp)
        #expect(
            mixed.endpoints.count == 2 && mixed.endpoints[0].hasPrefix("ipc://")
                && mixed.endpoints[1].hasPrefix("tcp://127.0.0.1:"),
            "the relay bound \(mixed.endpoints)")
        #expect(RelayFloor.Transport(of: "ipc:///run/navigator/intents") == .ipc)
        #expect(RelayFloor.Transport(of: "tcp://127.0.0.1:7401") == .tcp)
    }

    @Test("--floor-work: the relay spins on each message before publishing it")
    func relayFloorWork() async throws {
        guard let navload = Self.builtNavload() else { return }
        // A message is published 1 ms after it arrives at the earliest, so half of them reach the
        // subscriber 1 ms or more after they fell due: a bound load can only raise. (The raw
        // relay's p50 is a few hundred µs; without the spin this fails.)
        let working = try await RelayFloor.measure(
            executable: navload, rate: 200, messageBytes: 80, seconds: 1, workNanoseconds: 1_000_000)
        #expect(working.latency.p50 >= 1_000, "p50 \(working.latency.p50) µs, below the 1 ms spun on each message")
        #expect(RelayFloor.workProblem(workMicroseconds: 1_000, rate: 200) == nil)
        #expect(
            RelayFloor.workProblem(workMicroseconds: 1_000, rate: 2_000)?.contains("2.00 s of work a second") == true)
        #expect(RelayFloor.workProblem(workMicroseconds: -1, rate: 200)?.contains("out of range") == true)
    }

    @Test("--floor-batches: the relay publishes each message in a batch's three frames, its due time kept")
    func relayFloorBatches() async throws {
        guard let navload = Self.builtNavload() else { return }
        // (The raw relay's two frames: relayFloor.)
        let shaped = try await RelayFloor.measure(
            executable: navload, rate: 200, messageBytes: 80, seconds: 1, batches: true)
        #expect(
            shaped.frames == 3 && shaped.lastFrameBytes == RelayFloor.batchShape.payload,
            "\(shaped.frames) frames, the last \(shaped.lastFrameBytes) bytes")
        // The payload starts with the message, its due time first: latency is measured as for
        // the raw relay (a payload of anything else reads as a due time decades away).
        #expect(shaped.latency.p50 > 0 && shaped.latency.max < 10_000_000, "\(shaped.latency)")
    }

    @Test(
        "against two instances on PostgreSQL: intents to both, navload follows both and accounts for every one",
        .enabled(if: TestPostgres.enabled))
    func cluster() async throws {
        try await TestPostgres.withDatabase { url in
            try await TestService.withInstances(["one", "two"], url: url, { $0.leaseSeconds = 2 }) { servers in
                let (first, second) = (servers[0], servers[1])
                // Until the partitions are split and each instance knows where to forward the
                // other's sessions.
                let ownerships = [try #require(first.store.ownership), try #require(second.store.ownership)]
                let deadline = ContinuousClock.now + .seconds(15)
                while ownerships.contains(where: { $0.served.count != 128 })
                    || (0..<40).contains(where: { i in
                        ownerships.contains {
                            !$0.serves($0.partition(of: "load-\(i)")) && $0.forwardEndpoint(of: "load-\(i)") == nil
                        }
                    })
                {
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError("the instances did not split the partitions and learn each other")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                var plan = LoadPlan()
                plan.endpoints = ServerEndpoints(
                    intents: first.endpoints.intents[0], requests: first.endpoints.requests[0],
                    commands: first.endpoints.commands[0])
                plan.intentEndpoints = [first.endpoints.intents[0], second.endpoints.intents[0]]
                plan.rate = 400
                plan.duration = 1
                plan.warmup = 0.2
                plan.sessions = 40
                plan.servicePID = getpid()
                let report = try await LoadRunner.run(plan)
                #expect(report.instances == 2)
                #expect(report.sent == 480)
                #expect(report.accounted == 480, "\(report)")
                #expect(report.batchesLost == 0)
                // Batches of both instances' sessions reached the subscriber.
                #expect(report.batchesMeasured > 0)
                let served = servers.map { $0.counters.outcomes[Int(Navigator_V1_Outcome.resolved.rawValue)].load }
                #expect(served.allSatisfy { $0 > 0 }, "resolved per instance: \(served)")
            }
        }
    }
}
