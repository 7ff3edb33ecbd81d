import Foundation
import GRDB
import NavigatorCore
import NavigatorWire

/// The durable copy of every session: an SQLite file (`navigator.sqlite` in the data
/// directory), one row per session with its seq and its state (tree, conditions, parked
/// intents, recent intent ids) as a protobuf `StoredSession` (proto/navigator/v1/state.proto):
/// compact and quick to write, which matters because hot sessions are written many times a
/// second.
///
/// WAL mode with `synchronous = NORMAL`: a committed write survives the process being killed
/// (kill -9) — the requirement here — though not necessarily a power cut.
final class StateFile: Sendable {
    /// 1: JSON rows (early builds); 2: protobuf rows.
    static let schemaVersion = 2
    let path: String
    private let queue: DatabaseQueue

    /// Opens (or creates) the state file. A file that is not a Navigator state database, or is
    /// from a newer version, is refused with the reason; it is never replaced.
    init(directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw ServiceError("cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("navigator.sqlite")
        do {
            var configuration = Configuration()
            configuration.label = "navigator-state"
            configuration.busyMode = .timeout(5)
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
            }
            try queue.write { db in
                let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                guard version <= Self.schemaVersion else {
                    throw ServiceError(
                        "state file \(path) has schema version \(version); this navigatord reads \(Self.schemaVersion) or older"
                    )
                }
                try db.execute(
                    sql: """
                        CREATE TABLE IF NOT EXISTS sessions (
                            id TEXT PRIMARY KEY NOT NULL,
                            seq INTEGER NOT NULL,
                            state BLOB NOT NULL,
                            updated_at INTEGER NOT NULL
                        )
                        """)
                try db.execute(sql: "PRAGMA user_version = \(Self.schemaVersion)")
            }
        } catch let error as ServiceError {
            throw error
        } catch {
            throw ServiceError(
                "state file \(path) cannot be read: \(error); it is left as it is — move it away to start empty, or restore it"
            )
        }
    }

    /// Every stored session, packed as stored (each checked to decode): restored sessions take
    /// little memory until they are used. A row that does not decode is an error naming the
    /// session.
    func loadAll() throws -> [(String, SessionStore.Record)] {
        do {
            return try queue.read { db in
                var records: [(String, SessionStore.Record)] = []
                // The state bytes hold the seq too (the column is for people reading the file);
                // the bytes stay the record's packed form, so they are the one source.
                let rows = try Row.fetchCursor(db, sql: "SELECT id, state FROM sessions")
                while let row = try rows.next() {
                    let id: String = row["id"]
                    let data: Data = row["state"]
                    do {
                        records.append((id, try SessionStore.Record(packed: [UInt8](data))))
                    } catch {
                        throw ServiceError("state file \(path): session \(id) does not decode: \(error)")
                    }
                }
                return records
            }
        } catch let error as ServiceError {
            throw error
        } catch {
            throw ServiceError("state file \(path) cannot be read: \(error); it is left as it is")
        }
    }

    /// Writes these sessions (id, seq, ``SessionStore/Record/stored()`` bytes) in one
    /// transaction.
    func write(_ rows: [(String, UInt64, [UInt8])]) throws {
        guard !rows.isEmpty else { return }
        let now = Int64(Date().timeIntervalSince1970)
        try queue.write { db in
            let statement = try db.cachedStatement(
                sql: "INSERT INTO sessions (id, seq, state, updated_at) VALUES (?, ?, ?, ?) "
                    + "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, state = excluded.state, updated_at = excluded.updated_at"
            )
            for (id, seq, bytes) in rows {
                try statement.execute(arguments: [id, Int64(seq), Data(bytes), now])
            }
        }
    }
}
