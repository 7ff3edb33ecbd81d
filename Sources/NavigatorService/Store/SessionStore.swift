import NavigatorCore
import Synchronization

/// The active-screen trees of all sessions, split into shards by session.
///
/// Each shard belongs to one worker, its only writer, and sits behind a Mutex so that the
/// requests thread can read snapshots without asking the worker. A session's shard is
/// `fnv1a(session) % shards`, the same function that routes its intents, so one session's work
/// is always done, in order, by one worker.
final class SessionStore: Sendable {
    struct Record: Sendable {
        var state: SessionState
        /// The seq of the last batch published for the session (0: none yet).
        var seq: UInt64
    }

    final class Shard: Sendable {
        let records = Mutex<[String: Record]>([:])
        /// Sessions changed since the last flush to disk.
        let dirty = Mutex<Set<String>>([])
    }

    let shards: [Shard]
    let initial: @Sendable () -> SessionState

    init(shards count: Int, initial: @escaping @Sendable () -> SessionState) {
        shards = (0..<count).map { _ in Shard() }
        self.initial = initial
    }

    func shardIndex(of session: String) -> Int { Self.shardIndex(of: session, count: shards.count) }

    /// FNV-1a over the UTF-8 bytes: stable across runs, cheap, spreads short ids well.
    static func shardIndex(of session: String, count: Int) -> Int {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in session.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return Int(hash % UInt64(count))
    }

    /// Runs `body` on the session's record (a new session starts from the initial state) under
    /// its shard's lock, and marks the session changed.
    func update<R>(_ session: String, _ body: (inout Record) -> R) -> R {
        let shard = shards[shardIndex(of: session)]
        let result = shard.records.withLock { records in
            body(&records[session, default: Record(state: initial(), seq: 0)])
        }
        shard.dirty.withLock { _ = $0.insert(session) }
        return result
    }

    /// A copy of the session's record, or the initial one if the session is new.
    func read(_ session: String) -> Record {
        shards[shardIndex(of: session)].records.withLock { $0[session] } ?? Record(state: initial(), seq: 0)
    }

    /// Fills the shards from stored records (at start, before any worker runs).
    func load(_ records: [(String, Record)]) {
        for (session, record) in records {
            shards[shardIndex(of: session)].records.withLock { $0[session] = record }
        }
    }

    var sessionCount: Int { shards.reduce(0) { count, shard in count + shard.records.withLock { $0.count } } }

    var parkedCount: Int {
        shards.reduce(0) { count, shard in
            count + shard.records.withLock { $0.values.reduce(0) { $0 + $1.state.parked.count } }
        }
    }
}
