import Foundation
import GRDB
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Testing

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

    /// A state file in `directory` whose rollout row (revision 1) does not decode.
    static func unreadableRow(in directory: URL) throws -> StateFile {
        let file = try StateFile(directory: directory.path)
        let readable = StoredRollout(
            phase: .rolledBack, yaml: "", source: "c.yaml", version: "2", baseVersion: "1", baseSource: "",
            share: 100, rollbackMargin: 0, rollbackAfter: 1_000, startedAt: 0, changedAt: 0, note: "")
        #expect(try file.storeRollout(readable, expected: 0) == 1)
        try DatabaseQueue(path: directory.appendingPathComponent("navigator.sqlite").path).write { db in
            try db.execute(sql: "UPDATE rollout SET record = ? WHERE id = 1", arguments: [newerRecord])
        }
        return file
    }

    static func refusal(_ error: any Error, _ kind: RolloutKeeper.Refusal.Kind, _ text: String) -> Bool {
        guard let refusal = error as? RolloutKeeper.Refusal else { return false }
        return refusal.kind == kind && refusal.message.contains(text)
    }

    @Test(
        "rounds that meet an unreadable row count it and say a rollback replaces it; a promote is refused, a rollback replaces the row, and the rounds read again"
    )
    func rounds() throws {
        let directory = temporaryDirectory("navrollrow")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.unreadableRow(in: directory)
        let captured = CapturedLog()
        let failures = AtomicCounter()
        // `shared`: every round reads the row, as with several instances on PostgreSQL.
        let keeper = RolloutKeeper(
            holder: ResolverHolder(try Resolver(map: .demo), source: "embedded"), database: file,
            metrics: RouteMetrics(landingWindow: .seconds(10)), instance: "a", shared: true, logger: captured.logger,
            failures: failures)
        keeper.restore()
        #expect(keeper.following == nil)
        #expect(
            keeper.unreadable?.contains("does not decode") == true && keeper.unreadable?.contains("paused") == true,
            "\(keeper.unreadable ?? "nil")")
        keeper.round()
        keeper.round()
        #expect(failures.load == 2)
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
        let stored = try #require(try file.rollout())
        #expect(stored.phase == .rolledBack && stored.revision == 2)
        #expect(
            stored.note
                == "rolled back by admin on instance a, replacing a stored rollout (revision 1) that could not be read")
        keeper.round()
        #expect(failures.load == 2)
        #expect(captured.lines.withLock { $0.contains { $0.contains("read and written again") } })

        // A revision that is not a number (a hand edit): refused, left to SQL; the rounds count
        // it (GRDB's typed read took the text for revision 0).
        try DatabaseQueue(path: directory.appendingPathComponent("navigator.sqlite").path).write { db in
            try db.execute(sql: "UPDATE rollout SET revision = 'many', record = 'x' WHERE id = 1")
        }
        #expect {
            _ = try keeper.change(.rollback, candidate: nil, by: "admin")
        } throws: { Self.refusal($0, .conflict, "expected the row fixed or deleted with SQL") }
        keeper.round()
        #expect(failures.load == 3)
        #expect(keeper.unreadable?.contains("not what navigatord writes") == true)
    }

    @Test("one instance with an unreadable row: the status says so, a rollback over the requests socket replaces it")
    func overTheRequestsSocket() async throws {
        let directory = temporaryDirectory("navrollreq")
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try Self.unreadableRow(in: directory)
        try await withService(dataDirectory: directory) { _, endpoints in
            try await onThread {
                let client = try Client(endpoints)
                let before = try client.request(.routesRollout(.init())).routesRollout
                #expect(before.phase == Navigator_V1_RolloutPhase.none)
                #expect(
                    before.summary.contains("the stored rollout cannot be read on this instance")
                        && before.summary.hasSuffix("a rollback (navctl routes rollback) replaces it"),
                    "\(before.summary)")
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
