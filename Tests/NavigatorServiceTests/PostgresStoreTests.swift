import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Postgres
import Testing

@testable import NavigatorService

/// navigatord with `--store postgresql://…` against the throwaway server of scripts/postgres.sh:
/// the executable as a user runs it, a database of its own per test.
@Suite("PostgreSQL store", .enabled(if: TestPostgres.enabled))
struct PostgresStoreTests {
    @Test("an acknowledged intent survives kill -9; the password never reaches the log")
    func killNine() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            let first = try Daemon(dataDirectory: directory, extra: ["--store", url])
            defer { first.reap() }
            let endpoints = try await first.endpoints()
            let target = ScreenContext("thread", ["conversationId": "4", "threadId": "2"])
            let reply = try await onThread {
                try Client(endpoints).request(.intent(wireIntent("k1", [target], session: "k")))
            }
            #expect(reply.resolved.batch.seq == 1)
            first.signal(SIGKILL)
            #expect(try await first.exitStatus() != 0)

            let second = try Daemon(dataDirectory: directory, extra: ["--store", url])
            defer { second.reap() }
            let again = try await second.endpoints()
            #expect(second.log.contains("restored 1 sessions from postgresql://navigator:***@127.0.0.1"))
            #expect(second.log.contains("start a new epoch"))
            let snapshot = try await onThread {
                try Client(again).request(.snapshot(.with { $0.session = "k" })).snapshot
            }
            #expect(snapshot.seq == 1)
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

    @Test("after a clean stop the epoch and the seqs continue")
    func cleanStop() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let first = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg1"))
            try await first.start()
            let one = try await onThread {
                try Client(first.endpoints).request(.intent(wireIntent("a", [ScreenContext("settings")], session: "s")))
            }
            await first.stop()

            let second = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg2"))
            try await second.start()
            let snapshot = try await onThread {
                try Client(second.endpoints).request(.snapshot(.with { $0.session = "s" })).snapshot
            }
            #expect(snapshot.epoch == one.resolved.batch.epoch)
            #expect(snapshot.seq == one.resolved.batch.seq)
            await second.stop()
        }
    }

    @Test("a second instance on the same database is refused while the first runs")
    func oneInstance() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let first = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg1"))
            try await first.start()
            var other = configuration
            other.dataDirectory = directory.path + "-other"
            do {
                _ = try NavigatorServer(configuration: other, logger: TestService.logger("pg2"))
                Issue.record("a second instance was let in")
            } catch {
                #expect("\(error)".contains("is in use by another navigatord"))
                #expect(!"\(error)".contains(String(url.split(separator: ":")[2].split(separator: "@")[0])))
            }
            await first.stop()
            // Once the first has stopped, its lock is gone.
            let second = try NavigatorServer(configuration: other, logger: TestService.logger("pg3"))
            try await second.start()
            await second.stop()
        }
    }

    @Test("a database migrated by a newer navigatord is refused and left as it is")
    func newerSchema() async throws {
        try await TestPostgres.withDatabase { url in
            let directory = TestService.temporaryDirectory("navpg")
            defer { try? FileManager.default.removeItem(at: directory) }
            var configuration = TestService.configuration(dataDirectory: directory)
            configuration.store = .postgresql(url: url)
            let server = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg"))
            try await server.start()
            await server.stop()
            let connection = try PostgresConnection(url: url)
            try connection.execute("INSERT INTO navigator_migrations (name) VALUES ('from the future')")
            do {
                _ = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg"))
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
            let first = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg"))
            try await first.start()
            _ = try await onThread {
                try Client(first.endpoints).request(
                    .intent(wireIntent("a", [ScreenContext("settings")], session: "good")))
            }
            await first.stop()
            try PostgresConnection(url: url).execute(
                "INSERT INTO navigator_sessions (id, partition, seq, state) VALUES ('bad', 0, 3, $1)",
                [.bytes([0xFF, 0xFF, 0xFF])])
            let second = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg"))
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
            _ = try NavigatorServer(configuration: configuration, logger: TestService.logger("pg"))
            Issue.record("an unreachable database was accepted")
        } catch {
            #expect("\(error)".contains("cannot connect to postgresql://navigator:***@127.0.0.1:1/navigator"))
            #expect(!"\(error)".contains("hunter2"))
        }
    }
}
