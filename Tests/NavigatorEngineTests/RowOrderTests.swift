import Foundation
import GRDB
import Logging
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import Testing

@testable import NavigatorEngine

/// The state file learns where the rows it writes are, writes them there again in that order,
/// and never over another session's row.
@Suite("Rows in their write order")
struct RowOrderTests {
    private func rows(at path: String) throws -> [(rowID: Int64, id: String, seq: Int64, state: [UInt8])] {
        try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT rowid, id, seq, state FROM sessions ORDER BY id").map {
                ($0[0], $0[1], $0[2], [UInt8]($0[3] as Data))
            }
        }
    }

    private func loaded(_ file: StateFile) throws -> [String: [UInt8]] {
        let loaded = try file.loadAll { _, bytes in bytes }
        return Dictionary(uniqueKeysWithValues: loaded.rows.map { ($0.session, $0.record) })
    }

    @Test("a written row's place is learned, and the row is written there again")
    func placesLearned() throws {
        let directory = temporaryDirectory("navrows")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        var random = SplitMix64(seed: 7)
        let sessions = (0..<600).map { _ in "user-\(random.next())" }
        #expect(sessions.allSatisfy { file.writeOrder(of: $0) == .max })
        var expected: [String: [UInt8]] = [:]
        var places: [String: Int64] = [:]
        for round in 0..<4 {
            // Each round writes about half, new sessions and rewritten ones mixed.
            let chosen = sessions.filter { _ in random.next() % 2 == 0 || round == 0 }
            var written: [StoredRow] = []
            for session in chosen {
                let bytes = (0..<Int(random.next() % 5000)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                written.append((session, UInt64(round), bytes))
                expected[session] = bytes
            }
            try file.write(written)
            let stored = try rows(at: file.path)
            #expect(stored.count == expected.count)
            for row in stored {
                // Known where it is, and never moved.
                #expect(file.writeOrder(of: row.id) == UInt64(row.rowID))
                #expect(places[row.id, default: row.rowID] == row.rowID)
                places[row.id] = row.rowID
                #expect(row.state == expected[row.id])
            }
        }
        #expect(try loaded(file) == expected)
    }

    @Test("a place that is no longer the session's row is not written over; expired and forgotten places go")
    func stalePlaces() throws {
        let directory = temporaryDirectory("navrows")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        try file.write([("a", 1, [1]), ("b", 1, [1]), ("c", 1, [1])])
        let placeOfA = Int64(bitPattern: file.writeOrder(of: "a"))
        // Behind the service's back: a's row goes, and its row id is another session's now.
        try DatabaseQueue(path: file.path).write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE id = 'a'")
            try db.execute(
                sql: "INSERT INTO sessions (rowid, id, seq, state, updated_at) VALUES (?, 'squatter', 2, x'03', 0)",
                arguments: [placeOfA])
        }
        try file.write([("a", 5, [5])])
        var stored = try rows(at: file.path)
        #expect(stored.map(\.id) == ["a", "b", "c", "squatter"])
        #expect(stored[3].rowID == placeOfA && stored[3].seq == 2 && stored[3].state == [3])
        #expect(stored[0].rowID != placeOfA && stored[0].seq == 5)
        #expect(file.writeOrder(of: "a") == UInt64(stored[0].rowID))

        try file.expire(["b"], seqFloor: 1)
        file.forgetPlaces(of: ["c"])
        #expect(file.writeOrder(of: "b") == .max && file.writeOrder(of: "c") == .max)
        try file.write([("c", 6, [6])])  // by id: the same row
        stored = try rows(at: file.path)
        #expect(stored.map(\.id) == ["a", "c", "squatter"])
        #expect(file.writeOrder(of: "c") == UInt64(stored[1].rowID) && stored[1].seq == 6)
        file.releaseMemory()
        #expect(["a", "c"].allSatisfy { file.writeOrder(of: $0) == .max })
        #expect(try loaded(file) == ["a": [5], "c": [6], "squatter": [3]])
    }

    @Test("rounds of the write-behind write every changed session of every shard, in chunks, each at its place")
    func roundsInChunks() throws {
        let directory = temporaryDirectory("navrows")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 3, epoch: 1) { _ in resolver.initialState() }
        let persistence = Persistence(database: file, store: store, logger: Logger(label: "test"))
        let count = 2 * Persistence.chunk + Persistence.chunk / 2
        var places: [String: Int64] = [:]
        var seqs: [String: Int64] = [:]
        for round in 1...3 {
            // The first round creates every session; the others change two in three.
            for index in 0..<count where round == 1 || index % 3 != round % 3 {
                store.update("s\(index)") { record in
                    _ = resolver.apply(.conditions(["authenticated": index % 2 == 0]), to: &record.state, now: 1)
                    record.seq = UInt64(round)
                }
                seqs["s\(index)"] = Int64(round)
            }
            var between = 0
            persistence.flushAndPack { between += 1 }
            #expect(between == (round == 1 ? 2 : 1))
            let stored = try rows(at: file.path)
            #expect(stored.count == count)
            for row in stored {
                #expect(row.seq == seqs[row.id])
                #expect(places[row.id, default: row.rowID] == row.rowID)
                places[row.id] = row.rowID
            }
            #expect(store.shards.allSatisfy { shard in shard.dirty.withLock { $0.isEmpty } })
        }
        #expect(places.count == count)
    }
}
