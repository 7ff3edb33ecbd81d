import NavigatorCore

/// Where sessions are kept durably: the SQLite state file (one instance, the default) or a
/// PostgreSQL database (``PostgresStateDatabase``). The engine writes through it, behind its workers.
///
/// Rows are a session's id, the seq of its last batch and its state as the `StoredSession`
/// bytes (proto/navigator/v1/state.proto), the same bytes in both.
public protocol StateDatabase: AnyObject, Sendable {
    /// For messages and logs: the state file's path, or the database's URL without its password.
    var location: String { get }
    /// What it is, for messages: "the state file" or "the PostgreSQL database".
    var kind: String { get }
    /// The key of the remembered intent ids' hashes, kept in the database.
    var dedupKey: DedupKey { get }

    /// Starts a run: the epoch its sessions' streams continue in, and whether the last run
    /// stopped cleanly (then the epoch is the last run's and every seq continues).
    func beginRun() throws -> (epoch: UInt64, continued: Bool)
    /// Every stored session, each passed to `decode` as its id and stored bytes; a row `decode`
    /// refuses (throws), or with no id or state, moves to the quarantine table with the reason.
    func loadAll<Record>(_ decode: (_ session: String, _ bytes: [UInt8]) throws -> Record) throws
        -> LoadedRows<Record>
    /// How many sessions are in quarantine.
    func quarantinedCount() throws -> Int
    /// Writes these sessions (id, seq, stored bytes) in one transaction.
    func write(_ rows: [StoredRow]) throws
    /// Where a session's row comes in the order this database writes fastest: a transaction of
    /// rows close in this order touches fewer pages (``StateFile``: the row's place in the file,
    /// when known).
    func writeOrder(of session: String) -> UInt64
    /// These sessions' rows will not be written for a while (packed at rest): what is kept to
    /// write them faster can go.
    func forgetPlaces(of sessions: some Sequence<String>)
    /// Deletes expired sessions and records the seq new sessions start from.
    func expire(_ sessions: [String], seqFloor: UInt64) throws
    /// The seq new sessions start from (0 until sessions have expired).
    func seqFloor() throws -> UInt64
    /// Records that every session was written: the next run continues this run's epoch.
    func markCleanStop() throws

    /// The route map rollout, if one was ever started (its last revision).
    func rollout() throws -> StoredRollout?
    /// Its revision alone (0: none): what instances read each second to follow it.
    func rolloutRevision() throws -> Int64
    /// Stores `rollout` as the next revision, provided the stored one is still `expected` (0:
    /// none stored yet): its revision, or nil when another change came first (nothing written).
    func storeRollout(_ rollout: StoredRollout, expected: Int64) throws -> Int64?

    /// Whether what was opened is still there (a state file can be deleted or replaced under the
    /// running service; a database cannot).
    var isInPlace: Bool { get }
    /// Opens it anew after ``isInPlace`` turned false, recording `epoch` in it.
    func reopen(epoch: UInt64) throws
    /// Lets go of connections and locks (at the end of a run).
    func close()
    /// Gives back the memory its client library keeps that the next use can make again (the
    /// SQLite page cache): called when the service comes to rest.
    func releaseMemory()
}

/// What loading found: the sessions as `decode` made them, and those moved to quarantine with
/// the reasons.
public struct LoadedRows<Record> {
    public var rows: [(session: String, record: Record)] = []
    public var quarantined: [(session: String, reason: String)] = []

    public init() {}
}

extension StateDatabase {
    /// Any order will do.
    public func writeOrder(of session: String) -> UInt64 { 0 }
    public func forgetPlaces(of sessions: some Sequence<String>) {}
}

/// One session as the store keeps it: its id, the seq of its last batch, and its state as the
/// `StoredSession` bytes.
public typealias StoredRow = (session: String, seq: UInt64, bytes: [UInt8])

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
