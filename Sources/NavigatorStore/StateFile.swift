import Foundation
import GRDB
import Locking
import NavigatorCore
import NavigatorWire

/// The durable copy of every session: an SQLite file (`navigator.sqlite` in the data
/// directory), one row per session with its seq and its state (tree, conditions, parked
/// intents, recent intent ids) as a protobuf `StoredSession` (proto/navigator/v1/state.proto):
/// compact and quick to write, which matters because hot sessions are written many times a
/// second.
///
/// The schema evolves by named migrations (GRDB's `DatabaseMigrator`); a file written by a newer
/// navigatord is refused with what it has. WAL mode with `synchronous = NORMAL`: a committed
/// write survives the process being killed (kill -9) — the requirement here — though not
/// necessarily a power cut.
public final class StateFile: StateDatabase {
    public let path: String
    public var location: String { path }
    public var kind: String { "the state file" }
    /// The open database and the device and inode its file had when opened: a file deleted or
    /// replaced under a running service is noticed by comparing them (``isInPlace``) and opened
    /// anew (``reopen(epoch:)``).
    private let opened: Locked<(queue: DatabaseQueue, identity: FileIdentity?)>
    private var queue: DatabaseQueue { opened.withLock { $0.queue } }

    /// Opens (or creates) the state file and brings its schema up to date. A file that is not a
    /// Navigator state database, or is from a newer version, is refused with the reason; it is
    /// never replaced.
    public init(directory: String) throws {
        try DataDirectoryLock.makeDirectory(directory)
        let path = (directory as NSString).appendingPathComponent("navigator.sqlite")
        self.path = path
        let queue = try Self.open(path)
        guard let key = try queue.read({ try Self.dedupKey($0) }) else {
            throw StoreError(.unreadable, "state file \(path) has no dedup key (meta dedup_key_0 and dedup_key_1)")
        }
        dedupKey = key
        opened = Locked((queue, FileIdentity(path: path)))
    }

    /// The key of the remembered intent ids' hashes (made by the migration "recent intent ids
    /// hashed"); this run's, written into the file again if it is replaced.
    public let dedupKey: DedupKey

    /// The page cache (up to 2 MB, filled by a restart's reads and by writes) and the cached
    /// statements: the next write reads what it needs again.
    public func releaseMemory() {
        queue.releaseMemory()
        places.withLock { $0 = [:] }
    }

    /// Opens the file at `path` (creating it) and migrates it; refuses a file it cannot read.
    private static func open(_ path: String) throws -> DatabaseQueue {
        let queue: DatabaseQueue
        do {
            var configuration = Configuration()
            configuration.label = "navigator-state"
            configuration.busyMode = .timeout(5)
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.writeWithoutTransaction { db in
                // Files of the first builds carried their version in user_version: 1 stored
                // sessions as JSON, 2 as protobuf (what the "sessions" migration adopts as is).
                let legacy = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                switch legacy {
                case 0, 2: break
                case 1:
                    throw StoreError(
                        .unreadable,
                        "state file \(path) has schema version 1 (sessions stored as JSON by the first builds); this navigatord reads version 2 (protobuf) and its named migrations, and does not convert version 1. It is left as it is: move it away to start empty"
                    )
                default:
                    throw StoreError(
                        .unreadable,
                        "state file \(path) has schema version \(legacy); this navigatord reads version 2 and its named migrations. It is left as it is"
                    )
                }
                if try Self.migrator.hasBeenSuperseded(db) {
                    let applied = try Self.migrator.appliedIdentifiers(db).sorted()
                    let known = Set(Self.migrator.migrations)
                    throw StoreError(
                        .unreadable,
                        "state file \(path) was written by a newer navigatord (migrations \(applied.filter { !known.contains($0) }.joined(separator: ", ")) are unknown here); it is left as it is"
                    )
                }
            }
            // Only once the file is known to be ours and of a schema this build reads.
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
            }
            try Self.migrator.migrate(queue)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(
                .unreadable,
                "state file \(path) cannot be read: \(error); it is left as it is — move it away to start empty, or restore it"
            )
        }
        return queue
    }

    /// One named migration per change of the schema, never edited once released.
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("sessions") { db in
            // IF NOT EXISTS: files of the first builds have this table already.
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS sessions (
                        id TEXT PRIMARY KEY NOT NULL,
                        seq INTEGER NOT NULL,
                        state BLOB NOT NULL,
                        updated_at INTEGER NOT NULL
                    )
                    """)
        }
        migrator.registerMigration("quarantine and meta") { db in
            try db.execute(
                sql: """
                    CREATE TABLE quarantine (
                        id TEXT NOT NULL,
                        seq INTEGER,
                        state BLOB,
                        reason TEXT NOT NULL,
                        quarantined_at INTEGER NOT NULL
                    );
                    CREATE TABLE meta (
                        key TEXT PRIMARY KEY NOT NULL,
                        value INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("recent intent ids hashed") { db in
            // The file's dedup key, and every session's remembered ids from strings
            // (recent_intent_ids) to 8-byte keyed hashes (recent_ids). A row that does not
            // decode is left as it is (loading quarantines it).
            let key = try dedupKey(db) ?? DedupKey.random()
            try setMeta(db, "dedup_key_0", Int64(bitPattern: key.k0))
            try setMeta(db, "dedup_key_1", Int64(bitPattern: key.k1))
            let update = try db.makeStatement(sql: "UPDATE sessions SET state = ? WHERE id = ?")
            let rows = try Row.fetchCursor(db, sql: "SELECT id, state FROM sessions")
            while let row = try rows.next() {
                let id: String = row["id"]
                let bytes: [UInt8] = [UInt8](row["state"] as Data)
                guard var stored = try? Navigator_V1_StoredSession(serializedBytes: bytes),
                    !stored.recentIntentIds.isEmpty
                else { continue }
                var recent = RecentIntentIDs()
                for (intentID, at) in stored.recentIntentIds.sorted(by: { $0.value < $1.value }) {
                    recent.insert(
                        key.intentIDHash(intentID), now: at, window: RecentIntentIDs.longestWindow, capacity: .max)
                }
                stored.recentIntentIds = [:]
                stored.recentIds = recent.entries
                stored.recentIdsBaseUnixNanos = recent.base
                try update.execute(arguments: [Data(try stored.serializedBytes() as [UInt8]), id])
            }
        }
        migrator.registerMigration("route map rollout") { db in
            // One row: the rollout as StoredRollout's JSON, and its revision.
            try db.execute(
                sql: """
                    CREATE TABLE rollout (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        revision INTEGER NOT NULL,
                        record TEXT NOT NULL
                    )
                    """)
        }
        return migrator
    }()

    /// Every stored session, as `decode` makes it from its bytes: restored sessions can stay
    /// packed, taking little memory until they are used. A row that does not load is moved to the
    /// `quarantine` table with the reason, and the rest load.
    public func loadAll<Record>(_ decode: (_ session: String, _ bytes: [UInt8]) throws -> Record) throws
        -> LoadedRows<Record>
    {
        do {
            return try queue.write { db in
                var loaded = LoadedRows<Record>()
                // The state bytes hold the seq too (the column is for people reading the file).
                let rows = try Row.fetchCursor(db, sql: "SELECT id, state FROM sessions")
                while let row = try rows.next() {
                    let id: String? = row["id"]
                    let data: Data? = row["state"]
                    let reason: String
                    if let id, let data {
                        do {
                            loaded.rows.append((id, try decode(id, [UInt8](data))))
                            continue
                        } catch {
                            reason = "\(error)"
                        }
                    } else {
                        reason = "the row has no id or no state"
                    }
                    loaded.quarantined.append((id ?? "", reason))
                }
                let now = Int64(Date().timeIntervalSince1970)
                for (id, reason) in loaded.quarantined {
                    try db.execute(
                        sql: """
                            INSERT INTO quarantine (id, seq, state, reason, quarantined_at)
                                SELECT id, seq, state, ?, ? FROM sessions WHERE id IS ?
                            """, arguments: [reason, now, id.isEmpty ? nil : id])
                    try db.execute(sql: "DELETE FROM sessions WHERE id IS ?", arguments: [id.isEmpty ? nil : id])
                }
                return loaded
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.unreadable, "state file \(path) cannot be read: \(error); it is left as it is")
        }
    }

    /// How many sessions the quarantine table holds.
    public func quarantinedCount() throws -> Int {
        try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM quarantine") ?? 0 }
    }

    /// Writes these sessions (id, seq, stored bytes) in one transaction. A row whose place in
    /// the file is known (``places``) is changed there, found by its row id rather than through
    /// the id index, and those rows go in the order of their places — the write-behind's chunks,
    /// sorted the same way (``writeOrder(of:)``), change rows that are neighbours, and a page of
    /// the table is written once for several of them instead of once for each (BENCHMARKS.md,
    /// "The write-behind"). Other rows (new sessions, appended; sessions not written
    /// since their place was forgotten) are written by id, and their places learned.
    public func write(_ rows: [StoredRow]) throws {
        guard !rows.isEmpty else { return }
        let now = Int64(Date().timeIntervalSince1970)
        let ordered = places.withLock { places in rows.map { (place: places[$0.session], row: $0) } }
            .sorted { ($0.place ?? .max) < ($1.place ?? .max) }
        var learned: [(String, Int64)] = []
        try queue.write { db in
            let inPlace = try db.cachedStatement(
                sql: "UPDATE sessions SET seq = ?, state = ?, updated_at = ? WHERE rowid = ? AND id = ?")
            let byID = try db.cachedStatement(
                sql: "INSERT INTO sessions (id, seq, state, updated_at) VALUES (?, ?, ?, ?) "
                    + "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, state = excluded.state, updated_at = excluded.updated_at"
            )
            let placeOf = try db.cachedStatement(sql: "SELECT rowid FROM sessions WHERE id = ?")
            // The write-behind's rounds run beside the workers: a worker waiting for a core gets
            // this one within half a millisecond (``GiveWay``), not at the end of the kernel's
            // time slice.
            var giveWay = GiveWay(every: GiveWay.halfAMillisecond)
            for (place, (id, seq, bytes)) in ordered {
                giveWay.step()
                let data = Data(bytes)
                if let place {
                    try inPlace.execute(arguments: [Int64(seq), data, now, place, id])
                    if db.changesCount == 1 { continue }
                    // Not there (deleted, or the file replaced): by id, as a row not seen yet.
                }
                let lastInserted = db.lastInsertedRowID
                try byID.execute(arguments: [id, Int64(seq), data, now])
                if db.lastInsertedRowID != lastInserted {
                    learned.append((id, db.lastInsertedRowID))  // a new session's row, appended
                } else if let place = try Int64.fetchOne(placeOf, arguments: [id]) {
                    learned.append((id, place))  // a row written before this run (or before it was packed)
                }
            }
        }
        // Only once committed: a rolled-back insert's row id is not the session's.
        if !learned.isEmpty { places.withLock { places in for (id, place) in learned { places[id] = place } } }
    }

    /// Where the rows of sessions written since the service last came to rest are (their row
    /// ids): learned as they are written, forgotten for sessions expired or packed
    /// (``forgetPlaces(of:)``) and when the service comes to rest (``releaseMemory()``), so that
    /// what it holds is in proportion to the sessions in use. A place is only a hint: a write
    /// there checks the id, and goes by id when it is not that session's row.
    private let places = Locked<[String: Int64]>([:])

    public func writeOrder(of session: String) -> UInt64 {
        places.withLock { $0[session].map { UInt64(bitPattern: $0) } } ?? .max
    }

    public func forgetPlaces(of sessions: some Sequence<String>) {
        places.withLock { places in for session in sessions { places[session] = nil } }
    }

    // MARK: Epochs

    /// Starts a run of the service: the epoch its sessions' streams continue in. After a clean
    /// stop (``markCleanStop()``, written only once every session was flushed) the epoch stays:
    /// every seq continues. Otherwise — a crash, kill -9, a file copied while in use — some
    /// changes may be lost and seqs may repeat, so a new random epoch starts. Either way the
    /// clean-stop mark is consumed, so a crash of this run is noticed by the next.
    public func beginRun() throws -> (epoch: UInt64, continued: Bool) {
        try queue.write { db in
            let stored = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'epoch'")
            let clean = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'clean_stop'") == 1
            var epoch = stored.map { UInt64(bitPattern: $0) } ?? 0
            let continued = clean && epoch != 0
            if !continued {
                epoch = UInt64.random(in: 1...UInt64.max)
                try Self.setMeta(db, "epoch", Int64(bitPattern: epoch))
            }
            try Self.setMeta(db, "clean_stop", 0)
            return (epoch, continued)
        }
    }

    /// Deletes expired sessions and records the seq new sessions start from, in one transaction.
    public func expire(_ sessions: [String], seqFloor: UInt64) throws {
        try queue.write { db in
            let statement = try db.cachedStatement(sql: "DELETE FROM sessions WHERE id = ?")
            for session in sessions { try statement.execute(arguments: [session]) }
            try Self.setMeta(db, "seq_floor", Int64(bitPattern: seqFloor))
        }
        forgetPlaces(of: sessions)
    }

    /// The seq new sessions start from (0 until sessions have expired).
    public func seqFloor() throws -> UInt64 {
        try queue.read { db in
            (try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'seq_floor'")).map {
                UInt64(bitPattern: $0)
            } ?? 0
        }
    }

    private static func dedupKey(_ db: Database) throws -> DedupKey? {
        let k0 = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'dedup_key_0'")
        let k1 = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'dedup_key_1'")
        guard let k0, let k1 else { return nil }
        return DedupKey(k0: UInt64(bitPattern: k0), k1: UInt64(bitPattern: k1))
    }

    public func rollout() throws -> StoredRollout? {
        try queue.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT revision, record FROM rollout WHERE id = 1") else {
                return nil
            }
            // Read as database values first: GRDB's typed subscript traps on a value it cannot
            // convert (text in the revision, a blob of invalid UTF-8 as the record).
            let revision: DatabaseValue = row["revision"]
            let record: DatabaseValue = row["record"]
            guard let revision = Int64.fromDatabaseValue(revision), let record = String.fromDatabaseValue(record) else {
                throw StoreError(
                    .unreadable,
                    "\(path): the route map rollout's row holds a revision (\(revision)) or record that is not what navigatord writes; expected a number and JSON text"
                )
            }
            return try StoredRollout.decoded(record, revision: revision, location: path)
        }
    }

    public func rolloutRevision() throws -> Int64 {
        try queue.read { db in try revision(db) }
    }

    /// The rollout row's revision (0 without a row), read as a database value first: GRDB's typed
    /// read takes SQLite's conversion, which reads text such as `many` as revision 0.
    private func revision(_ db: Database) throws -> Int64 {
        guard let value = try DatabaseValue.fetchOne(db, sql: "SELECT revision FROM rollout WHERE id = 1") else {
            return 0
        }
        guard let revision = Int64.fromDatabaseValue(value) else {
            throw StoreError(
                .unreadable,
                "\(path): the route map rollout's row holds a revision (\(value)) that is not what navigatord writes; expected a number"
            )
        }
        return revision
    }

    public func storeRollout(_ rollout: StoredRollout, expected: Int64) throws -> Int64? {
        let record = try rollout.encoded()
        return try queue.write { db in
            let stored = try revision(db)
            guard stored == expected else { return nil }
            guard expected < Int64.max else {
                throw StoreError(
                    .unreadable, "\(path): the route map rollout's revision is \(expected); expected below 2^63 - 1")
            }
            try db.execute(
                sql: """
                    INSERT INTO rollout (id, revision, record) VALUES (1, ?, ?)
                        ON CONFLICT(id) DO UPDATE SET revision = excluded.revision, record = excluded.record
                    """, arguments: [expected + 1, record])
            return expected + 1
        }
    }

    /// Records that every session was written: the next run continues this run's epoch.
    public func markCleanStop() throws {
        try queue.write { db in
            try Self.setMeta(db, "clean_stop", 1)
        }
    }

    /// Sets one value of the `meta` table (epoch, clean_stop, seq_floor).
    private static func setMeta(_ db: Database, _ key: String, _ value: Int64) throws {
        try db.execute(
            sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            arguments: [key, value])
    }

    // MARK: The file itself

    /// Whether the file at ``path`` is still the one opened (not deleted, not replaced).
    public var isInPlace: Bool {
        let identity = opened.withLock { $0.identity }
        return identity == nil || FileIdentity(path: path) == identity
    }

    /// Opens the file at ``path`` anew (the one opened was deleted or replaced), recording this
    /// run's epoch and dedup key in it; the caller writes every session into it.
    public func reopen(epoch: UInt64) throws {
        // A replaced file is read as any file is (and refused if unreadable); a deleted one is
        // created again.
        let queue = try Self.open(path)
        try queue.write { db in
            try Self.setMeta(db, "epoch", Int64(bitPattern: epoch))
            try Self.setMeta(db, "clean_stop", 0)
            // The sessions written into it are hashed with this run's key.
            try Self.setMeta(db, "dedup_key_0", Int64(bitPattern: dedupKey.k0))
            try Self.setMeta(db, "dedup_key_1", Int64(bitPattern: dedupKey.k1))
        }
        opened.withLock { $0 = (queue, FileIdentity(path: path)) }
        places.withLock { $0 = [:] }
    }

    /// GRDB closes the file when the queue goes.
    public func close() {}
}

/// A file's device and inode.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
