import Foundation
import GRDB
import Logging
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine

@Suite("Remembered ids in the state file")
struct DedupMigrationTests {
    /// A file as the builds before issue 16 left it: ids as strings in recent_intent_ids, no
    /// dedup key. Made by taking the migration back out of a current file.
    private func oldFile(at directory: URL, session: String, ids: [String: Int64]) throws {
        let resolver = try Resolver(map: .demo)
        var stored = Navigator_V1_StoredSession(resolver.initialState(), seq: 3)
        stored.recentIntentIds = ids
        _ = try StateFile(directory: directory.path)
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("navigator.sqlite").path)
        try queue.write { db in
            try db.execute(
                sql: "INSERT INTO sessions (id, seq, state, updated_at) VALUES (?, 3, ?, 0)",
                arguments: [session, Data(try stored.serializedBytes() as [UInt8])])
            try db.execute(sql: "DELETE FROM meta WHERE key LIKE 'dedup_key_%'")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'recent intent ids hashed'")
        }
    }

    @Test("a file with ids as strings is migrated: a key is made, and a remembered id is still a duplicate")
    func migrates() throws {
        let directory = temporaryDirectory("navdedup")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = WallClock.now()
        try oldFile(
            at: directory, session: "m", ids: ["seen-before": now - 5_000_000_000, "old": now - 3_600_000_000_000])

        let file = try StateFile(directory: directory.path)
        var options = Resolver.Options()
        options.dedupKey = file.dedupKey
        let resolver = try Resolver(map: .demo, options: options)
        let store = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
        let persistence = Persistence(database: file, store: store, logger: Logger(label: "test"))
        let (restored, quarantined) = try persistence.restore()
        #expect(restored == 1 && quarantined.isEmpty)
        // "old", seen an hour ago, is past the dedup window: forgotten as the row loads.
        #expect(store.read("m").state.recentIntentIDs.count == 1)

        func outcome(_ id: String) -> Resolution.Outcome {
            store.update("m") { record in
                resolver.resolve(
                    Intent(id: id, session: "m", target: .path([ScreenContext("chat", ["conversationId": "42"])])),
                    into: &record.state, now: now
                ).outcome
            }
        }
        guard case .ignored = outcome("seen-before") else {
            Issue.record("an id remembered before the migration is not a duplicate after it")
            return
        }
        guard case .resolved = outcome("new-one") else {
            Issue.record("a new id is taken for a duplicate")
            return
        }
        // The key stays with the file: a second open reads the same one.
        #expect(try StateFile(directory: directory.path).dedupKey == file.dedupKey)
    }

    @Test("two state files get different keys")
    func keysDiffer() throws {
        let one = temporaryDirectory("navkey1")
        let two = temporaryDirectory("navkey2")
        defer {
            try? FileManager.default.removeItem(at: one)
            try? FileManager.default.removeItem(at: two)
        }
        #expect(try StateFile(directory: one.path).dedupKey != StateFile(directory: two.path).dedupKey)
    }
}
