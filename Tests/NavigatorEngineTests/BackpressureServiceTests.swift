import Foundation
import GRDB
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing
import ZeroMQ

@testable import NavigatorEngine

@Suite("Backpressure end to end")
struct BackpressureServiceTests {
    static let handoff: Int32 = 2
    static let configure: @Sendable (inout EngineConfiguration) -> Void = {
        $0.handoffHighWaterMark = handoff
        $0.highWaterMark = 200
    }

    @Test(
        "while the state store is away, acknowledged requests beyond 10 × handoffHighWaterMark × workers waiting for their write are refused OVERLOADED at once; the others are answered once it is back"
    )
    func storeAway() async throws {
        try await withService(workers: 1, Self.configure) { server, endpoints in
            let limit = 10 * Int(Self.handoff)  // one worker
            let path = URL(fileURLWithPath: server.configuration.dataDirectory).appendingPathComponent(
                "navigator.sqlite"
            ).path
            let (replies, mostWaiting, reported) = try await onThread { () throws -> ([String], UInt64, Double?) in
                let client = try Client(endpoints)
                _ = try client.request(.stats(.init()))  // connected, and the store written once
                let context = try Context()
                let dealer = try Socket(context, type: .dealer)
                defer { dealer.close() }
                try dealer.connect(endpoints.requests[0])
                func receive(within timeout: Duration) throws -> String? {
                    try dealer.set(.receiveTimeout, timeout)
                    guard let frames = try? dealer.receiveMultipart() else { return nil }
                    let reply = try Navigator_V1_Reply(serializedBytes: frames.last!.bytes)
                    guard case .rejected(let rejected)? = reply.kind else { return "answered" }
                    if rejected.message.contains("wait for their sessions to be written") { return "store away" }
                    return rejected.code.label
                }
                var replies: [String] = []
                var mostWaiting: UInt64 = 0
                var reported: Double? = nil
                // The state file locked by another process's transaction: the flush thread's
                // write waits (up to its busy timeout, 5 s), and the replies with it.
                try whileLocked(stateFile: path) {
                    // One at a time: the next goes once this one waits for the store or is
                    // answered, so the worker's own queue (2) never fills, however slowly a loaded
                    // machine runs it: what refuses them is the replies waiting.
                    for index in 0..<100 {
                        let request = Navigator_V1_Request.with {
                            $0.requestID = "w\(index)"
                            $0.intent = wireIntent("w\(index)", [ScreenContext("settings")], session: "away\(index)")
                        }
                        try dealer.send(multipart: [[UInt8](), try request.serializedBytes()])
                        let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(5))
                        repeat {
                            if let reply = try receive(within: .milliseconds(1)) { replies.append(reply) }
                            guard ContinuousClock.now < deadline else {
                                throw TestFailure("request \(index) neither waits for the store nor was answered")
                            }
                        } while Int(server.counters.repliesWaiting.load) + replies.count <= index
                        mostWaiting = max(mostWaiting, server.counters.repliesWaiting.load)
                        if index == 60 { reported = Self.gauge("navigator_replies_waiting_for_store", in: server) }
                    }
                    while let reply = try receive(within: .milliseconds(200)) { replies.append(reply) }
                }
                // The store back: the waiting ones are answered.
                while replies.count < 100, let reply = try receive(within: .seconds(20)) { replies.append(reply) }
                return (replies, mostWaiting, reported)
            }
            #expect(replies.count == 100, "\(replies)")
            #expect(replies.contains("store away"), "\(replies)")
            // Never more waiting than the limit: they were sent one at a time. (Not "all but the
            // limit refused": on a loaded machine the burst can outlast the flush thread's busy
            // wait, whose failure answers the waiting ones UNAVAILABLE and makes room again, as it
            // should.)
            #expect(mostWaiting <= UInt64(limit), "\(mostWaiting): \(replies)")
            #expect(server.counters.repliesWaiting.load == 0)
            // /metrics shows them while they wait, and none after.
            #expect((reported ?? 0) > 0, "\(String(describing: reported))")
            #expect(Self.gauge("navigator_replies_waiting_for_store", in: server) == 0)
        }
    }

    /// A gauge's value in the service's /metrics text.
    static func gauge(_ name: String, in server: Engine) -> Double? {
        let text = String(decoding: server.metrics(), as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    /// Worker 0 reads the intents socket: stalled itself, it reads nothing; with worker 1 stalled,
    /// its bundles for worker 1 fill and it stops reading too (it goes on with its own inbox).
    @Test(
        "a stalled worker: the intents socket is no longer read, the producer's PUSH blocks, nothing is lost once it goes on",
        arguments: [(workers: 1, stalled: 0), (workers: 2, stalled: 1)])
    func producerBlocks(workers: Int, stalled: Int) async throws {
        // Sessions of the stalled worker's shard only.
        let sessions = (0..<10_000).map { "bp\($0)" }.filter {
            SessionStore.shardIndex(of: $0, count: workers) == stalled
        }.prefix(50).map { $0 }
        let ackSession = (0..<10_000).map { "bp-ack\($0)" }.first {
            SessionStore.shardIndex(of: $0, count: workers) == stalled
        }!
        try await withService(workers: workers, Self.configure) { server, endpoints in
            let (sent, forwardedWhileStalled, overloaded) = try await onThread {
                () throws -> (Int, UInt64, Navigator_V1_Reply) in
                let context = try Context()
                let push = try Socket(context, type: .push)
                try push.set(.sendHighWaterMark, 200)
                // What is queued here when the test lets go of the worker is delivered then.
                try push.set(.linger, .seconds(60))
                try push.connect(endpoints.intents[0])
                defer { push.close() }
                let client = try Client(endpoints)
                _ = try client.request(.stats(.init()))  // connected before the worker stalls
                // The test holds the worker's shard: the worker stops at its first intent.
                return try server.store.shards[stalled].records.withLock { _ in
                    var sent = 0
                    var failingSince: ContinuousClock.Instant?
                    let deadline = ContinuousClock.now + .seconds(120)
                    while ContinuousClock.now < deadline, sent < 3_000_000 {
                        let session = sessions[sent % sessions.count]
                        let intent = wireIntent(
                            "b\(sent)", [ScreenContext("chat", ["conversationId": "\(sent % 7)"])], session: session)
                        let frames: [[UInt8]] = [Array(session.utf8), try intent.serializedBytes()]
                        if try push.trySend(multipart: frames) {
                            sent += 1
                            failingSince = nil
                        } else if let since = failingSince {
                            // Blocked for good: every try for two seconds would block.
                            if ContinuousClock.now - since > .seconds(2) { break }
                        } else {
                            failingSince = .now
                        }
                    }
                    // Requests for the stalled worker (client events: not counted as intents): the
                    // first few wait in the
                    // requests thread's own queue to it; beyond that they are answered at once.
                    let dealer = try Socket(context, type: .dealer)
                    defer { dealer.close() }
                    try dealer.set(.receiveTimeout, .seconds(10))
                    try dealer.connect(endpoints.requests[0])
                    for index in 0..<(4 * Int(Self.handoff) + 4) {
                        let request = Navigator_V1_Request.with {
                            $0.requestID = "ack\(index)"
                            $0.clientEvent = Navigator_V1_ClientEvent(.ready(), session: ackSession)
                        }
                        try dealer.send(multipart: [[UInt8](), try request.serializedBytes()])
                    }
                    let overloaded = try Navigator_V1_Reply(serializedBytes: try dealer.receiveMultipart().last!.bytes)
                    return (sent, server.counters.handedOver[stalled].load, overloaded)
                }
            }
            #expect(sent < 3_000_000, "the producer never blocked")
            // What the intake took: at most the hand-off's marks (send + receive) in bundles of
            // 64, one bundle the worker holds and one the intake holds; the rest waited in the
            // sockets.
            let bound = UInt64((2 * Self.handoff + 2) * 64)
            #expect(forwardedWhileStalled <= bound, "the intake took \(forwardedWhileStalled) of \(sent) intents")
            #expect(UInt64(sent) > bound * 4)
            guard case .rejected(let rejected)? = overloaded.kind else {
                Issue.record("expected OVERLOADED, got \(overloaded)")
                return
            }
            #expect(rejected.code == .overloaded)
            #expect(rejected.message.contains("handoffHighWaterMark"))
            // The worker goes on: every intent sent is resolved, none dropped.
            let outcomes = try await onThread { () throws -> UInt64 in
                let client = try Client(endpoints)
                let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(120))
                while true {
                    let stats = try client.request(.stats(.init())).stats
                    let total = stats.intentsByOutcome.filter { $0.key != "released" }.values.reduce(0, +)
                    if total >= UInt64(sent) || ContinuousClock.now > deadline { return total }
                }
            }
            #expect(outcomes == UInt64(sent))
            print(
                "backpressure (\(workers) workers, worker \(stalled) stalled): the producer blocked after \(sent) intents; the intake had taken \(forwardedWhileStalled)"
            )
        }
    }
}

/// Runs `body` while another connection holds the state file in an exclusive transaction, as
/// another process would: navigatord's writes wait for it (up to their busy timeout, 5 s).
func whileLocked(stateFile path: String, _ body: () throws -> Void) throws {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    let holder = try DatabaseQueue(path: path, configuration: configuration)
    try holder.inDatabase { db in
        try db.execute(sql: "BEGIN EXCLUSIVE")
        defer { try? db.execute(sql: "ROLLBACK") }
        try body()
    }
}
