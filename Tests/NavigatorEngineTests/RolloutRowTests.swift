import Foundation
import GRDB
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Postgres
import Testing
import ZeroMQ

@testable import NavigatorEngine

/// A stored rollout row this build cannot read — written by a newer navigatord (a phase it does
/// not know), or by hand: the service goes on with the file's map, says so, and a rollback
/// replaces the row (until then every change was refused UNAVAILABLE, "retry once it is
/// reachable", and only SQL could clear it).
@Suite("The stored rollout row")
struct RolloutRowTests {
    /// A row as a newer navigatord might write it: a phase this build does not know.
    static let newerRecord =
        #"{"baseSource":"","baseVersion":"1","changedAt":0,"note":"","phase":"paused","revision":0,"rollbackAfter":1000,"rollbackMargin":0,"share":100,"source":"c.yaml","startedAt":0,"version":"2","yaml":""}"#

    /// The row before it is made unreadable (revision 1).
    static let readable = StoredRollout(
        phase: .rolledBack, yaml: "", source: "c.yaml", version: "2", baseVersion: "1", baseSource: "", share: 100,
        rollbackMargin: 0, rollbackAfter: 1_000, startedAt: 0, changedAt: 0, note: "")

    /// A state file in `directory` whose rollout row (revision 1) does not decode.
    static func unreadableRow(in directory: URL) throws -> StateFile {
        let file = try StateFile(directory: directory.path)
        #expect(try file.storeRollout(Self.readable, expected: 0) == 1)
        try corrupt(directory.appendingPathComponent("navigator.sqlite").path)
        return file
    }

    static func refusal(_ error: any Error, _ kind: RolloutKeeper.Refusal.Kind, _ text: String) -> Bool {
        guard let refusal = error as? RolloutKeeper.Refusal else { return false }
        return refusal.kind == kind && refusal.message.contains(text)
    }

    /// What the keeper does over `database`, whose row (revision 1) `corrupt` has just made
    /// unreadable: rounds that say so, a promote and a start refused, a rollback that replaces
    /// the row, rounds that read again. `shared`: every round reads the row, as with several
    /// instances on PostgreSQL.
    static func replaced(in database: any StateDatabase, corrupt: () throws -> Void) throws -> (
        keeper: RolloutKeeper, failures: AtomicCounter
    ) {
        #expect(try database.storeRollout(Self.readable, expected: 0) == 1)
        try corrupt()
        let captured = CapturedLog()
        let failures = AtomicCounter()
        let keeper = try Self.keeper(database, shared: true, log: captured, failures: failures)
        keeper.restore()
        #expect(keeper.following == nil)
        #expect(
            keeper.unreadable?.contains("does not decode") == true && keeper.unreadable?.contains("paused") == true,
            "\(keeper.unreadable ?? "nil")")
        keeper.round()
        keeper.round()
        #expect(failures.load == 3)  // the start's read, then each round
        let said = captured.lines.withLock { $0 }
        #expect(said.count == 2, "\(said)")  // the start's line, then the rounds' once (a line a minute)
        #expect(said.allSatisfy { $0.contains("a rollback (navctl routes rollback) replaces it") }, "\(said)")

        #expect {
            _ = try keeper.change(.promote, candidate: nil, by: "admin")
        } throws: { Self.refusal($0, .conflict, "cannot be read on this instance") }
        #expect {
            _ = try keeper.change(
                .start(yaml: "", source: "c", share: 100, rollbackMargin: 0, rollbackAfter: 1_000), candidate: nil,
                by: "admin")
        } throws: { Self.refusal($0, .conflict, "expected it replaced first: a rollback") }
        let replaced = try keeper.change(.rollback, candidate: nil, by: "admin")
        #expect(replaced.phase == .rolledBack && replaced.revision == 2)
        #expect(keeper.unreadable == nil)
        #expect(keeper.following?.stored.revision == 2)
        let stored = try #require(try database.rollout())
        #expect(stored.phase == .rolledBack && stored.revision == 2)
        #expect(
            stored.note
                == "rolled back by admin on instance a, replacing a stored rollout (revision 1) that could not be read")
        keeper.round()
        #expect(failures.load == 3)
        #expect(captured.lines.withLock { $0.contains { $0.contains("read and written again") } })
        return (keeper, failures)
    }

    @Test(
        "the state file: rounds that meet an unreadable row count it and say a rollback replaces it; a promote is refused, a rollback replaces the row, and the rounds read again"
    )
    func stateFile() throws {
        let directory = temporaryDirectory("navrollrow")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        let path = directory.appendingPathComponent("navigator.sqlite").path
        let (keeper, failures) = try Self.replaced(in: file) { try Self.corrupt(path) }
        // Another instance sharing the row follows the replacement at its next round.
        let other = try Self.keeper(file, shared: true)
        other.round()
        #expect(other.following?.stored.revision == 2 && other.following?.stored.phase == .rolledBack)
        #expect(other.unreadable == nil)

        // A revision that is not a number (a hand edit): refused, left to SQL.
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE rollout SET revision = 'many', record = 'x' WHERE id = 1")
        }
        #expect {
            _ = try keeper.change(.rollback, candidate: nil, by: "admin")
        } throws: { Self.refusal($0, .conflict, "expected the row fixed or deleted with SQL") }
        keeper.round()
        #expect(failures.load == 4)
        #expect(keeper.unreadable?.contains("not what navigatord writes") == true)
        // An instance that follows nothing reads the revision first: GRDB's typed read took the
        // text for revision 0, equal to its own, and the round passed as if nothing were there.
        let fresh = try Self.keeper(file, shared: true)
        fresh.round()
        #expect(
            fresh.unreadable?.contains(#"holds a revision ("many") that is not"#) == true,
            "\(fresh.unreadable ?? "nil")")
    }

    static func corrupt(_ path: String) throws {
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE rollout SET record = ? WHERE id = 1", arguments: [Self.newerRecord])
        }
    }

    static func keeper(
        _ database: any StateDatabase, shared: Bool, log: CapturedLog = CapturedLog(), failures: AtomicCounter? = nil
    ) throws -> RolloutKeeper {
        RolloutKeeper(
            holder: ResolverHolder(try Resolver(map: .demo), source: "embedded"), database: database,
            metrics: RouteMetrics(landingWindow: .seconds(10)), instance: "a", shared: shared, logger: log.logger,
            failures: failures)
    }

    @Test(
        "what the replacement keeps: a rolling rollout it followed, rolled back; a promoted one, still promoted; after a reload whose end could not be written, none"
    )
    func whatItKeeps() throws {
        for phase in [StoredRollout.Phase.rolling, .promoted, .ended] {
            let directory = temporaryDirectory("navrollkeep")
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = try StateFile(directory: directory.path)
            var row = Self.readable
            row.phase = phase == .ended ? .rolling : phase
            row.yaml = "not a route map"  // its candidate does not load: followed all the same
            #expect(try file.storeRollout(row, expected: 0) == 1)
            let failures = AtomicCounter()
            let keeper = try Self.keeper(file, shared: false, failures: failures)
            keeper.restore()
            #expect(keeper.following?.stored.phase == row.phase)
            try Self.corrupt(directory.appendingPathComponent("navigator.sqlite").path)
            if phase == .ended {
                // A reload ends the rollout; the row it would end cannot be read: left for a
                // rollback, not retried for ever (which refused the rollback UNAVAILABLE).
                let changed = ResolverHolder.Loaded(
                    resolver: try Resolver(map: .demo), source: "new.yaml", version: "3")
                #expect(keeper.reload(changed, note: "reloaded")?.ended.phase == .ended)
                #expect(failures.load == 1)
                #expect(keeper.unreadable?.contains("paused") == true)
            }
            let replaced = try keeper.change(.rollback, candidate: nil, by: "admin")
            #expect(replaced.revision == 2)
            switch phase {
            case .rolling:
                #expect(replaced.phase == .rolledBack && replaced.version == "2" && replaced.source == "c.yaml")
                #expect(replaced.note.hasPrefix("rolled back by admin on instance a, replacing"))
            case .promoted:
                #expect(replaced.phase == .promoted && replaced.version == "2")
                #expect(replaced.note.hasPrefix("kept promoted by admin on instance a"), "\(replaced.note)")
            default:
                #expect(replaced.phase == .rolledBack && replaced.version.isEmpty)
            }
            #expect(try file.rollout() == replaced)
            #expect(keeper.unreadable == nil)
        }
    }

    @Test("one instance with an unreadable row: the status says so, a rollback over the requests socket replaces it")
    func overTheRequestsSocket() async throws {
        let directory = temporaryDirectory("navrollreq")
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Self.unreadableRow(in: directory)
        let candidate = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("deploy/routes.example.yaml"), encoding: .utf8)
        try await withService(dataDirectory: directory) { _, endpoints in
            try await onThread {
                let client = try Client(endpoints)
                let before = try client.request(.routesRollout(.init())).routesRollout
                #expect(before.phase == Navigator_V1_RolloutPhase.none)
                #expect(
                    before.summary.contains("the stored rollout cannot be read on this instance")
                        && before.summary.hasSuffix("a rollback (navctl routes rollback) replaces it"),
                    "\(before.summary)")
                // A candidate that loads and differs from the map in use (the embedded one):
                // refused only for the row.
                let start = try client.request(
                    .routesRollout(
                        .with {
                            $0.action = .start
                            $0.sharePercent = 10
                            $0.yaml = candidate
                        }))
                #expect(start.rejected.code == .conflict, "\(start)")
                #expect(start.rejected.message.contains("expected it replaced first"), "\(start)")
                let promote = try client.request(.routesRollout(.with { $0.action = .promote }))
                #expect(promote.rejected.code == .conflict, "\(promote)")
                #expect(promote.rejected.message.contains("expected it replaced first"), "\(promote)")
                let back = try client.request(.routesRollout(.with { $0.action = .rollback })).routesRollout
                #expect(back.phase == .rolledBack && back.revision == 2, "\(back)")
                #expect(back.note.contains("replacing a stored rollout (revision 1) that could not be read"))
                #expect(!back.summary.contains("cannot be read on this instance"), "\(back.summary)")
                let again = try client.request(.routesRollout(.with { $0.action = .rollback }))
                #expect(again.rejected.code == .conflict, "\(again)")  // nothing under way now
            }
        }
        #expect(try StateFile(directory: directory.path).rollout()?.phase == .rolledBack)
    }
}

/// The same over PostgreSQL, where several instances share the row (its revision is a number by
/// the column's type: only the record can be unreadable).
@Suite("The stored rollout row, PostgreSQL", .enabled(if: TestPostgres.enabled))
struct PostgresRolloutRowTests {
    @Test("an unreadable row in navigator_rollout: the same rounds, refusals and replacement")
    func postgres() async throws {
        try await TestPostgres.withDatabase { url in
            // libpq blocks: on a thread of its own.
            try await DedicatedThread.run(name: "test-rollout-row") {
                let database = try PostgresStateDatabase(url: url, instance: "a", transactionIdleLimit: .seconds(30))
                defer { database.close() }
                _ = try RolloutRowTests.replaced(in: database) {
                    _ = try PostgresConnection(url: url, applicationName: "navigator-tests").execute(
                        "UPDATE navigator_rollout SET record = $1 WHERE id = 1", [.text(RolloutRowTests.newerRecord)])
                }
            }
        }
    }
}
