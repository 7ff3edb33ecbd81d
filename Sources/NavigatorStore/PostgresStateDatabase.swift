import Locking
import NavigatorCore
import Postgres

/// The sessions in a PostgreSQL database (`store: postgresql://…`): the same rows as the state
/// file (id, seq, `StoredSession` bytes) in `navigator_sessions`, each with its partition (a
/// stable hash of the id, one of `partitions`, kept in the database), plus quarantine and meta
/// tables. navigatord creates and migrates the schema itself (named migrations in
/// `navigator_migrations`, applied under an advisory lock so instances starting together take
/// turns) and refuses a database migrated by a newer navigatord.
///
/// Several instances share it: each serves the sessions of the partitions it holds by lease
/// (``PartitionLeases``, ``LeaseKeeper``), and its writes are fenced by the lease epochs
/// (``write(_:)``).
public final class PostgresStateDatabase: StateDatabase {
    public let location: String
    public var kind: String { "the PostgreSQL database" }
    public let dedupKey: DedupKey
    /// Partitions of the session space, fixed when the database was created.
    public let partitions: Int
    private let url: String
    /// The partitions this instance holds, whose epochs fence its writes.
    public let ownership: PartitionOwnership
    /// The connection the flush thread and the lifecycle use in turn; nil after it was lost
    /// (the next call connects again and takes the instance lock again).
    private let connection: Locked<PostgresConnection?>

    /// The advisory lock migrations run under.
    static let migrationLock: Int64 = 0x6E61_7669_6D69_6772  // "navimigr"
    /// Partitions of a new database.
    static let defaultPartitions = 256
    /// The most partitions a database may say it has: a partition is an Int32 in its tables.
    static let maxPartitions: Int64 = 65_536

    /// How long a transaction of this instance may wait for its next statement before the
    /// server ends it and the connection (``PostgresConnection/transaction(idleLimit:_:)``).
    public let transactionIdleLimit: Duration

    /// Connects, migrates the schema, takes the instance lock and reads the dedup key and the
    /// partition count. A server that cannot be reached, a database migrated by a newer
    /// navigatord or one another instance holds is refused with the reason.
    ///
    /// `transactionIdleLimit` bounds how long a transaction of this instance can hold its locks
    /// while the instance does nothing (paused, stalled, its host frozen): a write holds its
    /// partitions' lease rows FOR SHARE, and claims skip locked rows, so without a bound a
    /// paused instance in the middle of a write would keep its partitions from everyone for as
    /// long as it stays paused. Less than the lease time, so the locks go before the lease does.
    public init(url: String, instance: String, transactionIdleLimit: Duration) throws {
        self.url = url
        self.transactionIdleLimit = transactionIdleLimit
        location = Self.redact(url)
        let connection = try Self.connect(url)
        try Self.migrate(connection, location: location, idleLimit: transactionIdleLimit)
        let meta = try Self.meta(connection)
        guard let k0 = meta["dedup_key_0"], let k1 = meta["dedup_key_1"], let partitions = meta["partitions"],
            partitions > 0
        else {
            throw StoreError(
                .unreadable,
                "PostgreSQL database \(location) has no dedup key or partition count in navigator_meta; expected the rows its first migration wrote"
            )
        }
        guard partitions <= Self.maxPartitions else {
            throw StoreError(
                .unreadable,
                "PostgreSQL database \(location) has \(partitions) partitions in navigator_meta; expected 1 to \(Self.maxPartitions) (its first migration writes \(Self.defaultPartitions); the count is not a setting)"
            )
        }
        dedupKey = DedupKey(k0: UInt64(bitPattern: k0), k1: UInt64(bitPattern: k1))
        self.partitions = Int(partitions)
        self.connection = Locked(connection)
        ownership = PartitionOwnership(instance: instance, partitions: Int(partitions))
    }

    public static func redact(_ url: String) -> String { PostgresConnection.redact(url) }

    private static func connect(_ url: String) throws -> PostgresConnection {
        do {
            return try PostgresConnection(url: url, applicationName: "navigatord")
        } catch {
            throw StoreError(.unavailable, "\(error.message); check the store URL (store, NAVIGATOR_STORE, --store)")
        }
    }

    /// Runs `body` on the connection, connecting again if the last one was lost. A lost connection is dropped, so the next call starts afresh.
    private func using<R>(_ body: (PostgresConnection) throws -> R) throws -> R {
        try connection.withLock { current in
            let connection: PostgresConnection
            if let current, current.isOpen {
                connection = current
            } else {
                current = nil
                connection = try Self.connect(url)
                current = connection
            }
            do {
                return try body(connection)
            } catch let error as PostgresError {
                if error.connectionLost || !connection.isOpen { current = nil }
                throw StoreError(.unavailable, "PostgreSQL database \(location): \(error)")
            }
        }
    }

    // MARK: Schema

    /// One named migration per change of the schema, never edited once released.
    public static let migrations: [(name: String, apply: @Sendable (PostgresConnection) throws -> Void)] = [
        (
            "sessions",
            { connection in
                try connection.execute(
                    """
                    CREATE TABLE navigator_sessions (
                        id text PRIMARY KEY,
                        partition integer NOT NULL,
                        seq bigint NOT NULL,
                        state bytea NOT NULL,
                        updated_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                try connection.execute("CREATE INDEX navigator_sessions_partition ON navigator_sessions (partition)")
                try connection.execute(
                    """
                    CREATE TABLE navigator_quarantine (
                        id text,
                        seq bigint,
                        state bytea,
                        reason text NOT NULL,
                        quarantined_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                try connection.execute("CREATE TABLE navigator_meta (key text PRIMARY KEY, value bigint NOT NULL)")
                // The dedup key (random, made once, as the state file's) and the partitions.
                let key = DedupKey.random()
                try setMeta(connection, "dedup_key_0", Int64(bitPattern: key.k0))
                try setMeta(connection, "dedup_key_1", Int64(bitPattern: key.k1))
                try setMeta(connection, "partitions", Int64(defaultPartitions))
            }
        ),
        (
            "partition leases",
            { connection in
                // The instances that run (each renews its row) and where peers and shells reach
                // them; a lease per partition: its owner, its epoch (raised by every claim: the
                // fencing token, and the stream epoch of the partition's sessions), its expiry.
                try connection.execute(
                    """
                    CREATE TABLE navigator_instances (
                        id text PRIMARY KEY,
                        token bigint NOT NULL,
                        cluster_endpoint text NOT NULL,
                        request_endpoints text NOT NULL,
                        command_endpoints text NOT NULL,
                        started_at timestamptz NOT NULL DEFAULT now(),
                        expires_at timestamptz NOT NULL
                    )
                    """)
                try connection.execute(
                    """
                    CREATE TABLE navigator_leases (
                        partition integer PRIMARY KEY,
                        owner text,
                        epoch bigint NOT NULL,
                        expires_at timestamptz NOT NULL
                    )
                    """)
                try connection.execute(
                    """
                    INSERT INTO navigator_leases (partition, owner, epoch, expires_at)
                        SELECT p, NULL, 0, now() FROM generate_series(0, (SELECT value FROM navigator_meta WHERE key = 'partitions') - 1) AS p
                    """)
            }
        ),
        (
            "route map rollout",
            { connection in
                // One row, shared by the instances: the rollout as StoredRollout's JSON, and its
                // revision (each change raises it; instances follow it).
                try connection.execute(
                    """
                    CREATE TABLE navigator_rollout (
                        id integer PRIMARY KEY CHECK (id = 1),
                        revision bigint NOT NULL,
                        record text NOT NULL,
                        changed_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
            }
        ),
    ]

    private static func migrate(_ connection: PostgresConnection, location: String, idleLimit: Duration) throws {
        do {
            try connection.transaction(idleLimit: idleLimit) {
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(migrationLock)])
                try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS navigator_migrations (
                        name text PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                let rows = try connection.execute("SELECT name FROM navigator_migrations")
                let applied = try Set((0..<rows.count).map { try rows[$0, 0].text() })
                let known = Set(migrations.map(\.name))
                let unknown = applied.subtracting(known).sorted()
                guard unknown.isEmpty else {
                    throw StoreError(
                        .unreadable,
                        "PostgreSQL database \(location) was migrated by a newer navigatord (migrations \(unknown.joined(separator: ", ")) are unknown here); it is left as it is"
                    )
                }
                for migration in migrations where !applied.contains(migration.name) {
                    try migration.apply(connection)
                    try connection.execute(
                        "INSERT INTO navigator_migrations (name) VALUES ($1)", [.text(migration.name)])
                }
            }
        } catch let error as PostgresError {
            throw StoreError(.unavailable, "PostgreSQL database \(location): migrating the schema failed: \(error)")
        }
    }

    private static func meta(_ connection: PostgresConnection) throws -> [String: Int64] {
        let rows = try connection.execute("SELECT key, value FROM navigator_meta")
        var meta: [String: Int64] = [:]
        for row in 0..<rows.count { meta[try rows[row, 0].text()] = try rows[row, 1].int64() }
        return meta
    }

    private static func setMeta(_ connection: PostgresConnection, _ key: String, _ value: Int64) throws {
        try connection.execute(
            """
            INSERT INTO navigator_meta (key, value) VALUES ($1, $2)
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
            """, [.text(key), .int64(value)])
    }

    /// The partition of a session: FNV-1a of its id's UTF-8 bytes, modulo the partition count
    /// (stable across runs and instances).
    public func partition(of session: String) -> Int32 {
        Int32(StableHash.bucket(of: session, count: partitions))
    }

    // MARK: StateDatabase

    public func beginRun() throws -> (epoch: UInt64, continued: Bool) {
        try using { connection in
            try connection.transaction(idleLimit: transactionIdleLimit) {
                let meta = try Self.meta(connection)
                var epoch = meta["epoch"].map { UInt64(bitPattern: $0) } ?? 0
                let continued = meta["clean_stop"] == 1 && epoch != 0
                if !continued {
                    epoch = UInt64.random(in: 1...UInt64.max)
                    try Self.setMeta(connection, "epoch", Int64(bitPattern: epoch))
                }
                try Self.setMeta(connection, "clean_stop", 0)
                return (epoch, continued)
            }
        }
    }

    /// Rows read per query while loading (keyset pages, so memory holds one page of results).
    static let loadPage = 5_000

    public func loadAll<Record>(_ decode: (_ session: String, _ bytes: [UInt8]) throws -> Record) throws
        -> LoadedRows<Record>
    {
        try load(where: "true", [], decode)
    }

    /// The sessions matching `condition` (parameters from `$3`), in keyset pages.
    private func load<Record>(
        where condition: String, _ parameters: [PostgresValue],
        _ decode: (_ session: String, _ bytes: [UInt8]) throws -> Record
    ) throws -> LoadedRows<Record> {
        try using { connection in
            var loaded = LoadedRows<Record>()
            var after = ""
            while true {
                let rows = try connection.execute(
                    "SELECT id, state FROM navigator_sessions WHERE id > $1 AND \(condition) ORDER BY id LIMIT $2",
                    [.text(after), .int64(Int64(Self.loadPage))] + parameters)
                for row in 0..<rows.count {
                    let id = try rows[row, 0].text()
                    do {
                        loaded.rows.append((id, try decode(id, try rows[row, 1].data())))
                    } catch {
                        loaded.quarantined.append((id, "\(error)"))
                    }
                }
                guard rows.count == Self.loadPage else { break }
                after = try rows[rows.count - 1, 0].text()
            }
            if !loaded.quarantined.isEmpty {
                try connection.transaction(idleLimit: transactionIdleLimit) {
                    for (id, reason) in loaded.quarantined {
                        try connection.execute(
                            """
                            INSERT INTO navigator_quarantine (id, seq, state, reason)
                                SELECT id, seq, state, $2 FROM navigator_sessions WHERE id = $1
                            """, [.text(id), .text(reason)])
                        try connection.execute("DELETE FROM navigator_sessions WHERE id = $1", [.text(id)])
                    }
                }
            }
            return loaded
        }
    }

    public func quarantinedCount() throws -> Int {
        try using { connection in Int(try connection.execute("SELECT count(*) FROM navigator_quarantine")[0, 0].int64())
        }
    }

    /// Rows per statement: one `INSERT … SELECT FROM unnest(…)` writes a whole chunk.
    static let rowsPerStatement = 1_000

    /// Writes the rows in one transaction. In cluster mode only the rows of partitions whose
    /// lease still names this instance at the epoch it holds are written: the lease rows are read
    /// FOR SHARE, so a claim by another instance passes them over until this transaction ends (and
    /// then loads what it wrote) or came first (and these rows are fenced); the fenced ones are
    /// thrown as ``FencedWrite`` after the others were committed. A transaction left idle longer
    /// than ``transactionIdleLimit`` (its instance frozen) is ended by the server, locks and all.
    public func write(_ rows: [StoredRow]) throws {
        guard !rows.isEmpty else { return }
        let partitionOf = rows.map { partition(of: $0.0) }
        let fenced = try using { connection in
            try connection.transaction(idleLimit: transactionIdleLimit) {
                () throws -> (sessions: [String], partitions: Set<Int32>) in
                var valid = [Bool](repeating: true, count: rows.count)
                var fenced: (sessions: [String], partitions: Set<Int32>) = ([], [])
                let held = try stillHeld(partitionOf, connection)
                for index in rows.indices where !held.contains(partitionOf[index]) {
                    valid[index] = false
                    fenced.sessions.append(rows[index].0)
                    fenced.partitions.insert(partitionOf[index])
                }
                let indices = rows.indices.filter { valid[$0] }
                var start = 0
                while start < indices.count {
                    let chunk = indices[start..<min(start + Self.rowsPerStatement, indices.count)]
                    start = chunk.endIndex
                    try connection.execute(
                        """
                        INSERT INTO navigator_sessions (id, partition, seq, state, updated_at)
                            SELECT id, partition, seq, state, now()
                            FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bytea[]) AS r(id, partition, seq, state)
                        ON CONFLICT (id) DO UPDATE
                            SET seq = excluded.seq, state = excluded.state, updated_at = excluded.updated_at
                        """,
                        [
                            .textArray(chunk.map { rows[$0].0 }), .int32Array(chunk.map { partitionOf[$0] }),
                            .int64Array(chunk.map { Int64(bitPattern: rows[$0].1) }),
                            .bytesArray(chunk.map { rows[$0].2 }),
                        ])
                }
                return fenced
            }
        }
        if !fenced.sessions.isEmpty { throw FencedWrite(sessions: fenced.sessions, partitions: fenced.partitions) }
    }

    /// The sessions of these partitions (claimed by this instance), packed as stored; rows that
    /// do not load move to quarantine.
    public func load<Record>(
        partitions: [Int32], _ decode: (_ session: String, _ bytes: [UInt8]) throws -> Record
    ) throws -> LoadedRows<Record> {
        try load(where: "partition = ANY($3)", [.int32Array(partitions)], decode)
    }

    /// Of `partitions`, those whose lease still names this instance at the epoch it holds: the
    /// fence of every write and deletion. The lease rows are read FOR SHARE, so a claim by another
    /// instance passes them over until the caller's transaction ends (and then loads what it
    /// wrote), or came first.
    private func stillHeld(_ partitions: [Int32], _ connection: PostgresConnection) throws -> Set<Int32> {
        let leases = try connection.execute(
            """
            SELECT partition, epoch FROM navigator_leases
                WHERE owner = $1 AND partition = ANY($2) FOR SHARE
            """, [.text(ownership.instance), .int32Array(Array(Set(partitions)))])
        var held = Set<Int32>()
        for row in 0..<leases.count {
            let partition = try leases[row, 0].int32()
            if ownership.epoch(of: partition) == UInt64(bitPattern: try leases[row, 1].int64()) {
                held.insert(partition)
            }
        }
        return held
    }

    /// Deletes expired sessions, fenced like ``write(_:)``: only those of partitions whose
    /// lease still names this instance at the epoch it holds (read FOR SHARE in the same
    /// transaction), so an instance that has just lost a partition cannot delete a session
    /// another instance serves now; the others are thrown as ``FencedWrite`` after the rest
    /// was deleted. The seq floor only rises (instances share it).
    public func expire(_ sessions: [String], seqFloor: UInt64) throws {
        guard !sessions.isEmpty else { return }
        let partitionOf = sessions.map { partition(of: $0) }
        let fenced = try using { connection in
            try connection.transaction(idleLimit: transactionIdleLimit) {
                () throws -> (sessions: [String], partitions: Set<Int32>) in
                let held = try stillHeld(partitionOf, connection)
                var deleted: [String] = []
                var fenced: (sessions: [String], partitions: Set<Int32>) = ([], [])
                for (session, partition) in zip(sessions, partitionOf) {
                    if held.contains(partition) {
                        deleted.append(session)
                    } else {
                        fenced.sessions.append(session)
                        fenced.partitions.insert(partition)
                    }
                }
                if !deleted.isEmpty {
                    try connection.execute(
                        "DELETE FROM navigator_sessions WHERE id = ANY($1::text[])", [.textArray(deleted)])
                }
                try connection.execute(
                    """
                    INSERT INTO navigator_meta (key, value) VALUES ('seq_floor', $1)
                        ON CONFLICT (key) DO UPDATE SET value = GREATEST(navigator_meta.value, excluded.value)
                    """, [.int64(Int64(bitPattern: seqFloor))])
                return fenced
            }
        }
        if !fenced.sessions.isEmpty { throw FencedWrite(sessions: fenced.sessions, partitions: fenced.partitions) }
    }

    public func seqFloor() throws -> UInt64 {
        try using { connection in UInt64(bitPattern: try Self.meta(connection)["seq_floor"] ?? 0) }
    }

    public func markCleanStop() throws {
        try using { connection in try Self.setMeta(connection, "clean_stop", 1) }
    }

    public func rollout() throws -> StoredRollout? {
        let row = try using { connection -> (Int64, String)? in
            let rows = try connection.execute("SELECT revision, record FROM navigator_rollout WHERE id = 1")
            return rows.count == 0 ? nil : (try rows[0, 0].int64(), try rows[0, 1].text())
        }
        return try row.map { try StoredRollout.decoded($0.1, revision: $0.0, location: location) }
    }

    public func rolloutRevision() throws -> Int64 {
        try using { connection in
            let rows = try connection.execute("SELECT revision FROM navigator_rollout WHERE id = 1")
            return rows.count == 0 ? 0 : try rows[0, 0].int64()
        }
    }

    public func storeRollout(_ rollout: StoredRollout, expected: Int64) throws -> Int64? {
        let record = try rollout.encoded()
        return try using { connection in
            // One statement each: the row is written only if no other instance changed it meanwhile.
            let rows =
                expected == 0
                ? try connection.execute(
                    """
                    INSERT INTO navigator_rollout (id, revision, record) VALUES (1, 1, $1)
                        ON CONFLICT (id) DO NOTHING RETURNING revision
                    """, [.text(record)])
                : try connection.execute(
                    """
                    UPDATE navigator_rollout SET revision = revision + 1, record = $1, changed_at = now()
                        WHERE id = 1 AND revision = $2 RETURNING revision
                    """, [.text(record), .int64(expected)])
            return rows.count == 1 ? try rows[0, 0].int64() : nil
        }
    }

    public var isInPlace: Bool { true }

    public func reopen(epoch: UInt64) throws {}

    /// Closes the connection, which lets go of the instance lock.
    /// Nothing to give back: libpq keeps no cache between queries.
    public func releaseMemory() {}

    public func close() {
        connection.withLock { $0 = nil }
    }
}
