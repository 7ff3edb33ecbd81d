import Foundation
import Locking
import NavigatorClient
import Synchronization
import ZeroMQ

/// What libzmq alone costs per message at a given rate on this machine: a relay process that
/// does nothing but what navigatord's sockets do for every intent — receive a message on a PULL
/// socket and publish it, after a topic frame, on an XPUB socket, one thread polling both, over
/// tcp loopback or ipc as the run reaches navigatord (``Transport``) — driven at the run's rate
/// with messages of the intents' size, its CPU read from /proc. At a moderate rate most of
/// navigatord's CPU per intent is threads waking for each message; this is the part of it no code
/// above libzmq can remove.
public enum RelayFloor {
    public struct Result: Hashable, Sendable, Codable {
        public var rate: Double
        public var messageBytes: Int
        public var seconds: Double
        public var messages: Int
        /// The relay's CPU over the run, in cores.
        public var cores: Double
        /// From each message's due time to its arrival at the subscriber, in microseconds,
        /// measured as a run measures batches (a late send counts as latency).
        public var latency: Latency.Summary
        /// The work the relay stood in for per message (``serve(workNanoseconds:batches:pull:xpub:directory:)``; 0: none).
        public var workNanoseconds: Int64
        /// The frames of the last message the subscriber received, and the bytes of its last frame.
        public var frames: Int = 0
        public var lastFrameBytes: Int = 0
        /// The endpoints the relay bound: its PULL socket's and its XPUB socket's.
        public var endpoints: [String] = []
        public var microsecondsPerMessage: Double { cores * 1e6 / rate }
    }

    /// How a socket of the relay is reached: tcp loopback on a free port, or ipc (a Unix socket
    /// in a directory made for the run and removed after it) — as navload reaches navigatord's
    /// socket of the same kind, so that a service driven over ipc is divided by a floor over ipc.
    public enum Transport: String, Hashable, Sendable, Codable, CaseIterable {
        case tcp
        case ipc

        /// The transport of `endpoint`: ipc for `ipc://`, else tcp.
        public init(of endpoint: String) { self = endpoint.hasPrefix("ipc://") ? .ipc : .tcp }
    }

    /// The relay: binds a PULL and an XPUB socket (`pull`, `xpub`: on free 127.0.0.1 ports, or
    /// ipc as `directory`/pull and `directory`/xpub), prints `<pull endpoint> <xpub endpoint>` on
    /// one line, and forwards until its standard input closes (the parent went away) or a stop.
    ///
    /// `workNanoseconds`: the relay spins this long on each message before it publishes it (the
    /// clock read in a loop, nothing else touched), standing in for the work a service does per
    /// message: what the wake-ups cost once the relay's thread takes that long (BENCHMARKS.md,
    /// "What the gap is made of"). At most ``maxWorkMicroseconds``.
    ///
    /// `batches`: each message is published as navigatord publishes a batch (``batchShape``):
    /// the topic, a header and a payload that starts with the message's bytes, three frames
    /// where the raw relay sends two — libzmq's cost of the protocol's shape, apart from the
    /// service's own work.
    public static func serve(
        workNanoseconds: Int64 = 0, batches: Bool = false, pull pullTransport: Transport = .tcp,
        xpub xpubTransport: Transport = .tcp, directory: String? = nil
    ) throws {
        precondition(workNanoseconds >= 0 && workNanoseconds <= Int64(maxWorkMicroseconds) * 1000)
        func endpoint(_ transport: Transport, _ name: String) throws -> String {
            guard transport == .ipc else { return "tcp://127.0.0.1:*" }
            guard let directory else {
                throw ClientError(.socket, "an ipc socket needs a directory to be made in; expected one")
            }
            return "ipc://\(directory)/\(name)"
        }
        let context = try Context()
        let pull = try Socket(context, type: .pull)
        let xpub = try Socket(context, type: .xpub)
        try pull.set(.receiveHighWaterMark, 100_000)
        try xpub.set(.sendHighWaterMark, 100_000)
        try pull.bind(try endpoint(pullTransport, "pull"))
        try xpub.bind(try endpoint(xpubTransport, "xpub"))
        // Written straight to the descriptor: the parent waits for this line.
        let line = Array("\(try pull.lastEndpoint) \(try xpub.lastEndpoint)\n".utf8)
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        let stopped = Atomic<Bool>(false)
        let watcher = DedicatedThread(name: "relay-stdin") {
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            stopped.store(true, ordering: .releasing)
        }
        defer { watcher.join() }
        let message = Message()
        let topic: [UInt8] = Array("s/floor/".utf8)
        let header = [UInt8](repeating: 0, count: batchShape.header)
        var payload = [UInt8](repeating: 0, count: batchShape.payload)
        var poller = Poller()
        poller.add(pull)
        poller.add(xpub)
        while !stopped.load(ordering: .acquiring) {
            guard (try? poller.poll(timeout: .milliseconds(100))) != nil else { break }
            while (try? xpub.tryReceive(into: message)) == true {}
            while (try? pull.tryReceive(into: message)) == true {
                if workNanoseconds > 0 { spin(workNanoseconds) }
                _ = try? xpub.send(topic, more: true)
                if batches {
                    // The message's bytes first: its due time stays where the subscriber reads it.
                    payload.withUnsafeMutableBytes { target in
                        message.withUnsafeBytes { source in
                            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(target.count)))
                        }
                    }
                    _ = try? xpub.send(header, more: true)
                    _ = try? xpub.send(payload)
                } else {
                    _ = try? xpub.send(message)
                }
            }
        }
    }

    /// A new directory, readable by this user only, for the relay's ipc sockets.
    static func makeDirectory() throws -> String {
        var base = NSTemporaryDirectory()
        while base.count > 1, base.hasSuffix("/") { base.removeLast() }
        var template = Array((base + "/navload-relay-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else {
            throw ClientError(.socket, "the relay could not make a directory for its ipc sockets: errno \(errno)")
        }
        return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The frames of a batch as navigatord publishes them, by size after the topic: its header
    /// (wire-protocol.md, "Commands socket") and a payload of the mean size of a batch of
    /// navload's mix (188.5 bytes over 6,773 batches at 2,000/s over 20,000 sessions, read with a
    /// SUB socket; 2026-11-30).
    public static let batchShape = (header: 36, payload: 190)

    /// The most work a relay stands in for per message: a second.
    public static let maxWorkMicroseconds = 1_000_000

    /// Why a relay standing in for `workMicroseconds` a message at `rate` messages a second
    /// could not be a floor, if it could not: the work out of range, or more of each second than
    /// its one thread has (it would fall behind, and not pass every message on in time).
    public static func workProblem(workMicroseconds: Double, rate: Double) -> String? {
        guard workMicroseconds >= 0, workMicroseconds <= Double(maxWorkMicroseconds) else {
            return "\(workMicroseconds) µs of work a message is out of range; expected 0 to \(maxWorkMicroseconds) µs"
        }
        let busy = workMicroseconds * rate / 1e6
        guard busy < 0.9 else {
            return
                "\(workMicroseconds) µs a message at \(rate) messages/s is \(String(format: "%.2f", busy)) s of work a second for the relay's one thread; expected below 0.9 s (a relay that falls behind does not pass every message on in time)"
        }
        return nil
    }

    /// Busy for `nanoseconds` on the monotonic clock.
    private static func spin(_ nanoseconds: Int64) {
        let end = ContinuousClock.now + .nanoseconds(nanoseconds)
        while ContinuousClock.now < end {}
    }

    /// Starts `executable relay` (navload itself), drives it at `rate` messages/s for
    /// `seconds`, and returns its CPU; the relay is stopped before returning. `workNanoseconds`
    /// and `batches`: as ``serve(workNanoseconds:batches:pull:xpub:directory:)``. `pull`, `xpub`:
    /// how the relay's sockets are reached; for ipc, a directory is made for them here and removed
    /// once the relay has stopped.
    public static func measure(
        executable: String, rate: Double, messageBytes: Int, seconds: Double, workNanoseconds: Int64 = 0,
        batches: Bool = false, pull: Transport = .tcp, xpub: Transport = .tcp
    ) async throws -> Result {
        // Starting the relay, reading its endpoints, waiting for its threads and its exit all
        // block: on a thread of their own, never on the cooperative pool (which the tests'
        // services share).
        try await DedicatedThread.run(name: "navload-floor") {
            try measureBlocking(
                executable: executable, rate: rate, messageBytes: messageBytes, seconds: seconds,
                workNanoseconds: workNanoseconds, batches: batches, pull: pull, xpub: xpub)
        }
    }

    private static func measureBlocking(
        executable: String, rate: Double, messageBytes: Int, seconds: Double, workNanoseconds: Int64, batches: Bool,
        pull: Transport, xpub: Transport
    ) throws -> Result {
        let arguments =
            ["relay"] + (workNanoseconds > 0 ? ["--work-nanoseconds", "\(workNanoseconds)"] : [])
            + (batches ? ["--batches"] : [])
            + (pull == .tcp ? [] : ["--pull-transport", pull.rawValue])
            + (xpub == .tcp ? [] : ["--xpub-transport", xpub.rawValue])
        // The ipc sockets' directory is made and removed here: the relay is stopped with a signal.
        let directory = pull == .ipc || xpub == .ipc ? try makeDirectory() : nil
        defer { if let directory { try? FileManager.default.removeItem(atPath: directory) } }
        let process = try Spawned(
            executable: executable, arguments: arguments + (directory.map { ["--ipc-directory", $0] } ?? []))
        defer { process.stop() }
        var line = [UInt8]()
        while let byte = try process.output.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
            line.append(byte)
        }
        let endpoints = String(decoding: line, as: UTF8.self).split(separator: " ").map(String.init)
        guard endpoints.count == 2 else {
            throw ClientError(
                .socket, "the relay printed \"\(String(decoding: line, as: UTF8.self))\"; expected its two endpoints")
        }
        let context = try Context()
        defer { context.shutdown() }
        let stop = Atomic<Bool>(false)
        let received = Atomic<Int>(0)
        let latency = Locked(Latency())
        let shape = Locked((frames: 0, lastFrameBytes: 0))
        let subscriber = DedicatedThread(name: "navload-floor-rx") {
            guard let sub = try? Socket(context, type: .sub) else { return }
            try? sub.subscribe("")
            try? sub.connect(endpoints[1])
            let message = Message()
            var poller = Poller()
            poller.add(sub)
            var measured = Latency()
            var frames = 0
            var last = (frames: 0, lastFrameBytes: 0)
            defer {
                latency.withLock { $0 = measured }
                shape.withLock { $0 = last }
            }
            while !stop.load(ordering: .acquiring) {
                guard (try? poller.poll(timeout: .milliseconds(20))) != nil else { return }
                while (try? sub.tryReceive(into: message)) == true {
                    frames += 1
                    guard !message.hasMore else { continue }
                    last = (frames, message.withUnsafeBytes { $0.count })
                    frames = 0
                    received.wrappingAdd(1, ordering: .relaxed)
                    // The payload starts with its due time (unix ns, as an intent's sent-at).
                    if let due = message.withUnsafeBytes({ $0.count >= 8 ? $0.loadUnaligned(as: Int64.self) : nil }) {
                        measured.record(nanoseconds: wallClock() - due)
                    }
                }
            }
        }
        let size = max(8, messageBytes)
        let sent = Atomic<Int>(0)
        let stats = ProcessStats(pid: process.pid)
        let cpuBefore = Locked<Double?>(nil)
        let producer = DedicatedThread(name: "navload-floor-tx") {
            guard let push = try? Socket(context, type: .push) else { return }
            try? push.set(.sendHighWaterMark, 100_000)
            try? push.connect(endpoints[0])
            // Connect and subscribe first; then paced as a run's producers are: each message
            // sent when it falls due (a sleep until then, never a spin), stamped with its due
            // time, so that the relay wakes as navigatord does and lateness counts as latency.
            usleep(300_000)
            var payload = [UInt8](repeating: 0x2A, count: size)
            cpuBefore.withLock { $0 = stats.cpuSeconds }
            let start = wallClock()
            let total = Int(seconds * rate)
            var count = 0
            while count < total {
                let due = start + Int64(Double(count) / rate * 1e9)
                LoadRunner.waitUntil(due)
                payload.withUnsafeMutableBytes { $0.storeBytes(of: due, as: Int64.self) }
                _ = try? push.send(payload)
                count += 1
            }
            sent.store(count, ordering: .releasing)
        }
        producer.join()
        // What is still on its way is relayed within milliseconds on an idle machine; on a busy
        // one (a test run's parallel tests) a relay that spins on each message can lag by
        // seconds: waited for while it passes messages on (2 s without one gives up), at most
        // 30 s. Then the relay's CPU.
        let limit = ContinuousClock.now + .seconds(30)
        var (passed, progressed) = (received.load(ordering: .relaxed), ContinuousClock.now)
        while passed < sent.load(ordering: .acquiring), ContinuousClock.now < limit,
            ContinuousClock.now - progressed < .seconds(2)
        {
            usleep(5_000)
            let now = received.load(ordering: .relaxed)
            if now != passed { (passed, progressed) = (now, ContinuousClock.now) }
        }
        let cpuAfter = stats.cpuSeconds
        stop.store(true, ordering: .releasing)
        subscriber.join()
        guard let before = cpuBefore.withLock({ $0 }), let cpuAfter else {
            throw ClientError(.socket, "the relay's CPU could not be read from /proc/\(process.pid)/stat")
        }
        let messages = sent.load(ordering: .acquiring)
        guard received.load(ordering: .relaxed) == messages else {
            throw ClientError(
                .socket,
                "the relay passed on \(received.load(ordering: .relaxed)) of \(messages) messages; expected all")
        }
        return Result(
            rate: rate, messageBytes: messageBytes, seconds: seconds, messages: messages,
            cores: (cpuAfter - before) / seconds, latency: latency.withLock { $0.summary },
            workNanoseconds: workNanoseconds, frames: shape.withLock { $0.frames },
            lastFrameBytes: shape.withLock { $0.lastFrameBytes }, endpoints: endpoints)
    }
}
