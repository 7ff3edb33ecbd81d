import Foundation
import Locking
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import Postgres
import Testing

@testable import NavigatorEngine

/// The lease primitives against a real PostgreSQL (scripts/postgres.sh): claims, renewals,
/// expiry, release and fencing, two instances in one test process.
@Suite("Partition leases", .enabled(if: TestPostgres.enabled))
struct PartitionLeaseTests {
    @Test("instances claim disjoint partitions; a released partition is claimed at a higher epoch")
    func claimAndRelease() async throws {
        try await TestPostgres.withDatabase { url in
            // Creates the schema.
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            defer { database.close() }
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .seconds(30))
            let b = PartitionLeases(url: url, instance: "b", partitions: database.partitions, ttl: .seconds(30))
            defer {
                a.close()
                b.close()
            }
            let live = try a.heartbeat(
                InstanceRecord(
                    id: "a", clusterEndpoint: "tcp://127.0.0.1:1", requestEndpoints: ["tcp://127.0.0.1:2"],
                    commandEndpoints: ["tcp://127.0.0.1:3"]))
            #expect(live.map(\.id) == ["a"])
            #expect(live[0].commandEndpoints == ["tcp://127.0.0.1:3"])
            let first = try a.claim(atMost: 256)
            #expect(first.count == 256 && first.values.allSatisfy { $0 == 1 })
            #expect(try b.claim(atMost: 128).isEmpty)
            #expect(
                try b.heartbeat(
                    InstanceRecord(
                        id: "b", clusterEndpoint: "tcp://127.0.0.1:4", requestEndpoints: [], commandEndpoints: [])
                ).map(\.id) == ["a", "b"])
            #expect(PartitionLeases.share(partitions: 256, instances: 2) == 128)
            #expect(PartitionLeases.share(partitions: 256, instances: 3) == 86)
            let given = (128..<256).map(Int32.init)
            try a.release(given)
            let second = try b.claim(atMost: 128)
            #expect(Set(second.keys) == Set(given))
            #expect(second.values.allSatisfy { $0 == 2 })
            #expect(Set(try a.renew().keys) == Set((0..<128).map(Int32.init)))
            let owners = try a.owners()
            #expect(owners.count == 256)
            #expect(owners[0]?.owner == "a" && owners[255]?.owner == "b" && owners[255]?.epoch == 2)
            try b.leave()
            #expect(
                try a.heartbeat(
                    InstanceRecord(id: "a", clusterEndpoint: "x", requestEndpoints: [], commandEndpoints: [])
                ).map(\.id) == ["a"])
        }
    }

    @Test(
        "the row of an instance that ran out an hour ago goes at the next heartbeat; a partition count beyond 65,536 is refused"
    )
    func staleInstancesAndPartitions() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            database.close()
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .seconds(30))
            defer { a.close() }
            // Two instances that died without handing over: one ran out two hours ago (gone at
            // the next heartbeat), one a minute ago (kept, not listed as live).
            let sql = try PostgresConnection(url: url)
            for (id, ago) in [("long-gone", "2 hours"), ("just-gone", "1 minute")] {
                _ = try sql.execute(
                    """
                    INSERT INTO navigator_instances (id, token, cluster_endpoint, request_endpoints, command_endpoints, expires_at)
                        VALUES ($1, 0, '', '', '', now() - interval '\(ago)')
                    """, [.text(id)])
            }
            let live = try a.heartbeat(
                InstanceRecord(id: "a", clusterEndpoint: "x", requestEndpoints: [], commandEndpoints: []))
            #expect(live.map(\.id) == ["a"])
            let rows = try sql.execute("SELECT id FROM navigator_instances ORDER BY id")
            #expect(try (0..<rows.count).map { try rows[$0, 0].text() } == ["a", "just-gone"])
            // A partition count no migration wrote: refused at start, not a trap on every request.
            _ = try sql.execute("UPDATE navigator_meta SET value = 2147483648 WHERE key = 'partitions'")
            #expect {
                _ = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            } throws: { error in
                "\(error)".contains("has 2147483648 partitions in navigator_meta; expected 1 to 65536")
            }
        }
    }

    @Test("a lease that runs out is not renewed; another instance takes it at a higher epoch")
    func expiry() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            defer { database.close() }
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .milliseconds(200))
            let b = PartitionLeases(url: url, instance: "b", partitions: database.partitions, ttl: .seconds(30))
            defer {
                a.close()
                b.close()
            }
            #expect(try a.claim(atMost: 256).count == 256)  // every partition: none is free
            // b gets them once they ran out (the database's clock decides); waited for with a deadline.
            let deadline = ContinuousClock.now + .seconds(30)
            var taken: [Int32: UInt64] = [:]
            while taken.isEmpty {
                guard ContinuousClock.now < deadline else {
                    // Seen once under the full suite's load: say what the rows were.
                    let rows = try PostgresConnection(url: url).execute(
                        """
                        SELECT owner, count(*), min(extract(epoch FROM expires_at - now()))::text,
                            max(extract(epoch FROM expires_at - now()))::text
                        FROM navigator_leases GROUP BY owner
                        """)
                    let text = try (0..<rows.count).map {
                        "\(try rows[$0, 0].isNull ? "none" : rows[$0, 0].text()): \(try rows[$0, 1].int64()) rows, expiring in \(try rows[$0, 2].text())...\(try rows[$0, 3].text()) s"
                    }
                    throw TestPostgresError("the leases never ran out: \(text.joined(separator: "; "))")
                }
                taken = try b.claim(atMost: 4)
                if taken.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(taken == [0: 2, 1: 2, 2: 2, 3: 2])
            #expect(try a.renew().isEmpty)
        }
    }

    @Test(
        "a transaction left open by a stalled instance (its write holds lease rows FOR SHARE) ends after the idle limit, so its partitions can be claimed; without the limit they could not"
    )
    func stalledTransaction() async throws {
        /// Transactions that locked their rows; whether they may end.
        final class Flags: Sendable {
            let locked = Locked(0)
            let release = Locked(false)
        }
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            defer { database.close() }
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .milliseconds(300))
            let b = PartitionLeases(url: url, instance: "b", partitions: database.partitions, ttl: .seconds(30))
            defer {
                a.close()
                b.close()
            }
            #expect(try a.claim(atMost: 256).count == 256)
            // What a write of instance a does first, in a transaction as navigatord's writes open
            // theirs; then a stops (SIGSTOP, a frozen VM) before its next statement. The same on
            // a connection without the limit holds its rows for as long as it waits.
            let lockShare = "SELECT partition FROM navigator_leases WHERE owner = 'a' AND partition = ANY($1) FOR SHARE"
            let flags = Flags()
            let stall: @Sendable (PostgresConnection) throws -> Void = { connection in
                flags.locked.withLock { $0 += 1 }
                let deadline = ContinuousClock.now + .seconds(40)
                while !flags.release.withLock({ $0 }), ContinuousClock.now < deadline { usleep(10_000) }
            }
            async let stalled: Void = onThread {
                let connection = try PostgresConnection(url: url)
                try connection.transaction(idleLimit: .milliseconds(800)) {
                    #expect(try connection.execute(lockShare, [.int32Array([0, 1, 2, 3])]).count == 4)
                    try stall(connection)
                }
            }
            async let unbounded: Void = onThread {
                let connection = try PostgresConnection(url: url)
                try connection.transaction {
                    #expect(try connection.execute(lockShare, [.int32Array([4, 5])]).count == 2)
                    try stall(connection)
                }
            }
            defer { flags.release.withLock { $0 = true } }
            _ = try await waitFor("the two transactions did not lock their rows", timeout: .seconds(10)) {
                flags.locked.withLock { $0 }
            } until: {
                $0 == 2
            } details: {
                ""
            }
            let started = ContinuousClock.now
            var taken: [Int32: UInt64] = [:]
            while taken.count < 254 {
                guard ContinuousClock.now - started < .seconds(30) else {
                    throw TestPostgresError(
                        "b holds \(taken.count) partitions after 30 s; missing \(Set(Int32(0)..<256).subtracting(taken.keys).sorted())"
                    )
                }
                taken.merge(try b.claim(atMost: 256)) { _, new in new }
                if taken.count < 254 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(Set(taken.keys) == Set(Int32(0)..<256).subtracting([4, 5]))
            // The unbounded one still keeps its two rows from every claim, long after a's lease.
            #expect(try b.claim(atMost: 256).isEmpty)
            flags.release.withLock { $0 = true }
            // The server ended the stalled transaction and its connection: its commit fails.
            do {
                try await stalled
                Issue.record("the stalled transaction committed: the server did not end it")
            } catch is PostgresError {}
            try await unbounded
            #expect(Set(try b.claim(atMost: 256).keys) == [4, 5])
        }
    }

    @Test(
        "a round lets go of partitions the lease table says this instance holds but it does not serve (claimed, then neither loaded nor released), and claims them again"
    )
    func strayPartitionsReleased() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            defer { database.close() }
            let leases = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .seconds(30))
            defer { leases.close() }
            // What a claim leaves when its sessions do not load and its release fails too.
            #expect(try leases.claim(atMost: 3) == [0: 1, 1: 1, 2: 1])
            let resolver = try Resolver(map: .demo)
            let store = SessionStore(shards: 1, epoch: 0, ownership: database.ownership) { _ in resolver.initialState()
            }
            let captured = CapturedLog()
            let logger = captured.logger
            let keeper = LeaseKeeper(
                leases: leases, database: database, store: store,
                persistence: Persistence(database: database, store: store, logger: logger), logger: logger,
                peers: LivePeers(), left: { _ in }, joined: { _ in },
                record: { InstanceRecord(id: "a", clusterEndpoint: "", requestEndpoints: [], commandEndpoints: []) })
            try keeper.round()
            // Alone, it holds and serves all 256; the three at a new epoch, claimed again.
            #expect(database.ownership.all.count == 256)
            #expect((0..<256).allSatisfy { database.ownership.serves(Int32($0)) })
            #expect(database.ownership.epoch(of: 0) == 2 && database.ownership.epoch(of: 3) == 1)
            // Again, as each round of a degraded database leaves one (its load failed): released
            // and claimed again, but the line is not logged again within the minute; the first
            // round with none says so once.
            database.ownership.remove([5])
            try keeper.round()
            #expect(database.ownership.serves(5) && database.ownership.epoch(of: 5) == 2)
            try keeper.round()
            try keeper.round()
            let lines = captured.lines.withLock { $0 }
            #expect(lines.filter { $0.contains("released partitions held but not served") }.count == 1, "\(lines)")
            #expect(
                lines.filter {
                    $0.contains("no partitions held but not served any more") && $0.contains("\"failures\": 2")
                }.count
                    == 1, "\(lines)")
        }
    }

    @Test("a write for a partition another instance claimed is fenced; the rest of the batch is written")
    func fencing() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
            defer { database.close() }
            let ownership = database.ownership
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .seconds(30))
            let b = PartitionLeases(url: url, instance: "b", partitions: database.partitions, ttl: .seconds(30))
            defer {
                a.close()
                b.close()
            }
            ownership.add(try a.claim(atMost: 256))
            // Two sessions in different partitions.
            let kept = "s-kept"
            let lost = (0..<1000).map { "s-\($0)" }.first {
                ownership.partition(of: $0) != ownership.partition(of: kept)
            }!
            let state = try SessionStore.Record(state: try Resolver(map: .demo).initialState(), seq: 1).stored()
            try database.write([(kept, 1, state), (lost, 1, state)])
            // b takes the partition of `lost` (a let it go without knowing, as after a pause).
            try a.release([ownership.partition(of: lost)])
            #expect(try b.claim(atMost: 1).keys.first == ownership.partition(of: lost))
            do {
                try database.write([(kept, 2, state), (lost, 2, state)])
                Issue.record("a write to a partition b owns went through")
            } catch let fenced as FencedWrite {
                #expect(fenced.sessions == [lost])
                #expect(fenced.partitions == [ownership.partition(of: lost)])
            }
            let rows = try PostgresConnection(url: url).execute("SELECT id, seq FROM navigator_sessions ORDER BY id")
            var seqs: [String: Int64] = [:]
            for row in 0..<rows.count { seqs[try rows[row, 0].text()] = try rows[row, 1].int64() }
            #expect(seqs == [kept: 2, lost: 1])
            // Loading by partition gives that partition's sessions only.
            let loaded = try database.load(
                partitions: [ownership.partition(of: lost)],
                { try SessionStore.Record.restore($0, $1, forgettingBefore: 0, window: 0) })
            #expect(loaded.rows.map(\.session) == [lost])
            // Expiring idle sessions is fenced the same way: `lost` is b's to keep; the floor
            // only rises.
            do {
                try database.expire([kept, lost], seqFloor: 7)
                Issue.record("a deletion in a partition b owns went through")
            } catch let fenced as FencedWrite {
                #expect(fenced.sessions == [lost])
            }
            let left = try PostgresConnection(url: url).execute("SELECT id FROM navigator_sessions ORDER BY id")
            #expect(try (0..<left.count).map { try left[$0, 0].text() } == [lost])
            #expect(try database.seqFloor() == 7)
            try database.expire([], seqFloor: 3)
            try? database.expire([kept], seqFloor: 3)
            #expect(try database.seqFloor() == 7)
        }
    }
}
