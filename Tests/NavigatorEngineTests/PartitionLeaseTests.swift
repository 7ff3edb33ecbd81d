import Foundation
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
            let database = try PostgresStateDatabase(url: url, instance: "a")  // creates the schema
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

    @Test("a lease that runs out is not renewed; another instance takes it at a higher epoch")
    func expiry() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a")
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
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a")
            defer { database.close() }
            let a = PartitionLeases(url: url, instance: "a", partitions: database.partitions, ttl: .milliseconds(300))
            let b = PartitionLeases(url: url, instance: "b", partitions: database.partitions, ttl: .seconds(30))
            defer {
                a.close()
                b.close()
            }
            #expect(try a.claim(atMost: 256).count == 256)
            // What a write of instance a does first, on a connection as navigatord opens it; then
            // a stops (SIGSTOP, a frozen VM) before its next statement.
            let stalled = try PostgresStateDatabase.connect(url, transactionIdleLimit: .milliseconds(800))
            let lockShare = "SELECT partition FROM navigator_leases WHERE owner = 'a' AND partition = ANY($1) FOR SHARE"
            try stalled.execute("BEGIN")
            #expect(try stalled.execute(lockShare, [.int32Array([0, 1, 2, 3])]).count == 4)
            // The same on a connection without the limit: its rows stay locked.
            let unbounded = try PostgresConnection(url: url)
            try unbounded.execute("BEGIN")
            #expect(try unbounded.execute(lockShare, [.int32Array([4, 5])]).count == 2)
            let started = ContinuousClock.now
            var taken: [Int32: UInt64] = [:]
            while taken.count < 254 {
                guard ContinuousClock.now - started < .seconds(30) else {
                    throw TestPostgresError(
                        "b holds \(taken.count) partitions after 30 s; missing \(Set(0..<256).subtracting(taken.keys).sorted())"
                    )
                }
                taken.merge(try b.claim(atMost: 256)) { _, new in new }
                if taken.count < 254 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(Set(taken.keys) == Set(0..<256).subtracting([4, 5]))
            // The server ended the stalled transaction and its connection.
            #expect(throws: PostgresError.self) { try stalled.execute("COMMIT") }
            #expect(!stalled.isOpen)
            // The unbounded one still keeps its two rows from every claim, long after a's lease.
            #expect(try b.claim(atMost: 256).isEmpty)
            try unbounded.execute("COMMIT")
            #expect(Set(try b.claim(atMost: 256).keys) == [4, 5])
        }
    }

    @Test("a write for a partition another instance claimed is fenced; the rest of the batch is written")
    func fencing() async throws {
        try await TestPostgres.withDatabase { url in
            let database = try PostgresStateDatabase(url: url, instance: "a")
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
