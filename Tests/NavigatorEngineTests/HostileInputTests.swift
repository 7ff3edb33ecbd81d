import Foundation
import GRDB
import Locking
import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ

@testable import NavigatorEngine

/// Issue 20: nothing a client sends, and no bad luck with the state file, crashes, wedges or
/// bloats the service.
@Suite("Hostile input and bad luck")
struct HostileInputTests {
    @Test("the sync that emptied a modal's stack now yields exactly the synced tree, and the service goes on")
    func syncAcrossModals() async throws {
        try await withService { _, endpoints in
            let (applied, snapshot, after) = try await onThread {
                () throws -> (Navigator_V1_Reply, Navigator_V1_Snapshot, Navigator_V1_Reply) in
                let client = try Client(endpoints)
                let start = RouteMap.demo.initialTree()
                let home = start.stack(.tab("home"))![0]
                // root [a], m1 [b], m2 [c]: client ids, as a shell's own screens.
                let a = Screen(id: .client(1), ScreenContext("settings"))
                let b = Screen(id: .client(3), ScreenContext("login"))
                let c = Screen(id: .client(5), ScreenContext("settings"))
                let d = Screen(id: .client(6), ScreenContext("login"))
                func tree(_ m1: Screen, _ m2: Screen) throws -> ScreenTree {
                    try ScreenTree(
                        root: .tabs(TabBar(tabs: [Tab(name: "home", stack: [home, a])], selected: "home")),
                        modals: [
                            Modal(id: .client(2), style: .sheet, stack: [m1]),
                            Modal(id: .client(4), style: .sheet, stack: [m2]),
                        ])
                }
                _ = try client.request(.clientEvent(.init(.sync(try tree(b, c)), session: "y")))
                let applied = try client.request(.clientEvent(.init(.sync(try tree(c, d)), session: "y")))
                let snapshot = try client.request(.snapshot(.with { $0.session = "y" })).snapshot
                let after = try client.request(
                    .intent(wireIntent("after", [ScreenContext("chat", ["conversationId": "1"])], session: "y")))
                return (applied, snapshot, after)
            }
            #expect(applied.eventApplied.seq == 2, "\(applied)")
            let tree = try snapshot.tree.core()
            #expect(tree.modals.map { $0.stack.map(\.id) } == [[.client(5)], [.client(6)]])
            #expect(after.resolved.batch.seq == 3)
        }
    }

    @Test("ids at the edge: a synced service id the service never issued is refused, the session unharmed")
    func edgeIDs() async throws {
        try await withService { _, endpoints in
            let (refused, after) = try await onThread { () throws -> (Navigator_V1_Reply, Navigator_V1_Reply) in
                let client = try Client(endpoints)
                let big = try ScreenTree(
                    root: .stack([Screen(id: NodeID(rawValue: NodeID.clientBit - 1), ScreenContext("home"))]))
                let refused = try client.request(.clientEvent(.init(.sync(big), session: "e")))
                let after = try client.request(
                    .intent(wireIntent("e1", [ScreenContext("chat", ["conversationId": "1"])], session: "e")))
                return (refused, after)
            }
            #expect(refused.rejected.code == .invalidEvent)
            #expect(refused.rejected.message.contains("never issued"))
            #expect(after.resolved.batch.seq == 1)
        }
    }

    @Test("rejected intents and events create no session: junk to random sessions leaves nothing behind")
    func rejectedCreatesNothing() async throws {
        try await withService { _, endpoints in
            let stats = try await onThread { () throws -> Navigator_V1_Stats in
                let client = try Client(endpoints)
                let rejections = try client.subscribe("r/")
                for index in 0..<200 {
                    try client.send(wireIntent("j\(index)", [ScreenContext("nowhere")]), session: "junk-\(index)")
                }
                _ = try client.request(.clientEvent(.init(.poppedTo(99), session: "junk-event")))
                _ = try client.request(.clientEvent(.init(.ack(5), session: "junk-ack")))  // changes nothing
                for _ in 0..<200 { _ = try rejections.nextPublished() }
                return try client.request(.stats(.init())).stats
            }
            #expect(stats.sessions == 0)
            #expect(stats.rejectionsByCode["unknown_screen"] == 200)
        }
    }

    @Test("beyond maxSessions a new session is refused; existing ones go on")
    func sessionLimit() async throws {
        let twoSessions: (inout EngineConfiguration) -> Void = { $0.maxSessions = 2 }
        try await withService(twoSessions) { _, endpoints in
            let replies = try await onThread { () throws -> [Navigator_V1_Reply] in
                let client = try Client(endpoints)
                return try ["a", "b", "c", "a"].enumerated().map { index, session in
                    try client.request(
                        .intent(wireIntent("m\(index)", [ScreenContext("settings")], session: session)))
                }
            }
            #expect(replies.map { $0.rejected.code } == [.unspecified, .unspecified, .limitExceeded, .unspecified])
            #expect(replies[2].rejected.message.contains("maxSessions"))
        }
    }

    @Test("sessions that do not load are quarantined with the reason; the service starts with the rest")
    func quarantine() async throws {
        let directory = temporaryDirectory("navquar")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let file = try StateFile(directory: directory.path)
            // A good row, a row of garbage, a well-formed record whose tree breaks the invariant
            // (a modal with an empty stack), one whose seq is beyond 2^47 (a session's record
            // keeps 48 bits of it, and the batches to come need room), and two whose times no
            // arithmetic on them survives (they trapped: the dedup ids' base near Int64.max, and
            // an expired intent that expired at Int64.max after waiting -1 ns), all written by hand.
            let good =
                try Navigator_V1_StoredSession(
                    SessionState(tree: RouteMap.demo.initialTree()), seq: 4
                ).serializedBytes() as [UInt8]
            var broken = Navigator_V1_StoredSession(SessionState(tree: RouteMap.demo.initialTree()), seq: 2)
            broken.tree.modals = [.with { $0.id = 9 }]
            let huge = Navigator_V1_StoredSession(SessionState(tree: RouteMap.demo.initialTree()), seq: (1 << 47) + 1)
            var ids = Navigator_V1_StoredSession(SessionState(tree: RouteMap.demo.initialTree()), seq: 3)
            ids.recentIdsBaseUnixNanos = .max - 5
            ids.recentIds = [1 << 16 | 3]
            var expired = Navigator_V1_StoredSession(SessionState(tree: RouteMap.demo.initialTree()), seq: 3)
            expired.recentlyExpired = [
                .with {
                    $0.intentID = "x"
                    $0.expiredAtUnixNanos = .max
                    $0.waitedNanos = -1
                    $0.notReady = .init()
                }
            ]
            try file.write([
                ("good", 4, good), ("garbage", 1, [0xFF, 0x01, 0x02]), ("broken", 2, try broken.serializedBytes()),
                ("huge", (1 << 47) + 1, try huge.serializedBytes()), ("ids", 3, try ids.serializedBytes()),
                ("expired", 3, try expired.serializedBytes()),
            ])
        }
        let configuration = TestService.configuration(dataDirectory: directory)
        let server = try Engine(configuration: configuration, logger: TestService.logger("quarantine"))
        #expect(server.quarantinedSessions == 5)
        try await server.start()
        let metrics = server.metrics()
        await server.stop()
        #expect(String(decoding: metrics, as: UTF8.self).contains("navigator_sessions_quarantined 5"))
        let reasons = try Self.quarantined(directory.appendingPathComponent("navigator.sqlite").path)
        #expect(reasons.map(\.0) == ["broken", "expired", "garbage", "huge", "ids"])
        #expect(reasons[0].1.contains("modal #9 has an empty stack"))
        #expect(
            reasons[1].1.contains("recently_expired[0].expired_at_unix_nanos is 9223372036854775807"), "\(reasons[1].1)"
        )
        #expect(reasons[3].1.contains("its seq 140737488355329 is beyond 140737488355328 (2^47)"), "\(reasons[3].1)")
        #expect(reasons[4].1.contains("recent_ids_base_unix_nanos is 9223372036854775802"), "\(reasons[4].1)")
        // A second start finds nothing more to quarantine and keeps the good session.
        let again = try Engine(configuration: configuration, logger: TestService.logger("quarantine"))
        #expect(again.quarantinedSessions == 5)
        #expect(again.store.sessionCount == 1)
    }

    @Test("a state file whose seq floor is beyond 2^47 is refused at start, saying so; the floor stays")
    func seqFloorBeyondTheRecord() throws {
        let directory = temporaryDirectory("navfloor")
        defer { try? FileManager.default.removeItem(at: directory) }
        try StateFile(directory: directory.path).expire([], seqFloor: (1 << 47) + 1)
        #expect {
            _ = try Engine(
                configuration: TestService.configuration(dataDirectory: directory), logger: TestService.logger("floor"))
        } throws: { error in
            "\(error)".contains("new sessions start at seq 140737488355329, beyond 140737488355328 (2^47)")
        }
        #expect(try StateFile(directory: directory.path).seqFloor() == (1 << 47) + 1)
    }

    @Test("a rollout row no request could write (rollbackAfter below 1) is not taken up, saying why")
    func rolloutRowOutOfRange() throws {
        let directory = temporaryDirectory("navrollrow")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        // The keeper compared UInt64(rollbackAfter) with the candidate's intents: it trapped
        // every second on every instance sharing the row.
        let rollout = StoredRollout(
            phase: .rolling, yaml: "", source: "candidate.yaml", version: "2", baseVersion: "1", baseSource: "",
            share: 5_000, rollbackMargin: 100, rollbackAfter: -5, startedAt: 0, changedAt: 0, note: "")
        _ = try file.storeRollout(rollout, expected: 0)
        #expect {
            _ = try file.rollout()
        } throws: { error in
            "\(error)".contains("rollbackAfter -5; expected a positive number of intents")
        }
        // A revision that is not a number and a record that is not text: refused, not a trap
        // (GRDB's typed read traps on a value it cannot convert).
        let path = directory.appendingPathComponent("navigator.sqlite").path
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE rollout SET revision = 'many', record = X'FF00FF' WHERE id = 1")
        }
        #expect {
            _ = try file.rollout()
        } throws: { error in
            "\(error)".contains("holds a revision") && "\(error)".contains("that is not what navigatord writes")
        }
        // The last revision there is: the next write is refused, not an overflow.
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE rollout SET revision = 9223372036854775807 WHERE id = 1")
        }
        #expect {
            _ = try file.storeRollout(rollout, expected: .max)
        } throws: { error in
            "\(error)".contains("revision is 9223372036854775807; expected below 2^63 - 1")
        }
    }

    static func quarantined(_ path: String) throws -> [(String, String)] {
        try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT id, reason FROM quarantine ORDER BY id").map {
                ($0["id"] as String, $0["reason"] as String)
            }
        }
    }

    @Test(
        "a locked state file: the worker goes on with other work; the reply says UNAVAILABLE (not INTERNAL); a retry once it is free is a duplicate"
    )
    func lockedStateFile() async throws {
        let directory = temporaryDirectory("navlock")
        defer { try? FileManager.default.removeItem(at: directory) }
        // One worker: the locked session and the free one share it.
        try await withService(workers: 1, dataDirectory: directory) { server, endpoints in
            let path = directory.appendingPathComponent("navigator.sqlite").path
            let (freeBatch, locked, retried) = try await onThread {
                () throws -> (Navigator_V1_CommandBatch, Navigator_V1_Reply, Navigator_V1_Reply) in
                let client = try Client(endpoints)
                let free = try client.subscribe("s/free/")
                let dealer = try Socket(client.context, type: .dealer)
                try dealer.set(.receiveTimeout, .seconds(20))
                try dealer.connect(endpoints.requests[0])
                let holder = try DatabaseQueue(path: path)
                let intent = wireIntent("L1", [ScreenContext("settings")], session: "lk")
                let (freeBatch, locked) = try holder.inDatabase { db in
                    try db.execute(sql: "BEGIN EXCLUSIVE")
                    defer { try? db.execute(sql: "ROLLBACK") }
                    let request: [UInt8] = try Navigator_V1_Request.with {
                        $0.requestID = "L1"
                        $0.intent = intent
                    }.serializedBytes()
                    try dealer.send(multipart: [[], request])
                    // While that reply waits for the file, the worker serves other sessions.
                    try client.send(wireIntent("F1", [ScreenContext("settings")]), session: "free")
                    let freeBatch = try free.nextPublished().batch
                    // The free session's batch came while the locked one's reply still waits.
                    guard try dealer.tryReceiveMultipart() == nil else {
                        throw TestFailure("the reply came before the other session's batch: the worker waited")
                    }
                    let locked = try Navigator_V1_Reply(serializedBytes: try dealer.receiveMultipart().last!.bytes)
                    return (freeBatch, locked)
                }
                return (freeBatch, locked, try client.request(.intent(intent)))
            }
            #expect(freeBatch.intentID == "F1")
            #expect(locked.rejected.code == .unavailable, "\(locked)")
            #expect(locked.rejected.message.contains("applied and published but is not yet durable"))
            #expect(retried.ignored.reason == "duplicate intent id L1")
            // Counted in /metrics (the log says it once a minute at most).
            let failed = BackpressureServiceTests.gauge("navigator_state_writes_failed_total", in: server) ?? 0
            #expect(failed >= 1, "\(failed)")
        }
    }

    @Test("client text in logs: control characters escaped, long text cut")
    func logText() {
        #expect(LogText("a\nb\r\tc\u{1B}[31m\\").description == #"a\nb\r\tc\u{1B}[31m\\"#)
        #expect(LogText("line\u{2028}sep").description == #"line\u{2028}sep"#)
        let long = LogText(String(repeating: "x", count: 60_000)).description
        #expect(long.utf8.count < LogText.limit + 40)
        #expect(long.hasSuffix("…(60000 bytes in all)"))
    }
}

@Suite("Hostile frames and subscriptions")
struct HostileFrameTests {
    @Test("an intent of 300,000 empty frames is refused as BAD_FRAMES, and the service goes on")
    func manyFrames() async throws {
        try await withService { _, endpoints in
            let (rejection, after) = try await onThread { () throws -> (Navigator_V1_Rejection, Navigator_V1_Reply) in
                let client = try Client(endpoints)
                let rejections = try client.subscribe("r/")
                try client.sendRaw([Array("many".utf8)] + Array(repeating: [UInt8](), count: 300_000))
                let rejection = try rejections.nextPublished().rejection
                let after = try client.request(
                    .intent(wireIntent("ok", [ScreenContext("settings")], session: "many")))
                return (rejection, after)
            }
            #expect(rejection.code == .badFrames)
            #expect(rejection.message.contains("has 300001 frames; expected 2"))
            #expect(after.resolved.batch.seq == 1)
        }
    }

    @Test("a subscription longer than any topic drops that subscriber; the others keep receiving")
    func hugeSubscription() async throws {
        try await withService { _, endpoints in
            let (stats, batch) = try await onThread { () throws -> (Navigator_V1_Stats, Navigator_V1_CommandBatch) in
                let client = try Client(endpoints)
                let good = try client.subscribe("s/h/")
                let bad = try Socket(client.context, type: .sub)
                // Not 300,000 bytes: libzmq's SUB keeps its own subscriptions in a trie one level
                // per byte and tears it down recursively, which overflows the reaper's stack in
                // the test process itself (the service's XPUB never stores such a topic now).
                try bad.subscribe(String(repeating: "x", count: 4000))
                try bad.connect(endpoints.commands[0])
                _ = try client.request(.intent(wireIntent("h1", [ScreenContext("settings")], session: "h")))
                let batch = try good.nextPublished().batch
                return (try client.request(.stats(.init())).stats, batch)
            }
            #expect(stats.subscribers == 1)  // the long one never counted
            #expect(batch.intentID == "h1")
        }
    }
}

@Suite("State file gone")
struct StateFileGoneTests {
    static func rows(_ path: String) throws -> Int {
        try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sessions") ?? 0 }
    }

    @Test("a state file deleted while running is written again in full within a flush; a restart has everything")
    func deletedWhileRunning() async throws {
        let directory = temporaryDirectory("navgone")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("navigator.sqlite").path
        let fast: (inout EngineConfiguration) -> Void = { $0.flushIntervalMilliseconds = 50 }
        try await withService(dataDirectory: directory, fast) { _, endpoints in
            try await onThread {
                let client = try Client(endpoints)
                for index in 0..<5 {
                    _ = try client.request(
                        .intent(wireIntent("g\(index)", [ScreenContext("settings")], session: "gone\(index)")))
                }
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                // A fire-and-forget change after the deletion must reach the new file too.
                try client.send(wireIntent("late", [ScreenContext("settings")]), session: "late")
                let deadline = ContinuousClock.now + .seconds(10)
                while !FileManager.default.fileExists(atPath: path) || (try? Self.rows(path)) != 6 {
                    guard ContinuousClock.now < deadline else {
                        throw TestFailure("the state file was not written again with all 6 sessions")
                    }
                    Thread.sleep(forTimeInterval: 0.01)
                }
            }
        }
        try await withService(dataDirectory: directory) { server, _ in
            #expect(server.store.sessionCount == 6)
        }
    }
}

/// Keeps what is logged, for tests.
final class CapturedLog: @unchecked Sendable {
    // @unchecked: `lines` is behind a Mutex; the handler is a value holding this reference.
    let lines = Locked<[String]>([])

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let text = "\(event.message) \(event.metadata ?? [:])"
            log.lines.withLock { $0.append(text) }
        }
    }

    var logger: Logger { Logger(label: "captured") { _ in Handler(log: self) } }
}

@Suite("Log volume")
struct LogLimiterTests {
    @Test("a peer gets 10 rejection lines per 10 s; the rest are counted and the count is logged")
    func limiter() {
        let captured = CapturedLog()
        let limiter = LogLimiter(logger: captured.logger)
        let allowed = (0..<25).filter { _ in limiter.allow("10.0.0.1", now: 1_000) }.count
        #expect(allowed == 10)
        #expect(limiter.allow("10.0.0.2", now: 2_000))  // another peer has its own budget
        #expect(limiter.allow("10.0.0.1", now: 1_000 + LogLimiter.window))  // a new window
        let lines = captured.lines.withLock { $0 }
        #expect(lines.count == 1)
        #expect(lines.first?.contains("rejection lines not logged") == true)
        #expect(lines.first?.contains("15") == true)
    }

    @Test("a failure each round: the first logged, then a line a minute with how many were not; one line when it works")
    func repeatedFailure() {
        let captured = CapturedLog()
        var failure = RepeatedFailure()
        failure.worked("back", logger: captured.logger, now: 0)  // nothing had failed: no line
        let second: Int64 = 1_000_000_000
        for tick in 0..<60 { failure.failed("the store is away", logger: captured.logger, now: Int64(tick) * second) }
        #expect(failure.isFailing)
        #expect(captured.lines.withLock { $0 }.count == 1)
        failure.failed("the store is away", metadata: ["error": "gone"], logger: captured.logger, now: 60 * second)
        failure.failed("the store is away", logger: captured.logger, now: 61 * second)
        failure.worked("the store is back", logger: captured.logger, now: 65 * second)
        failure.worked("the store is back", logger: captured.logger, now: 66 * second)
        let lines = captured.lines.withLock { $0 }
        #expect(lines.count == 3, "\(lines)")
        #expect(lines[1].contains("failures not logged") && lines[1].contains("59") && lines[1].contains("gone"))
        #expect(lines[1].contains("60.0 s"), "\(lines[1])")
        #expect(lines[2].hasPrefix("the store is back") && lines[2].contains("62") && lines[2].contains("65.0 s"))
        #expect(!failure.isFailing)
        // Failing again after it worked is a first failure again: logged at once.
        failure.failed("the store is away", logger: captured.logger, now: 70 * second)
        #expect(captured.lines.withLock { $0 }.count == 4)
    }
}

@Suite("Log volume: messages of a shape nobody sends")
struct UnexpectedLinesTests {
    @Test("every one is counted; 10 lines a minute per inbox are logged, then how many were not")
    func unexpectedLines() {
        let captured = CapturedLog()
        let counters = EngineCounters(workers: 1)
        // A time no other test uses, on an inbox nothing else sends a bad shape to.
        let start: Int64 = 1 << 62
        for _ in 0..<100 {
            Internal.unexpected(3, at: .egress, counters: counters, logger: captured.logger, now: start)
        }
        #expect(counters.unexpectedInternal.load == 100)
        #expect(captured.lines.withLock { $0 }.count == Internal.unexpectedLinesPerWindow)
        Internal.unexpected(
            3, at: .egress, counters: counters, logger: captured.logger, now: start + Internal.unexpectedWindow)
        let lines = captured.lines.withLock { $0 }
        #expect(lines.count == Internal.unexpectedLinesPerWindow + 2, "\(lines)")
        #expect(lines.contains { $0.contains("without a line each") && $0.contains("90") }, "\(lines)")
    }
}

@Suite("Idle sessions expire")
struct IdleExpiryTests {
    @Test(
        "an acknowledged write with nothing to write (a refused intent's session) does not take a store that is away to be back"
    )
    func flushWithNothingToWrite() throws {
        let directory = temporaryDirectory("navflushed")
        defer { try? FileManager.default.removeItem(at: directory) }
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
        let captured = CapturedLog()
        let file = try StateFile(directory: directory.path)
        let persistence = Persistence(database: file, store: store, logger: captured.logger)
        _ = SessionWork.resolve(
            .show(ScreenContext("settings"), id: "i", session: "a"), store: store, resolver: resolver, maxSessions: 10,
            now: 1)
        let holder = try DatabaseQueue(path: directory.appendingPathComponent("navigator.sqlite").path)
        try holder.inDatabase { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            defer { try? db.execute(sql: "ROLLBACK") }
            #expect(throws: (any Error).self) { try persistence.flush(["a"]) }  // the file is locked
            // No such session, or none: nothing is written, and the store is not said to be back.
            try persistence.flush(["nobody"])
            try persistence.flush([])
            let lines = captured.lines.withLock { $0 }
            #expect(lines.count == 1 && lines[0].contains("before their replies failed"), "\(lines)")
        }
        try persistence.flush(["a"])
        // Written once the file is free: the store is said to be back then.
        let lines = captured.lines.withLock { $0 }
        #expect(lines.count == 2 && lines[1].contains("written to") && lines[1].contains("again"), "\(lines)")
    }

    @Test("sessions unchanged past the expiry are forgotten in memory and on disk; a new one starts beyond their seqs")
    func idleSessionsExpire() async throws {
        let directory = temporaryDirectory("navidle")
        defer { try? FileManager.default.removeItem(at: directory) }
        let resolver = try Resolver(map: .demo)
        let file = try StateFile(directory: directory.path)
        let store = SessionStore(shards: 2, epoch: 1) { _ in resolver.initialState() }
        let persistence = Persistence(database: file, store: store, logger: TestService.logger("idle"))
        for (index, session) in ["a", "b"].enumerated() {
            for step in 0...index {
                _ = SessionWork.resolve(
                    .show(ScreenContext("chat", ["conversationId": "\(step + 1)"]), id: "i\(step)", session: session),
                    store: store, resolver: resolver, maxSessions: 10, now: 1)
            }
        }
        #expect(store.read("b").seq == 2)
        #expect(persistence.flushChanged())
        #expect(persistence.expireIdle(after: 1_000_000_000, now: MonotonicClock.now() + 2_000_000_000) == 2)
        #expect(store.sessionCount == 0)
        #expect(try StateFileGoneTests.rows(file.path) == 0)
        // The next incarnation of "b" starts beyond the old seqs, leaving a gap a shell sees.
        let again = SessionWork.resolve(
            .show(ScreenContext("settings"), id: "n1", session: "b"), store: store, resolver: resolver, maxSessions: 10,
            now: 2)
        #expect(again.own?.seq == 4)
        // And so does a restart: the floor is in the state file.
        #expect(persistence.flushChanged())
        let restored = SessionStore(shards: 2, epoch: 1) { _ in resolver.initialState() }
        _ = try Persistence(
            database: try StateFile(directory: directory.path), store: restored, logger: TestService.logger("idle")
        )
        .restore()
        #expect(restored.read("never-seen").seq == 3)
    }
}

@Suite("Subscriptions per peer")
struct SubscriptionLimitTests {
    @Test("the book: repeats and strangers' unsubscriptions change nothing; a peer's departure counts its topics down")
    func book() {
        var book = SubscriptionBook(limit: 3)
        let a = Array("s/a/".utf8)
        let audit = Array("a/".utf8)
        #expect(book.subscribe(a, peer: 7) == .counted)
        #expect(book.subscribe(a, peer: 7) == .unchanged)
        #expect(book.subscribe(a, peer: 8) == .counted)
        #expect(book.topics == 1)
        book.unsubscribe(Array("s/zzz/".utf8), peer: 7)  // never held
        book.unsubscribe(a, peer: 9)  // a peer that never subscribed
        #expect(book.topics == 1)
        #expect(book.subscribe(audit, peer: 7) == .counted)
        #expect(book.auditTopics == 1 && book.topics == 2)
        // Peer 7 goes away: libzmq unsubscribes each topic it held, with no descriptor.
        book.forget(peer: 7)
        book.unsubscribe(a, peer: nil)
        book.unsubscribe(audit, peer: nil)
        #expect(book.topics == 1 && book.auditTopics == 0)  // peer 8 still holds s/a/
        // Never below zero, whatever comes.
        book.unsubscribe(audit, peer: nil)
        #expect(book.auditTopics == 0)
        #expect(book.subscribe(Array("1".utf8), peer: 8) == .counted)
        #expect(book.subscribe(Array("2".utf8), peer: 8) == .counted)
        #expect(book.subscribe(Array("3".utf8), peer: 8) == .overLimit(holding: 4))
        #expect(book.subscribe(Array("x".utf8), peer: nil) == .counted)  // inproc: no limit
    }

    @Test("a peer subscribing beyond maxSubscriptionsPerPeer is dropped with its topics; a shell keeps receiving")
    func greedyPeerDropped() async throws {
        let configure: (inout EngineConfiguration) -> Void = { $0.maxSubscriptionsPerPeer = 20 }
        try await withService(configure) { server, endpoints in
            let (after, batch) = try await onThread { () throws -> (Navigator_V1_Stats, Navigator_V1_CommandBatch) in
                let client = try Client(endpoints)
                let shell = try client.subscribe("s/keep/")
                let greedy = try Socket(client.context, type: .xsub)
                // Not made again once dropped: a reconnection subscribing its topics again raced
                // the count of subscribers read below (seen once: 51 where 1 was expected).
                try greedy.set(.reconnectInterval, -1)
                try greedy.connect(endpoints.commands[0])
                // Strangers' unsubscriptions first: they must not count anything down.
                for index in 0..<5 { try greedy.send([0] + Array("s/never\(index)/".utf8)) }
                for index in 0..<50 { try greedy.send([1] + Array("s/greedy\(index)/".utf8)) }
                let deadline = ContinuousClock.now + .seconds(10)
                while server.counters.subscribersDropped.load == 0 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the greedy peer was not dropped") }
                }
                greedy.close()  // it would reconnect and be dropped again
                // Its topics go with it: back to the shell's one.
                while try client.request(.stats(.init())).stats.subscribers != 1 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the greedy topics stayed") }
                }
                _ = try client.request(.intent(wireIntent("k1", [ScreenContext("settings")], session: "keep")))
                return (try client.request(.stats(.init())).stats, try shell.nextPublished().batch)
            }
            #expect(after.subscribers == 1)
            #expect(batch.intentID == "k1")
            #expect(server.counters.subscribersDropped.load >= 1)
        }
    }
}
