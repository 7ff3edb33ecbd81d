import NavigatorCore

/// Where sessions are kept durably: the SQLite state file (one instance, the default) or a
/// PostgreSQL database (``PostgresStateDatabase``). ``Persistence`` writes through it.
///
/// Rows are a session's id, the seq of its last batch and its state as the `StoredSession`
/// bytes (proto/navigator/v1/state.proto), the same bytes in both.
protocol StateDatabase: AnyObject, Sendable {
    /// For messages and logs: the state file's path, or the database's URL without its password.
    var location: String { get }
    /// What it is, for messages: "the state file" or "the PostgreSQL database".
    var kind: String { get }
    /// The key of the remembered intent ids' hashes, kept in the database.
    var dedupKey: DedupKey { get }

    /// Starts a run: the epoch its sessions' streams continue in, and whether the last run
    /// stopped cleanly (then the epoch is the last run's and every seq continues).
    func beginRun() throws -> (epoch: UInt64, continued: Bool)
    /// Every stored session, packed as stored; rows that do not load move to quarantine.
    func loadAll() throws -> LoadedSessions
    /// How many sessions are in quarantine.
    func quarantinedCount() throws -> Int
    /// Writes these sessions (id, seq, stored bytes) in one transaction.
    func write(_ rows: [(String, UInt64, [UInt8])]) throws
    /// Deletes expired sessions and records the seq new sessions start from.
    func expire(_ sessions: [String], seqFloor: UInt64) throws
    /// The seq new sessions start from (0 until sessions have expired).
    func seqFloor() throws -> UInt64
    /// Records that every session was written: the next run continues this run's epoch.
    func markCleanStop() throws

    /// Whether what was opened is still there (a state file can be deleted or replaced under the
    /// running service; a database cannot).
    var isInPlace: Bool { get }
    /// Opens it anew after ``isInPlace`` turned false, recording `epoch` in it.
    func reopen(epoch: UInt64) throws
    /// Lets go of connections and locks (at the end of a run).
    func close()
}

/// What loading found: the sessions, and those moved to quarantine with the reasons.
struct LoadedSessions {
    var records: [(String, SessionStore.Record)] = []
    var quarantined: [(session: String, reason: String)] = []
}

/// Which database holds the sessions (`store`).
public enum StoreSelection: Hashable, Sendable, CustomStringConvertible {
    /// The SQLite state file in the data directory.
    case sqlite
    /// A PostgreSQL database: `postgresql://user[:password]@host[:port]/database[?parameters]`.
    case postgresql(url: String)

    /// Without the password: fit for logs.
    public var description: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgresql(let url): PostgresStateDatabase.redact(url)
        }
    }
}
