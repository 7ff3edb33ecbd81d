import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Postgres
import Testing
import ZeroMQ

@testable import NavigatorEngine

/// navigatord with `--store postgresql://…` against the throwaway server of scripts/postgres.sh:
/// the executable as a user runs it, a database of its own per test.
@Suite("PostgreSQL store", .enabled(if: TestPostgres.enabled))
struct PostgresStoreTests {
    @Test("an acknowledged intent survives kill -9; the password never reaches the log")
    func killNine() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            let first = try Daemon(
                dataDirectory: directory, extra: ["--store", url, "--cluster-endpoint", "tcp://127.0.0.1:*"])
            defer { first.reap() }
            let endpoints = try await first.endpoints()
            let target = ScreenContext("thread", ["conversationId": "4", "threadId": "2"])
            let reply = try await onThread {
                try Client(endpoints).request(.intent(wireIntent("k1", [target], session: "k")))
            }
            #expect(reply.resolved.batch.seq == 1)
            first.signal(SIGKILL)
            #expect(try await first.exitStatus() != 0)

            let second = try Daemon(
                dataDirectory: directory, extra: ["--store", url, "--cluster-endpoint", "tcp://127.0.0.1:*"])
            defer { second.reap() }
            let again = try await second.endpoints()
            #expect(second.log.contains("sessions in postgresql://navigator:***@127.0.0.1"))
            #expect(second.log.contains("claimed partitions"))
            let snapshot = try await onThread {
                try Client(again).request(.snapshot(.with { $0.session = "k" })).snapshot
            }
            #expect(snapshot.seq == 1)
            #expect(snapshot.epoch != reply.resolved.batch.epoch)  // a new owner: shells resync
            #expect(try snapshot.tree.core().top.context == target)
            second.signal(SIGTERM)
            #expect(try await second.exitStatus() == 0)
            let password = String(url.split(separator: ":")[2].split(separator: "@")[0])
            #expect(!first.log.contains(password) && !second.log.contains(password))
            // Nothing was written to the data directory: the sessions are in the database.
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("navigator.sqlite").path))

            let rows = try PostgresConnection(url: url).execute(
                "SELECT id, partition, seq FROM navigator_sessions")
            #expect(rows.count == 1)
            #expect(try rows[0, 0].text() == "k")
            #expect(try rows[0, 1].int32() == Int32(SessionStore.shardIndex(of: "k", count: 256)))
            #expect(try rows[0, 2].int64() == 1)
        }
    }

    @Test(
        "a graceful stop hands the partitions over: the next instance serves the sessions at a new epoch, the seqs continuing"
    )
    func cleanStop() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let first = try Engine(configuration: configuration, logger: TestService.logger("pg1"))
            try await first.start()
            let one = try await onThread {
                try Client(first.endpoints).request(.intent(wireIntent("a", [ScreenContext("settings")], session: "s")))
            }
            await first.stop()

            let second = try Engine(configuration: configuration, logger: TestService.logger("pg2"))
            try await second.start()
            let snapshot = try await onThread {
                try Client(second.endpoints).request(.snapshot(.with { $0.session = "s" })).snapshot
            }
            #expect(snapshot.epoch != one.resolved.batch.epoch)
            #expect(snapshot.seq == one.resolved.batch.seq)
            await second.stop()
        }
    }

    @Test(
        "two instances split the partitions; either takes any session and forwards it to its owner (with forwarding off: MOVED, naming the owner)",
        arguments: [true, false])
    func twoInstances(forwarding: Bool) async throws {
        try await TestPostgres.withDatabase { url in
            let configure: (inout EngineConfiguration) -> Void = { configuration in
                configuration.leaseSeconds = TestTiming.scaled(seconds: 2)
                if !forwarding { configuration.clusterEndpoint = "off" }
                // The second takes smaller requests than the first (a configuration being rolled out).
                if configuration.instanceID == "two" { configuration.maxMessageBytes = 16 * 1024 }
            }
            try await TestService.withInstances(["one", "two"], url: url, configure) { servers in
                let (first, second) = (servers[0], servers[1])
                // The first hands half over at its next round; waited for with a deadline.
                let firstOwnership = try #require(first.store.ownership)
                let secondOwnership = try #require(second.store.ownership)
                let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(10))
                while firstOwnership.served.count != 128 || secondOwnership.served.count != 128 {
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError(
                            "the partitions were not split: \(firstOwnership.served.count) and \(secondOwnership.served.count)"
                        )
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(firstOwnership.served.isDisjoint(with: secondOwnership.served))
                let sessions = (0..<1000).map { "u\($0)" }.filter {
                    secondOwnership.serves(secondOwnership.partition(of: $0))
                }
                let session = sessions[0]
                // The first learns who took it (and where it takes forwarded messages) at its next round.
                while !firstOwnership.whyNotServed(firstOwnership.partition(of: session), session: session).contains(
                    "two")
                    || (forwarding && firstOwnership.forwardEndpoint(of: session) == nil)
                {
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError("the first never learned the owner")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let viaFirst = try await onThread {
                    try Client(first.endpoints).request(
                        .intent(wireIntent("m1", [ScreenContext("settings")], session: session)))
                }
                let partitionEpoch = secondOwnership.epoch(of: secondOwnership.partition(of: session))
                if forwarding {
                    #expect(viaFirst.resolved.batch.seq == 1, "\(viaFirst)")
                    #expect(viaFirst.resolved.batch.epoch == partitionEpoch)
                    // Either lists both instances, with the endpoints shells subscribe to.
                    let listed = try await onThread { try Client(first.endpoints).request(.instances(.init())) }
                    #expect(listed.instances.instances.map(\.id).sorted() == ["one", "two"])
                    #expect(listed.instances.instances.first { $0.answering }?.id == "one")
                    #expect(
                        listed.instances.instances.first { $0.id == "two" }?.commandEndpoints
                            == second.endpoints.commands)
                    // A snapshot through the first comes from the owner too.
                    let snapshot = try await onThread {
                        try Client(first.endpoints).request(.snapshot(.with { $0.session = session })).snapshot
                    }
                    #expect(snapshot.seq == 1 && snapshot.epoch == partitionEpoch)
                    // A request the first takes and its owner refuses as too large: the refusal
                    // names the request, so it comes back at once (not UNAVAILABLE 5 s later).
                    let large = try await onThread {
                        try Client(first.endpoints).request(
                            .intent(
                                wireIntent(
                                    "m2", [ScreenContext("search", ["query": String(repeating: "q", count: 20_000)])],
                                    session: session)))
                    }
                    #expect(large.rejected.code == .tooLarge, "\(large)")
                    #expect(large.rejected.message.contains("expected at most 16384"), "\(large)")
                    // A fire-and-forget intent sent to the first reaches the owner.
                    let fireAndForget = sessions[1]
                    try await onThread {
                        try Client(first.endpoints).send(
                            wireIntent("f1", [ScreenContext("settings")], session: fireAndForget),
                            session: fireAndForget)
                    }
                    while true {
                        let snapshot = try await onThread {
                            try Client(second.endpoints).request(.snapshot(.with { $0.session = fireAndForget }))
                                .snapshot
                        }
                        if snapshot.seq == 1 { break }
                        guard ContinuousClock.now < deadline else {
                            throw TestPostgresError("the forwarded intent never arrived")
                        }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                } else {
                    #expect(viaFirst.rejected.code == .moved)
                    #expect(viaFirst.rejected.message.contains("which instance two serves; this is one"))
                    #expect(viaFirst.rejected.owner == "two")
                    // NavigatorClient follows MOVED to the instance it names: an acknowledged
                    // intent and a follow of the second's session, through the first.
                    let connection = try await NavigatorConnection(
                        endpoints: ServerEndpoints(
                            intents: first.endpoints.intents[0], requests: first.endpoints.requests[0],
                            commands: first.endpoints.commands[0]), timeout: TestTiming.scaled(.seconds(5)))
                    let followed = sessions[2]
                    let events = connection.follow(.session(followed))
                    let redirected = try await connection.request(
                        .intent(wireIntent("c1", [ScreenContext("settings")], session: followed)))
                    #expect(redirected.resolved.batch.seq == 1, "\(redirected)")
                    let mirrored = Locked<StreamPosition?>(nil)
                    let reader = Task {
                        for try await event in events {
                            switch event {
                            case .snapshot(_, let position, _): mirrored.withLock { $0 = position }
                            case .batch(_, let header, _):
                                mirrored.withLock { $0 = StreamPosition(epoch: header.epoch, seq: header.seq) }
                            default: continue
                            }
                        }
                    }
                    let position = try? await waitFor(
                        "the follow through the first did not reach the batch",
                        timeout: TestTiming.scaled(.seconds(10)),
                        { mirrored.withLock { $0 } }, until: { $0?.seq == 1 }, details: { "" })
                    reader.cancel()
                    await connection.close()
                    #expect(
                        position?.epoch == secondOwnership.epoch(of: secondOwnership.partition(of: followed)),
                        "\(String(describing: mirrored.withLock { $0 }))")
                    let served = try await onThread {
                        try Client(second.endpoints).request(
                            .intent(wireIntent("m1", [ScreenContext("settings")], session: session)))
                    }
                    #expect(served.resolved.batch.seq == 1)
                    #expect(served.resolved.batch.epoch == partitionEpoch)
                }
            }
        }
    }

    @Test(
        "three instances: kill -9 one, five times; its sessions answer from the others once its lease ran out, and no acknowledged intent is lost"
    )
    func failover() async throws {
        try await TestPostgres.withDatabase { url in
            let lease = 2
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            func start(_ slot: Int) throws -> Daemon {
                try Daemon(
                    dataDirectory: directory.appendingPathComponent("n\(slot)"),
                    extra: [
                        "--store", url, "--instance-id", "n\(slot)", "--lease-seconds", "\(lease)",
                        "--cluster-endpoint", "tcp://127.0.0.1:*",
                    ])
            }
            var daemons = try (0..<3).map(start)
            defer { for daemon in daemons { daemon.reap() } }
            var endpoints: [BoundEndpoints?] = [nil, nil, nil]
            for slot in 0..<3 { endpoints[slot] = try await daemons[slot].endpoints() }

            /// Sends a request to each live instance in turn until one serves the session (the
            /// others answer MOVED; one handing the session over answers UNAVAILABLE, and the
            /// same request is sent again, as the protocol says), within `deadline`.
            func request(
                _ kind: Navigator_V1_Request.OneOf_Kind, session: String, until deadline: ContinuousClock.Instant
            ) async throws -> Navigator_V1_Reply {
                while true {
                    for case let target? in endpoints {
                        let reply = try? await onThread {
                            try Client(target, sendTimeout: .seconds(1), receiveTimeout: .seconds(1), linger: .zero)
                                .request(kind)
                        }
                        if let reply, reply.rejected.code != .moved, reply.rejected.code != .unavailable {
                            return reply
                        }
                    }
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError("no instance served session \(session) in time")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }

            let sessions = (0..<24).map { "f\($0)" }
            var expected: [String: ScreenContext] = [:]
            for kill in 0..<5 {
                // Acknowledged intents to every session, wherever it is served now.
                for session in sessions {
                    let target = ScreenContext("chat", ["conversationId": "\(kill * 100 + 1)"])
                    let reply = try await request(
                        .intent(wireIntent("k\(kill)-\(session)", [target], session: session)), session: session,
                        until: .now + .seconds(30))
                    // Resolved, or (a retry after UNAVAILABLE whose first try was written) a duplicate.
                    #expect(
                        reply.resolved.hasBatch || reply.ignored.reason.contains("duplicate"), "\(session): \(reply)")
                    expected[session] = target
                }
                let slot = kill % 3
                daemons[slot].signal(SIGKILL)
                _ = try await daemons[slot].exitStatus()
                endpoints[slot] = nil
                let killedAt = ContinuousClock.now
                // Every session answers, with its last acknowledged change. The time that takes is
                // measured in BENCHMARKS.md (scripts/bench-failover.sh: 4.4-6.6 s with 2 s leases);
                // here it is only bounded, generously, so that a loaded machine does not fail it.
                for session in sessions {
                    let reply = try await request(
                        .snapshot(.with { $0.session = session }), session: session,
                        until: killedAt + .seconds(lease * 10))
                    #expect(try reply.snapshot.tree.core().top.context == expected[session], "\(session)")
                }
                // The replacement joins (once its predecessor's row ran out) and takes its share.
                daemons[slot].reap()
                daemons[slot] = try start(slot)
                endpoints[slot] = try await daemons[slot].endpoints()
            }
            for daemon in daemons { daemon.signal(SIGTERM) }
            for daemon in daemons { #expect(try await daemon.exitStatus() == 0) }
        }
    }

    @Test(
        "a shell following a session through one instance converges across its owner's kill -9, over ZeroMQ and over an HTTP stream"
    )
    func followerConverges() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            func start(_ name: String) throws -> Daemon {
                try Daemon(
                    dataDirectory: directory.appendingPathComponent(name),
                    extra: [
                        "--store", url, "--instance-id", name, "--lease-seconds", "2", "--cluster-endpoint",
                        "tcp://127.0.0.1:*", "--http", "127.0.0.1:0",
                    ])
            }
            let entry = try start("entry")
            defer { entry.reap() }
            let owner = try start("owner")
            defer { owner.reap() }
            let endpoints = try await entry.endpoints()
            _ = try await owner.endpoints()
            // A session the second instance serves, once the two have split the partitions.
            let database = try PostgresConnection(url: url)
            let deadline = ContinuousClock.now + .seconds(20)
            var session: String? = nil
            while session == nil {
                let rows = try database.execute("SELECT partition FROM navigator_leases WHERE owner = 'owner'")
                let owned = try Set((0..<rows.count).map { try rows[$0, 0].int32() })
                if owned.count >= 100 {
                    session = (0..<1000).map { "w\($0)" }.first {
                        owned.contains(Int32(SessionStore.shardIndex(of: $0, count: 256)))
                    }
                } else {
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError("the partitions were not split")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            let followed = session!
            let connection = try await NavigatorConnection(
                endpoints: ServerEndpoints(
                    intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0]),
                timeout: .seconds(5))
            var events = connection.follow(.session(followed)).makeAsyncIterator()

            /// An acknowledged intent through the entry instance, retried on MOVED, UNAVAILABLE and
            /// on no reply (forwarded to an owner that died before answering), as clients do.
            func show(_ id: String, _ target: ScreenContext) async throws -> Navigator_V1_Reply {
                while true {
                    let reply = try? await connection.request(.intent(wireIntent(id, [target], session: followed)))
                    if let reply, reply.rejected.code != .moved, reply.rejected.code != .unavailable { return reply }
                    guard ContinuousClock.now < deadline + .seconds(20) else {
                        throw TestPostgresError("no instance resolved \(id): \(String(describing: reply))")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            /// Reads events until the mirror shows `target` at the top; the test ends within 90 s (a follower
            /// that never shows it fails the test instead of hanging the run).
            let watchdog = Task {
                try await Task.sleep(for: .seconds(90))
                await connection.close()  // ends the follower's stream: next() returns nil
            }
            defer { watchdog.cancel() }
            func waitForMirror(_ target: ScreenContext) async throws {
                while true {
                    guard let event = try await events.next() else {
                        throw TestPostgresError("the follower ended before its mirror showed \(target)")
                    }
                    switch event {
                    case .snapshot(_, _, let tree), .batch(_, _, let tree):
                        if tree.top.context == target { return }
                    default: continue
                    }
                }
            }
            // An SSE stream of the session opened on the entry instance, which does not own it.
            let stream = try SSEClient(try #require(try await entry.httpAddress()), "/v1/sessions/\(followed)/stream")
            defer { stream.close() }
            let opened = try await stream.wait("the stream's snapshot", timeout: .seconds(30)) { !$0.isEmpty }
            let firstEpoch = try #require(opened[0].streamEvent?.snapshot).epoch

            let before = ScreenContext("chat", ["conversationId": "1"])
            let shown = try await show("c1", before)
            #expect(shown.resolved.hasBatch)
            try await waitForMirror(before)
            try await stream.wait("the first batch on the stream") {
                $0.contains { $0.id == "\(firstEpoch):\(shown.resolved.batch.seq)" }
            }

            owner.signal(SIGKILL)
            _ = try await owner.exitStatus()
            let after = ScreenContext("chat", ["conversationId": "2"])
            let reply = try await show("c2", after)
            #expect(reply.resolved.hasBatch, "\(reply)")
            // The entry instance serves the session now, at another epoch: the mirror resyncs and
            // follows it.
            try await waitForMirror(after)
            let snapshot = try await connection.request(.snapshot(.with { $0.session = followed })).snapshot
            #expect(try snapshot.tree.core().top.context == after)
            #expect(snapshot.epoch == reply.resolved.batch.epoch)
            // The HTTP stream follows too: a snapshot of the new epoch, then its batch (or a
            // snapshot that has it already), and that snapshot shows the screen.
            let epoch = reply.resolved.batch.epoch
            let seq = reply.resolved.batch.seq
            func snapshots(_ events: [SSEClient.Event]) -> [Navigator_V1_Snapshot] {
                events.filter { $0.event == "snapshot" }.compactMap { $0.streamEvent?.snapshot }.filter {
                    $0.epoch == epoch
                }
            }
            let streamed = try await stream.wait("the new epoch on the stream", timeout: .seconds(30)) { events in
                events.contains { $0.id == "\(epoch):\(seq)" } || snapshots(events).contains { $0.seq >= seq }
            }
            let newSnapshot = try #require(snapshots(streamed).last)
            #expect(newSnapshot.epoch != firstEpoch)
            if newSnapshot.seq >= seq { #expect(try newSnapshot.tree.core().top.context == after) }
            await connection.close()
            entry.signal(SIGTERM)
            #expect(try await entry.exitStatus() == 0)
        }
    }

    @Test(
        "a fire-and-forget intent forwarded to an owner whose worker's queue is full is refused there, with a Rejection on r/<session>/ (OVERLOADED), not dropped"
    )
    func forwardedOverloaded() async throws {
        try await TestPostgres.withDatabase { url in
            let configure: (inout EngineConfiguration) -> Void = { configuration in
                configuration.leaseSeconds = TestTiming.scaled(seconds: 2)
                configuration.workers = 1
                configuration.handoffHighWaterMark = 2
            }
            try await TestService.withInstances(["one", "two"], url: url, configure) { servers in
                let (first, second) = (servers[0], servers[1])
                let firstOwnership = try #require(first.store.ownership)
                let secondOwnership = try #require(second.store.ownership)
                let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(15))
                var session: String?
                while session == nil {
                    session = (0..<1000).map { "o\($0)" }.first {
                        secondOwnership.serves(secondOwnership.partition(of: $0))
                            && firstOwnership.forwardEndpoint(of: $0) != nil
                    }
                    guard session == nil else { break }
                    guard ContinuousClock.now < deadline else {
                        throw TestPostgresError("the first never learned that the second serves a session")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let target = try #require(session)
                let refused = try await onThread { () throws -> (Navigator_V1_Rejection, Int) in
                    let shell = try Client(second.endpoints).subscribe("r/\(target)/")
                    try shell.set(.receiveTimeout, .seconds(1))
                    let producer = try Client(first.endpoints, linger: .seconds(5))
                    // The test holds the owner's only shard: its worker stops at its first intent,
                    // its queue fills, and what is forwarded next has no room.
                    return try second.store.shards[0].records.withLock { _ in
                        let until = ContinuousClock.now + TestTiming.scaled(.seconds(20))
                        var sent = 0
                        while ContinuousClock.now < until {
                            for _ in 0..<64 {
                                try producer.send(
                                    wireIntent("ff\(sent)", [ScreenContext("settings")], session: target),
                                    session: target)
                                sent += 1
                            }
                            if let published = try? shell.nextPublished() {
                                return (try Navigator_V1_Rejection(serializedBytes: published.payload), sent)
                            }
                        }
                        throw TestFailure("no rejection after \(sent) forwarded intents")
                    }
                }
                #expect(refused.0.code == .overloaded, "\(refused.0)")
                #expect(refused.0.message.contains("handoffHighWaterMark"), "\(refused.0)")
                #expect(refused.0.intentID.hasPrefix("ff"))
                #expect(second.counters.rejections[Navigator_V1_RejectCode.overloaded.rawValue].load > 0)
            }
        }
    }

    @Test("a database migrated by a newer navigatord is refused and left as it is")
    func newerSchema() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let server = try Engine(configuration: configuration, logger: TestService.logger("pg"))
            try await server.start()
            await server.stop()
            let connection = try PostgresConnection(url: url)
            try connection.execute("INSERT INTO navigator_migrations (name) VALUES ('from the future')")
            do {
                _ = try Engine(configuration: configuration, logger: TestService.logger("pg"))
                Issue.record("a newer schema was accepted")
            } catch {
                #expect(
                    "\(error)".contains(
                        "was migrated by a newer navigatord (migrations from the future are unknown here)"))
            }
            #expect(
                try connection.execute("SELECT count(*) FROM navigator_migrations")[0, 0].int64()
                    == PostgresStateDatabase.migrations.count + 1)
        }
    }

    @Test("a stored session that does not load is quarantined; the others load")
    func quarantine() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let first = try Engine(configuration: configuration, logger: TestService.logger("pg"))
            try await first.start()
            _ = try await onThread {
                try Client(first.endpoints).request(
                    .intent(wireIntent("a", [ScreenContext("settings")], session: "good")))
            }
            await first.stop()
            try PostgresConnection(url: url).execute(
                "INSERT INTO navigator_sessions (id, partition, seq, state) VALUES ('bad', 0, 3, $1)",
                [.bytes([0xFF, 0xFF, 0xFF])])
            let second = try Engine(configuration: configuration, logger: TestService.logger("pg"))
            try await second.start()
            let snapshot = try await onThread {
                try Client(second.endpoints).request(.snapshot(.with { $0.session = "good" })).snapshot
            }
            #expect(snapshot.seq == 1)
            await second.stop()
            let rows = try PostgresConnection(url: url).execute("SELECT id, reason FROM navigator_quarantine")
            #expect(rows.count == 1)
            #expect(try rows[0, 0].text() == "bad")
            #expect(try rows[0, 1].text().contains("the state does not load"))
        }
    }

    @Test("an unreachable server is refused at start with the URL shown without its password")
    func unreachable() async throws {
        let directory = TestService.temporaryDirectory("navpg")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TestService.configuration(dataDirectory: directory)
        // Port 1 on loopback: nothing listens there.
        configuration.store = .postgresql(url: "postgresql://navigator:hunter2@127.0.0.1:1/navigator")
        do {
            _ = try Engine(configuration: configuration, logger: TestService.logger("pg"))
            Issue.record("an unreachable database was accepted")
        } catch {
            #expect("\(error)".contains("cannot connect to postgresql://navigator:***@127.0.0.1:1/navigator"))
            #expect(!"\(error)".contains("hunter2"))
        }
    }
}

@Suite("Secure instances forward", .enabled(if: TestPostgres.enabled))
struct SecureForwardingTests {
    @Test(
        "three secure instances on one database: any of them answers any session's acknowledged intent (never MOVED), as the client itself; a fire-and-forget one arrives; a client cannot forward"
    )
    func threeSecureInstances() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await TestPostgres.withDatabase { url in
            let configure: (inout EngineConfiguration) -> Void = { configuration in
                configuration.leaseSeconds = TestTiming.scaled(seconds: 2)
                setup.configure(&configuration)
            }
            try await TestService.withInstances(["a", "b", "c"], url: url, configure) { servers in
                let ownerships = try servers.map { try #require($0.store.ownership) }
                // The partitions are shared out, and each instance knows where the others take
                // forwarded messages: waited for with a deadline.
                let sessions = (0..<60).map { "shop-\($0)" }
                _ = try await waitFor(
                    "the partitions were not shared out", timeout: TestTiming.scaled(.seconds(20)),
                    {
                        ownerships.map(\.served.count).allSatisfy { $0 > 0 }
                            && ownerships.map(\.served.count).reduce(0, +) == 256
                            && sessions.allSatisfy { session in
                                ownerships.allSatisfy {
                                    $0.serves($0.partition(of: session)) || $0.forwardEndpoint(of: session) != nil
                                }
                            }
                    }, until: { $0 }, details: { "\(ownerships.map(\.served.count))" })
                // An admin follows the audit stream of every instance; a producer sends every
                // session's intent through every instance. (Sockets stay on the thread that made them.)
                let endpoints = servers.map(\.endpoints)
                let (replies, records) = try await onThread {
                    () throws -> ([[Navigator_V1_Reply]], [Navigator_V1_AuditRecord]) in
                    // Each instance's links to the others are up (in secure mode each is a CURVE
                    // handshake, which a loaded machine can take longer over than the 200 ms a
                    // first message waits for its link, and then answer MOVED): a snapshot of a
                    // session another instance serves is forwarded through every pair, before
                    // anyone follows the audit streams.
                    for (index, endpoint) in endpoints.enumerated() {
                        let admin = try setup.client(setup.admin, endpoint)
                        for other in ownerships.indices where other != index {
                            let session = try #require(
                                sessions.first { ownerships[other].serves(ownerships[other].partition(of: $0)) },
                                "instance \(other) serves none of the sessions")
                            try waitUntil("instance \(index) forwards to instance \(other)") {
                                try admin.request(.snapshot(.with { $0.session = session })).rejected.code != .moved
                            }
                        }
                    }
                    var audits: [Socket] = []
                    var admins: [Client] = []
                    for endpoint in endpoints {
                        let admin = try setup.client(setup.admin, endpoint)
                        audits.append(try admin.subscriber(["a/"]))
                        try waitUntil("egress applied the admin's topic") {
                            try admin.request(.stats(.init())).stats.subscribers >= 1
                        }
                        admins.append(admin)
                    }
                    defer { for audit in audits { audit.close() } }
                    let replies = try endpoints.enumerated().map { index, endpoint in
                        let producer = try setup.client(setup.producer, endpoint)
                        return try sessions.map { session in
                            try producer.request(
                                .intent(
                                    wireIntent("i\(index)-\(session)", [ScreenContext("settings")], session: session)))
                        }
                    }
                    // Each owner published the records of its sessions (all replied: they are out).
                    var records: [Navigator_V1_AuditRecord] = []
                    for audit in audits {
                        try audit.set(.receiveTimeout, .milliseconds(500))
                        while let message = try? audit.nextPublished() { records.append(try message.audit) }
                    }
                    return (replies, records)
                }
                // Every session through every instance: resolved, wherever it is served.
                var forwarded = 0
                for (index, answers) in replies.enumerated() {
                    for (session, reply) in zip(sessions, answers) {
                        #expect(reply.rejected.code == .unspecified, "via \(index), \(session): \(reply)")
                        // The first intent moves the session; the same again through the others changes nothing.
                        if index == 0 { #expect(reply.resolved.batch.session == session, "\(reply)") }
                        if !ownerships[index].serves(ownerships[index].partition(of: session)) { forwarded += 1 }
                    }
                }
                #expect(forwarded >= 60, "only \(forwarded) of 180 intents were forwarded")
                #expect(servers.map { $0.counters.forwardsSent.load }.reduce(0, +) >= UInt64(forwarded))
                // The owner decided as the producer itself: its audit records name it.
                #expect(records.count == 180)
                #expect(records.allSatisfy { $0.client == "shop-gateway" }, "\(Set(records.map(\.client)))")
                // Outside its sessions the producer is refused, through any instance.
                let refused = try await onThread {
                    try setup.client(setup.producer, servers[0].endpoints).request(
                        .intent(wireIntent("x1", [ScreenContext("settings")], session: "s1")))
                }
                #expect(refused.rejected.code == .forbidden)
                // A fire-and-forget intent sent to an instance that does not serve its session arrives.
                let elsewhere = try #require(sessions.first { !ownerships[0].serves(ownerships[0].partition(of: $0)) })
                @Sendable func seq(_ session: String) throws -> UInt64 {
                    try setup.client(setup.admin, endpoints[2]).request(.snapshot(.with { $0.session = session }))
                        .snapshot.seq
                }
                let seqBefore = try await onThread { try seq(elsewhere) }
                try await onThread {
                    // Lingering: the message must outlive the client's close, as a producer's does.
                    let producer = try Client(
                        servers[0].endpoints, linger: .seconds(5), curve: (setup.producer, setup.server.publicKey))
                    try producer.send(wireIntent("f1", [ScreenContext("home")], session: elsewhere), session: elsewhere)
                }
                _ = try await waitForBlocking(
                    "the forwarded fire-and-forget intent never arrived", timeout: TestTiming.scaled(.seconds(10)),
                    { (try? seq(elsewhere)) ?? 0 }, until: { $0 == seqBefore + 1 },
                    details: {
                        "forwarded \(servers.map { $0.counters.forwardsSent.load }), taken \(servers.map { $0.counters.forwardsReceived.load }), rejections \(servers.map { $0.counters.rejections.map(\.load) })"
                    })
                // A client's own CURVE connection to a cluster endpoint forwards nothing, whatever
                // name it puts in the last frame.
                let target = try #require(sessions.first { ownerships[1].serves(ownerships[1].partition(of: $0)) })
                let clusterEndpoint = try #require(servers[1].endpoints.cluster)
                let before = servers[1].counters.forwardsRefused.load
                let targetBefore = try await onThread { try seq(target) }
                try await onThread {
                    // Lingering: the message goes out once the handshake is done, before the close.
                    let context = try Context()
                    let dealer = try Socket(context, type: .dealer)
                    defer { dealer.close() }
                    try dealer.set(.linger, .seconds(5))
                    try dealer.makeCurveClient(setup.producer, serverKey: setup.server.publicKey)
                    try dealer.connect(clusterEndpoint)
                    let intent = wireIntent("forged", [ScreenContext("home")], session: target)
                    try dealer.send(
                        multipart: [
                            [1], Array(target.utf8), try intent.serializedBytes() as [UInt8], Array("ops".utf8),
                        ])
                    // Longer than any message there (read into six frames and a spare): refused
                    // too, its last frame read where it was kept (it trapped on nav-requests).
                    try dealer.send(multipart: [[1]] + Array(repeating: Array("ops".utf8), count: 8))
                }
                _ = try await waitFor(
                    "the stranger's messages were not refused", timeout: TestTiming.scaled(.seconds(10)),
                    { servers[1].counters.forwardsRefused.load }, until: { $0 >= before + 2 }, details: { "" })
                let targetAfter = try await onThread { try seq(target) }
                #expect(targetAfter == targetBefore, "the forged intent changed \(target)")
                // A client with many requests in flight on one connection (NavigatorConnection
                // pipelines them) gets every forwarded one's reply.
                let bound = servers[0].endpoints
                let connection = try await NavigatorConnection(
                    endpoints: ServerEndpoints(
                        intents: bound.intents[0], requests: bound.requests[0], commands: bound.commands[0],
                        curve: CurveCredentials(keys: setup.admin, serverKey: setup.server.publicKey)),
                    timeout: TestTiming.scaled(.seconds(10)))
                let away = sessions.filter { !ownerships[0].serves(ownerships[0].partition(of: $0)) }
                let snapshots = try await withThrowingTaskGroup(of: UInt64.self) { group in
                    for session in away {
                        group.addTask { try await connection.snapshot(session).seq }
                    }
                    return try await group.reduce(into: [UInt64]()) { $0.append($1) }
                }
                await connection.close()
                #expect(snapshots.count == away.count && snapshots.allSatisfy { $0 > 0 })
            }
        }
    }
}
