import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorMix
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a load test against a running navigatord: producers publish intents open-loop on their
/// schedule, a subscriber measures when each batch arrives, and the service's own counters say
/// what became of every intent.
public enum LoadRunner {
    /// What the progress line shows.
    public struct Progress: Sendable {
        public var elapsed: Double
        public var sent: Int
        public var rate: Double
        public var latency: Latency.Summary
        public var lost: UInt64
        /// Rejections published for the measured sessions so far (the mix has a share of
        /// invalid intents, so some are expected).
        public var rejected: UInt64
        /// Sends that failed (a producer stops at its first).
        public var sendErrors: Int
    }

    public static func run(
        _ plan: LoadPlan, progress: (@Sendable (Progress) -> Void)? = nil,
        soakProgress: (@Sendable (LoadReport.Sample) -> Void)? = nil
    ) async throws -> LoadReport {
        let connection = try await NavigatorConnection(
            endpoints: plan.endpoints, timeout: .milliseconds(Int(plan.timeout * 1000)))
        defer { Task { await connection.close() } }
        let routes = try await connection.routes()
        let map: RouteMap
        do {
            map = try RouteMapYAML.load(routes.yaml, source: "navigatord's route map")
        } catch {
            throw ClientError(.malformed, "the route map navigatord sent does not load: \(error)")
        }
        // Several instances (PostgreSQL): a session's batches come from its owner, so the run
        // follows every instance — their commands sockets, counters, CPU and memory.
        let cluster = try await Cluster.discover(connection, plan: plan)
        defer { Task { await cluster.close() } }
        let before = try await cluster.stats()
        let service = try cluster.processes(plan)
        // The subscriber, subscribed before anything is sent.
        let acks = AckCounts()
        var acknowledge: (@Sendable (String, UInt64) -> Void)? = nil
        if plan.ackShare > 0 {
            let share = plan.ackShare
            acknowledge = { (session: String, seq: UInt64) in
                // A shell of this share of sessions acknowledges each batch it applies.
                guard Double(StableHash.fnv1a(session) % 10_000) < share * 100 else { return }
                acks.inFlight.add(1, ordering: .relaxed)
                Task {
                    let applied: Bool
                    do {
                        _ = try await connection.report(.ack(seq), session: session, lastSeq: seq)
                        applied = true
                    } catch {
                        applied = false
                    }
                    // An answer after the report was made is not counted there: it was counted
                    // as unanswered.
                    if !acks.closed.load(ordering: .acquiring) {
                        if applied {
                            acks.applied.add(1, ordering: .relaxed)
                        } else {
                            acks.failed.add(1, ordering: .relaxed)
                        }
                    }
                    acks.inFlight.subtract(1, ordering: .releasing)
                }
            }
        }
        let listener = Listener(acknowledge: acknowledge, timeline: plan.latencyLog != nil)
        let topics =
            plan.sample <= 1
            ? [Topic.allBatches, Topic.allRejections]
            : plan.measuredSessions.flatMap { [Topic.batches($0), Topic.rejections($0)] }
        let subscriber = try await startSubscriber(
            cluster.commandEndpoints, curve: plan.endpoints.curve, topics: topics, listener: listener)
        let deadline = ContinuousClock.now + .seconds(plan.timeout)
        while try await cluster.stats().subscribersEach.enumerated().contains(where: {
            $0.element < before.subscribersEach[$0.offset] + 1
        }) {
            guard ContinuousClock.now < deadline else {
                listener.stop.store(true, ordering: .releasing)
                throw ClientError(.timeout, "navigatord did not see navload's subscription within \(plan.timeout) s")
            }
            try await Task.sleep(for: .milliseconds(5))
        }

        // Every intent is drawn and encoded before the clock starts, so that producers only send.
        let total = Schedule(start: 0, rate: plan.rate).count(in: plan.warmup + plan.duration)
        // Ids unique to this run: a second run against the same service must not be deduplicated.
        // Always seven characters: with the random number's own length (one to seven) an id was
        // 15 bytes in some runs and 16 in others, and Swift keeps a string of up to 15 bytes
        // without an allocation — navigatord's allocations an intent differed by one from run to
        // run (scripts/heap-per-intent.sh).
        let random = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let run = String(repeating: "0", count: 7 - random.count) + random
        let producerCount = max(1, plan.producers)
        let prepared = try await withThrowingTaskGroup(of: (Int, [Prepared]).self) { group in
            for producer in 0..<producerCount {
                group.addTask {
                    let list = try await DedicatedThread.run(name: "navload-prepare") {
                        prepare(producer: producer, of: producerCount, run: run, plan: plan, map: map, total: total)
                    }
                    return (producer, list)
                }
            }
            var lists = Array(repeating: [Prepared](), count: producerCount)
            for try await (producer, list) in group { lists[producer] = list }
            return lists
        }

        // Each message as it goes out: session frame, payload, and the sent-at field (10 bytes).
        let intentBytes = prepared.joined().reduce(0) { $0 + $1.session.utf8.count + $1.payload.count + 10 }

        // HTTP streams of the sessions (--streams): opened, and each with its snapshot, before
        // the clock starts; a batch's intent id gives its due time.
        let scheduleBox = Locked<Schedule?>(nil)
        let followers = StreamFollowers(count: plan.streams)
        if plan.streams > 0 {
            var indexByID: [String: Int] = [:]
            indexByID.reserveCapacity(total)
            for list in prepared { for intent in list { indexByID[intent.id] = intent.index } }
            let ids = indexByID
            try followers.start(http: plan.http, sessions: plan.sessions) { id in
                guard let index = ids[String(id)], let schedule = scheduleBox.withLock({ $0 }) else { return nil }
                return schedule.due(index)
            }
            let opened = ContinuousClock.now + .seconds(max(plan.timeout, 30))
            while followers.snapshots < plan.streams {
                if let failed = followers.failed {
                    followers.join()
                    throw ClientError(.socket, "navigatord's streams: \(failed)")
                }
                guard ContinuousClock.now < opened else {
                    followers.join()
                    throw ClientError(
                        .timeout, "only \(followers.snapshots) of \(plan.streams) streams had their snapshot in time")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        defer { followers.join() }

        // navigatord's CPU is counted from here: opening the streams (a snapshot each) is not
        // part of what the run measures.
        let cpuBefore = service?.cpuSeconds
        let navload = ProcessStats(pid: getpid())
        let ownBefore = navload.cpuSeconds
        let cpuFrom = wallClock()
        // Soak: navigatord's RSS and CPU every `soakInterval` seconds, until the run ends.
        let samples = Locked<[LoadReport.Sample]>([])
        let sampler = Task {
            guard let interval = plan.soakInterval, let service else { return }
            var lastCPU = service.cpuSeconds ?? 0
            var lastAt = wallClock()
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
                guard !Task.isCancelled, let cpu = service.cpuSeconds, let rss = service.residentBytes else { return }
                let now = wallClock()
                let sample = LoadReport.Sample(
                    seconds: Double(now - cpuFrom) / 1e9, rssBytes: rss,
                    cpu: (cpu - lastCPU) / max(Double(now - lastAt) / 1e9, 0.001))
                samples.withLock { $0.append(sample) }
                soakProgress?(sample)
                lastCPU = cpu
                lastAt = now
            }
        }
        defer { sampler.cancel() }

        // The schedule.
        let schedule = Schedule(start: wallClock() + 200_000_000, rate: plan.rate)
        scheduleBox.withLock { $0 = schedule }
        listener.measureFrom.store(schedule.due(schedule.count(in: plan.warmup)), ordering: .releasing)
        followers.measureFrom.store(schedule.due(schedule.count(in: plan.warmup)), ordering: .releasing)
        let tally = Tally()
        var producers: [DedicatedThread] = []
        for producer in 0..<producerCount {
            producers.append(
                try await startProducer(
                    producer, intents: prepared[producer], plan: plan, schedule: schedule, tally: tally))
        }
        // Progress while the producers run.
        let started = wallClock()
        let reporter = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                guard !Task.isCancelled else { return }
                let elapsed = Double(wallClock() - schedule.start) / 1e9
                let count = tally.sent.load(ordering: .relaxed)
                progress?(
                    Progress(
                        elapsed: elapsed, sent: count, rate: elapsed > 0 ? Double(count) / elapsed : 0,
                        latency: listener.latencySummary, lost: listener.lost, rejected: listener.rejected,
                        sendErrors: tally.failed.load(ordering: .relaxed)))
            }
        }
        for thread in producers { _ = try? await DedicatedThread.run(name: "navload-join") { thread.join() } }
        let finished = wallClock()
        // Let the service finish: until its counters account for every intent sent and the
        // subscriber has gone quiet (bounded by the timeout). Quiet alone is not enough when only
        // a sample of sessions is measured.
        let drainEnd = ContinuousClock.now + .seconds(plan.timeout)
        var seen = listener.batches + followers.batches
        var after = try await cluster.stats()
        func accounted(_ stats: Cluster.Counts) -> UInt64 {
            ["resolved", "refreshed", "ignored", "parked", "rejected"].reduce(0) { sum, key in
                sum + ((stats.outcomes[key] ?? 0) &- (before.outcomes[key] ?? 0))
            }
        }
        var accountedAt: Int64?
        // Streams that follow every session the same number of times, with every session's
        // batches heard on ZeroMQ, owe that many times the subscriber's batches: wait for them
        // too. (A stream a loaded machine delays went unnoticed by the quiet test alone, and the
        // run ended with its batches uncounted.)
        let streamsEach =
            plan.streams > 0 && plan.sample <= 1 && plan.streams % plan.sessions == 0
            ? UInt64(plan.streams / plan.sessions) : nil
        func streamsCaughtUp() -> Bool {
            guard let streamsEach else { return true }
            return followers.batches >= listener.batches * streamsEach
        }
        while ContinuousClock.now < drainEnd {
            try await Task.sleep(for: .milliseconds(100))
            after = try await cluster.stats()
            let now = listener.batches + followers.batches
            if accounted(after) >= UInt64(total) {
                if accountedAt == nil { accountedAt = wallClock() }
                if now == seen && streamsCaughtUp() { break }
            }
            seen = now
        }
        let cpuTo = wallClock()
        let cpuAfter = service?.cpuSeconds
        // Soak: a last sample once everything is accounted for, so the report ends with the
        // state after the run however the interval fell.
        sampler.cancel()
        await sampler.value
        if plan.soakInterval != nil, let cpuAfter, let cpuBefore, let rss = service?.residentBytes {
            let sample = LoadReport.Sample(
                seconds: Double(cpuTo - cpuFrom) / 1e9, rssBytes: rss,
                cpu: (cpuAfter - cpuBefore) / max(Double(cpuTo - cpuFrom) / 1e9, 0.001))
            samples.withLock { $0.append(sample) }
            soakProgress?(sample)
        }
        let ownAfter = navload.cpuSeconds
        sampler.cancel()
        reporter.cancel()
        listener.stop.store(true, ordering: .releasing)
        _ = try? await DedicatedThread.run(name: "navload-join") { subscriber.join() }
        // --ack-share: the acknowledgements sent are answered before they are counted (each is a
        // request of its own, which a loaded machine may answer after the drain above), and the
        // service's landing counts are read again after them. Those still unanswered after the
        // timeout are counted as failed.
        var landing = after
        if plan.ackShare > 0 {
            let answered = ContinuousClock.now + .seconds(plan.timeout)
            while acks.inFlight.load(ordering: .acquiring) > 0 && ContinuousClock.now < answered {
                try await Task.sleep(for: .milliseconds(10))
            }
            acks.closed.store(true, ordering: .releasing)
            landing = try await cluster.stats()
        }
        func delta(_ key: String) -> UInt64 {
            (after.outcomes[key] ?? 0) &- (before.outcomes[key] ?? 0)
        }
        let sendSeconds = Double(max(1, finished - max(started, schedule.start))) / 1e9
        var report = LoadReport(
            targetRate: plan.rate, achievedRate: Double(total) / max(sendSeconds, Double(total) / plan.rate),
            sent: total,
            measuredSeconds: plan.duration, lateSends: tally.late.load(ordering: .relaxed),
            latency: listener.latencySummary,
            batchesMeasured: listener.measured, batches: listener.batches, batchesLost: listener.lost,
            resolved: delta("resolved"),
            refreshed: delta("refreshed"), ignored: delta("ignored"), parked: delta("parked"),
            rejected: delta("rejected"),
            released: delta("released"),
            serviceRate: accountedAt.map { Double(total) / (Double(max(1, $0 - schedule.start)) / 1e9) },
            serviceCPU: cpuBefore.flatMap { start in cpuAfter.map { ($0 - start) / (Double(cpuTo - cpuFrom) / 1e9) } },
            serviceRSSBytes: service?.residentBytes, instances: cluster.count, streams: plan.streams,
            streamBatches: followers.batches, streamBatchesMeasured: followers.measured,
            streamLatency: plan.streams > 0 ? followers.latencySummary : nil,
            loadCPU: ownBefore.flatMap { start in ownAfter.map { ($0 - start) / (Double(cpuTo - cpuFrom) / 1e9) } },
            samples: samples.withLock { $0 },
            serviceCPUSeconds: cpuBefore.flatMap { start in cpuAfter.map { $0 - start } },
            meanIntentBytes: intentBytes / max(1, total))
        report.acknowledged = acks.applied.load(ordering: .relaxed)
        // Saturating: an instance that restarted during the run starts its counts again.
        func since(_ now: UInt64, _ then: UInt64) -> UInt64 { now >= then ? now - then : 0 }
        report.landed = since(landing.landed, before.landed)
        report.landBounds = landing.landBounds
        report.landTimes = landing.landTimes.enumerated().map { index, count in
            since(count, index < before.landTimes.count ? before.landTimes[index] : 0)
        }
        report.acknowledgementsFailed =
            acks.failed.load(ordering: .relaxed) + UInt64(max(0, acks.inFlight.load(ordering: .acquiring)))
        if let path = plan.latencyLog {
            try writeLatencyLog(listener.timeline, from: listener.measureFrom.load(ordering: .relaxed), to: path)
        }
        return report
    }

    /// --latency-log: one row a measured batch, in the order of their due times: milliseconds
    /// from the start of measurement (three decimals) and the latency in microseconds.
    static func writeLatencyLog(
        _ timeline: (rows: [(due: Int64, latency: Int64)], dropped: Int), from start: Int64, to path: String
    ) throws {
        // The start as CLOCK_REALTIME nanoseconds, to line the rows up with other traces (a
        // scheduler trace on CLOCK_MONOTONIC with the clocks' offset: scripts/stalls.sh).
        var text = "# due_ms,latency_us: each measured batch, by its intent's due time; due_ms 0 is \(start) ns"
        if timeline.dropped > 0 {
            text += " (the first \(LoadPlan.latencyLogLimit); \(timeline.dropped) later batches left out)"
        }
        text += "\n"
        text.reserveCapacity(timeline.rows.count * 20)
        for row in timeline.rows.sorted(by: { $0.due < $1.due }) {
            let micros = max(0, row.due - start) / 1000
            let fraction = String(micros % 1000)
            text += "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction),"
            text += "\(max(0, row.latency) / 1000)\n"
        }
        do {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw ClientError(.invalidArgument, "cannot write the latency log \(path): \(error)")
        }
    }

    /// What the producers count, shared with the run.
    final class Tally: Sendable {
        let sent = Atomic<Int>(0)
        let late = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
    }

    /// Shared between the subscriber thread and the run.
    /// --ack-share: acknowledgements applied and failed.
    final class AckCounts: Sendable {
        let applied = Atomic<UInt64>(0)
        let failed = Atomic<UInt64>(0)
        /// Sent and not yet answered.
        let inFlight = Atomic<Int>(0)
        /// Set once the report is made: what is answered after it is left out.
        let closed = Atomic<Bool>(false)
    }

    final class Listener: Sendable {
        /// Called with each batch's session and seq as it arrives (--ack-share).
        let acknowledge: (@Sendable (String, UInt64) -> Void)?

        /// --latency-log: each measured batch's due time and latency are kept.
        let keepsTimeline: Bool

        init(acknowledge: (@Sendable (String, UInt64) -> Void)? = nil, timeline: Bool = false) {
            self.acknowledge = acknowledge
            self.keepsTimeline = timeline
        }

        let stop = Atomic<Bool>(false)
        let measureFrom = Atomic<Int64>(.max)
        private let state = Locked(State())

        struct State {
            var latency = Latency()
            /// --latency-log: (due time in wall-clock nanoseconds, latency in nanoseconds).
            var timeline: [(due: Int64, latency: Int64)] = []
            /// Measured batches past ``LoadPlan/latencyLogLimit``, left out of the log.
            var timelineDropped = 0
            var lastSeq: [String: UInt64] = [:]
            var batches: UInt64 = 0
            var measured: UInt64 = 0
            var lost: UInt64 = 0
            var rejected: UInt64 = 0
        }

        func record(session: String, header: FrameHeader, at now: Int64) {
            let from = measureFrom.load(ordering: .relaxed)
            state.withLock { state in
                state.batches += 1
                if let last = state.lastSeq[session], header.seq > last + 1 { state.lost += header.seq - last - 1 }
                state.lastSeq[session] = max(header.seq, state.lastSeq[session] ?? 0)
                if header.sentAt >= from {
                    state.latency.record(nanoseconds: now - header.sentAt)
                    state.measured += 1
                    if keepsTimeline {
                        if state.timeline.count < LoadPlan.latencyLogLimit {
                            state.timeline.append((header.sentAt, now - header.sentAt))
                        } else {
                            state.timelineDropped += 1
                        }
                    }
                }
            }
            acknowledge?(session, header.seq)
        }

        func recordRejection() { state.withLock { $0.rejected += 1 } }

        var latencySummary: Latency.Summary { state.withLock { $0.latency.summary } }
        var timeline: (rows: [(due: Int64, latency: Int64)], dropped: Int) {
            state.withLock { ($0.timeline, $0.timelineDropped) }
        }
        var rejected: UInt64 { state.withLock { $0.rejected } }
        var batches: UInt64 { state.withLock { $0.batches } }
        var measured: UInt64 { state.withLock { $0.measured } }
        var lost: UInt64 { state.withLock { $0.lost } }
    }

    static func startSubscriber(
        _ endpoints: [String], curve: CurveCredentials?, topics: [String], listener: Listener
    ) async throws
        -> DedicatedThread
    {
        var started: DedicatedThread?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            started = DedicatedThread(name: "navload-sub") {
                let context: Context
                let sub: Socket
                do {
                    context = try Context()
                    sub = try Socket(context, type: .sub)
                    try sub.set(.receiveHighWaterMark, 0)
                    for topic in topics { try sub.subscribe(topic) }
                    try sub.secure(with: curve)
                    for endpoint in endpoints { try sub.connect(endpoint) }
                } catch {
                    continuation.resume(
                        throwing: ClientError(
                            .socket, "cannot subscribe to \(endpoints.joined(separator: ", ")): \(error)"))
                    return
                }
                continuation.resume()
                var poller = Poller()
                poller.add(sub)
                var frames: [ZeroMQ.Message] = []
                while !listener.stop.load(ordering: .acquiring) {
                    guard (try? poller.poll(timeout: .milliseconds(50))) != nil else { break }
                    while let count = try? sub.receiveMultipart(into: &frames, wait: false) {
                        guard count == 3, let (kind, session) = Topic.parse(frames[0].string),
                            let header = try? frames[1].withUnsafeBytes({ (bytes) throws(WireError) in
                                try FrameHeader(decoding: bytes)
                            })
                        else { continue }
                        if kind == .rejection {
                            listener.recordRejection()
                        } else {
                            listener.record(session: session, header: header, at: wallClock())
                        }
                    }
                }
                sub.close()
                _ = context
            }
        }
        return started!
    }

    /// An intent ready to go but for its sent-at: its session and its `Intent` encoded without
    /// `sent_at_unix_nanos`, which is appended when it is due (a field appended to an encoded
    /// protobuf message is part of it).
    struct Prepared: Sendable {
        /// Its place on the schedule.
        var index: Int
        /// Its intent id (streams find its due time by it).
        var id: String
        var session: String
        var payload: [UInt8]
    }

    /// The intents producer `index` of `producers` sends, drawn from the mix over the plan's
    /// sessions (intent `i` goes to session `i % sessions`).
    static func prepare(producer index: Int, of producers: Int, run: String, plan: LoadPlan, map: RouteMap, total: Int)
        -> [Prepared]
    {
        var weights = IntentMix.Weights()
        weights.event = 0  // client events are requests, not intents
        weights.blocking = 0  // no shell here dismisses an incoming call: it would block its session
        var mix = IntentMix(map: map, weights: weights, seed: plan.seed &+ UInt64(index))
        var list: [Prepared] = []
        list.reserveCapacity(total / producers + 1)
        for i in Schedule.indices(producer: index, of: producers, total: total) {
            let session = "load-\(i % plan.sessions)"
            guard case .intent(var intent) = mix.next(session: session, sentAt: 0) else { continue }
            intent.id = "\(run)-\(intent.id)-\(index)"
            guard var payload = try? Navigator_V1_Intent(intent).serializedBytes() as [UInt8] else { continue }
            payload.reserveCapacity(payload.count + sentAtFieldSize)
            list.append(Prepared(index: i, id: intent.id, session: session, payload: payload))
        }
        return list
    }

    /// Field 9 (`sent_at_unix_nanos`), varint: a tag byte and up to ten bytes of value.
    static let sentAtFieldSize = 11

    /// Appends `sent_at_unix_nanos = nanoseconds` to an encoded `Intent`.
    static func appendSentAt(_ nanoseconds: Int64, to payload: inout [UInt8]) {
        payload.append(9 << 3)  // field 9, wire type 0 (varint)
        var value = UInt64(bitPattern: nanoseconds)
        while value >= 0x80 {
            payload.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        payload.append(UInt8(value))
    }

    static func startProducer(
        _ index: Int, intents: [Prepared], plan: LoadPlan, schedule: Schedule, tally: Tally
    ) async throws -> DedicatedThread {
        var started: DedicatedThread?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            started = DedicatedThread(name: "navload-push-\(index)") {
                let push: Socket
                do {
                    push = try Socket(try Context(), type: .push)
                    try push.set(.immediate, true)
                    try push.set(.sendHighWaterMark, 100_000)
                    // What is queued when the schedule ends still goes: under backpressure the
                    // service takes it only as fast as it resolves, so wait as long as the run may.
                    try push.set(.linger, .seconds(plan.timeout))
                    try push.set(.sendTimeout, .seconds(plan.timeout))
                    try push.secure(with: plan.endpoints.curve)
                    for endpoint in plan.producerEndpoints { try push.connect(endpoint) }
                } catch {
                    continuation.resume(
                        throwing: ClientError(
                            .socket, "cannot connect to \(plan.producerEndpoints.joined(separator: ", ")): \(error)"))
                    return
                }
                continuation.resume()
                var intents = intents
                for k in intents.indices {
                    let due = schedule.due(intents[k].index)
                    waitUntil(due)
                    if wallClock() - due > 1_000_000 { tally.late.wrappingAdd(1, ordering: .relaxed) }
                    appendSentAt(due, to: &intents[k].payload)
                    guard (try? push.send(intents[k].session, more: true)) != nil,
                        (try? push.send(intents[k].payload)) != nil
                    else {
                        tally.failed.wrappingAdd(1, ordering: .relaxed)
                        break
                    }
                    tally.sent.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
        return started!
    }

    /// Sleeps until `due`. It never spins: a spinning producer takes a core from the service it
    /// measures on a small machine. The kernel wakes a sleeper some tens of microseconds late;
    /// at high rates the intents that fell due meanwhile then go out back to back, each keeping
    /// its due time as its sent-at, so the lateness counts as latency and is not hidden.
    static func waitUntil(_ due: Int64) {
        while true {
            let remaining = due - wallClock()
            if remaining <= 0 { return }
            var request = timespec(
                tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
            nanosleep(&request, nil)
        }
    }
}

func wallClock() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}
