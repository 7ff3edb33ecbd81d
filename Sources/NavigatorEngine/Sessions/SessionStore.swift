import Locking
import NavigatorCore
import NavigatorStore
import NavigatorWire
import Synchronization

/// The active-screen trees of all sessions, split into shards by session.
///
/// Each shard belongs to one worker, its only writer, and sits behind a Mutex so that the
/// requests thread can read snapshots without asking the worker. A session's shard is
/// `fnv1a(session) % shards`, the same function that routes its intents, so one session's work
/// is always done, in order, by one worker.
final class SessionStore: Sendable {
    /// One session: its state, live or packed, and the seq of its last batch.
    ///
    /// A session nobody has changed for a while (see ``Persistence/compactIdle(now:)``)
    /// keeps its state only as bytes — a few hundred instead of the Swift values' allocations —
    /// and is unpacked on its next use: the protobuf `StoredSession` bytes the state file holds,
    /// or, once at rest (nothing parked or remembered), ``CompactSession`` bytes.
    struct Record: Sendable {
        // 32 bytes in all (a table entry is this and the id's 16): every session has one, at rest
        // too, so the seq and the parked count share a word.
        private var storage: Storage
        /// The seq (low 48 bits) and how many intents are parked (high 16: at most
        /// `maxParkedPerSession`, 10,000).
        private var seqAndParked: UInt64
        /// When the state or seq last changed (monotonic nanoseconds; 0: not since created).
        private(set) var changedAt: Int64 = 0

        /// The most a session's seq may be (2^48 − 1); a stored row beyond it is quarantined.
        static let seqMask: UInt64 = (1 << 48) - 1
        /// The most a stored seq (a session's, the floor of new ones) may be when it is loaded:
        /// half of ``seqMask``, so that the batches still to come cannot reach it (2^47 more).
        /// A session gets there only after 2^47 batches, never in practice; a row that holds
        /// more was damaged or made by hand.
        static let maxStoredSeq: UInt64 = 1 << 47

        /// The seq of the last batch published for the session (0: none yet). One a batch: 2^48
        /// is not reached (a million batches a second to one session for nine years).
        var seq: UInt64 {
            get { seqAndParked & Self.seqMask }
            set {
                precondition(newValue <= Self.seqMask, "a session's seq beyond 2^48")
                seqAndParked = (seqAndParked & ~Self.seqMask) | newValue
                changedAt = MonotonicClock.now()
            }
        }

        /// How many intents the session has parked, readable without unpacking.
        private(set) var parkedCount: Int32 {
            get { Int32(truncatingIfNeeded: seqAndParked >> 48) }
            set { seqAndParked = (seqAndParked & Self.seqMask) | UInt64(UInt16(clamping: newValue)) << 48 }
        }

        private static func seqAndParked(_ seq: UInt64, _ parked: Int) -> UInt64 {
            precondition(seq <= seqMask, "a session's seq beyond 2^48")
            return seq | UInt64(UInt16(clamping: parked)) << 48
        }

        private enum Storage: Sendable {
            case live(Live)
            /// Packed, in its shard's arena (``PackedArena``).
            case packed(PackedBytes)
            /// Packed, in an array of its own: restored, not yet in a shard.
            case loose([UInt8])
        }

        /// The live state, boxed so that a packed record takes a pointer's room in the table;
        /// copied before a change when shared (copy on write).
        private final class Live: @unchecked Sendable {
            var state: SessionState
            init(_ state: SessionState) { self.state = state }
        }

        init(state: SessionState, seq: UInt64) {
            storage = .live(Live(state))
            seqAndParked = Self.seqAndParked(seq, state.parked.count)
        }

        /// The record of a stored row, as the store's ``StateDatabase/loadAll(_:)`` asks for it:
        /// refused, with the reason, when the id is not a valid session id or the bytes do not
        /// decode into a valid state (the row then moves to quarantine).
        ///
        /// What the state remembers only for `window` and is past it at `now` is forgotten as it
        /// loads (``forgetPast(now:window:)``); `remembers` says whether something is left to
        /// forget later.
        static func restore(_ session: String, _ bytes: [UInt8], forgettingBefore now: Int64, window: Int64) throws
            -> (record: Record, remembers: Bool)
        {
            if let problem = SessionID.problem(with: session) {
                throw RestoreRefusal(description: "the session id is not valid: \(problem)")
            }
            do {
                var (state, seq) = try decoded(bytes)
                // At rest (nothing left to forget): compact; else as stored, less what is past.
                let forgot = state.forget(before: now, window: window)
                let packed: [UInt8]
                if let compact = CompactSession.encode(state, seq: seq, names: PackedNames.current) {
                    packed = compact
                } else {
                    packed = forgot ? try Self.storedBytes(state, seq: seq) : bytes
                }
                return (Record(packed: packed, seq: seq, parkedCount: state.parked.count), state.remembersForAWhile)
            } catch {
                throw RestoreRefusal(description: "the state does not load: \(error)")
            }
        }

        private init(packed bytes: [UInt8], seq: UInt64, parkedCount: Int) {
            storage = .loose(bytes)
            seqAndParked = Self.seqAndParked(seq, parkedCount)
        }

        /// How a packed record keeps `state` at `seq`: compact at rest (``CompactSession``),
        /// else as the state file keeps it.
        private static func packedBytes(_ state: SessionState, seq: UInt64) throws -> [UInt8] {
            if let compact = CompactSession.encode(state, seq: seq, names: PackedNames.current) { return compact }
            return try storedBytes(state, seq: seq)
        }

        /// What the state file keeps for `state` at `seq`.
        private static func storedBytes(_ state: SessionState, seq: UInt64) throws -> [UInt8] {
            var bytes = Navigator_V1_StoredSession.encodedWithoutParked(state, seq: seq)
            if !state.parked.isEmpty { bytes += try Navigator_V1_StoredSession.encodedParkedField(state.parked) }
            return bytes
        }

        /// Why a stored row does not load.
        struct RestoreRefusal: Error, CustomStringConvertible {
            let description: String
        }

        /// A stored row's state and seq, refused when the seq is beyond what a record keeps.
        private static func decoded(_ bytes: [UInt8]) throws -> (SessionState, UInt64) {
            let (state, seq) = try Navigator_V1_StoredSession(serializedBytes: bytes).core()
            guard seq <= maxStoredSeq else {
                throw RestoreRefusal(
                    description:
                        "its seq \(seq) is beyond \(maxStoredSeq) (2^47), the most a stored session's seq may be")
            }
            return (state, seq)
        }

        /// A record from the state file's bytes, checked to decode.
        init(packed bytes: [UInt8]) throws {
            let (state, seq) = try Self.decoded(bytes)
            storage = .loose(bytes)
            seqAndParked = Self.seqAndParked(seq, state.parked.count)
        }

        // The tree and the parked intents, each read without the rest of the state: a get of
        // ``state`` copies the whole of it (a retain of each of its arrays), and the worker reads
        // these for every intent. (Not lent in place, `inout`: that is a modifying access to a
        // box the write-behind's copy of the record shares and may be reading.)
        var tree: ScreenTree {
            switch storage {
            case .live(let live): live.state.tree
            case .packed, .loose: withPackedBytes(Self.unpack)!.tree
            }
        }

        var parked: [ParkedIntent] {
            switch storage {
            case .live(let live): live.state.parked
            case .packed, .loose: withPackedBytes(Self.unpack)!.parked
            }
        }

        var state: SessionState {
            get {
                switch storage {
                case .live(let live): live.state
                case .packed, .loose: withPackedBytes(Self.unpack)!
                }
            }
            _modify {
                var live: Live
                switch storage {
                case .live(let existing):
                    live = existing
                    storage = .loose([])  // now `live` is the only reference unless a copy shares it
                    if !isKnownUniquelyReferenced(&live) { live = Live(live.state) }
                case .packed, .loose:
                    live = Live(withPackedBytes(Self.unpack)!)
                    releasePacked()
                }
                defer {
                    parkedCount = Int32(live.state.parked.count)
                    storage = .live(live)
                    changedAt = MonotonicClock.now()
                }
                yield &live.state
            }
        }

        /// The bytes the state file keeps for this record: packed `StoredSession` bytes as they
        /// are, compact ones encoded as a `StoredSession` again.
        func stored() throws -> [UInt8] { try storedReusingParked(nil).bytes }

        /// The encoding of a parked list, kept with the very list it encodes.
        final class ParkedEncoding: @unchecked Sendable {
            // @unchecked: immutable after init.
            let list: [ParkedIntent]
            let bytes: [UInt8]
            /// Where each intent's entry ends in ``bytes``: an entry is kept for the next
            /// encoding while its intent waits unchanged.
            private let ends: [Int32]
            /// How many entries were taken from the earlier encoding (tests read it).
            let reused: Int

            /// Encodes `list`, taking from `earlier` (an encoding of the session's list as it
            /// was) the entries of the intents that are still there unchanged. A list changes by
            /// an intent joining at its end, leaving (anywhere: released or expired), or waiting
            /// for another reason; at 13 parked intents a session, re-encoding the whole list for
            /// each such change cost a fifth of the flush thread at 10,000 intents/s (issue 31).
            init(_ list: [ParkedIntent], reusing earlier: ParkedEncoding? = nil) throws {
                self.list = list
                var bytes: [UInt8] = []
                var ends: [Int32] = []
                ends.reserveCapacity(list.count)
                var reused = 0
                var next = 0  // the earlier entry after the last one taken
                bytes.reserveCapacity((earlier?.bytes.count ?? 0) + 256)
                for intent in list {
                    if let earlier, let found = earlier.index(of: intent, from: next) {
                        let start = found == 0 ? 0 : Int(earlier.ends[found - 1])
                        bytes += earlier.bytes[start..<Int(earlier.ends[found])]
                        next = found + 1
                        reused += 1
                    } else {
                        try Navigator_V1_StoredSession.appendParkedEntry(intent, to: &bytes)
                    }
                    ends.append(Int32(bytes.count))
                }
                self.bytes = bytes
                self.ends = ends
                self.reused = reused
            }

            /// How far past the last entry taken an unchanged intent is looked for.
            static let lookahead = 16

            /// Where `intent` is in the list, looking from `start` up to ``lookahead`` entries on:
            /// intents keep their order, so an unchanged one is at `start` or a little after it
            /// (those between left). Bounded, for lists of thousands.
            private func index(of intent: ParkedIntent, from start: Int) -> Int? {
                (start..<min(list.count, start + Self.lookahead)).first { list[$0] == intent }
            }

            /// Whether `other` is this list unchanged. Exact: this object holds a reference to
            /// the list's storage, so any change to a copy of it made a new storage (copy on
            /// write), and the old one cannot be freed and reused while held here.
            func encodes(_ other: [ParkedIntent]) -> Bool {
                guard other.count == list.count else { return false }
                guard !list.isEmpty else { return true }
                return list.withUnsafeBufferPointer { mine in
                    other.withUnsafeBufferPointer { mine.baseAddress == $0.baseAddress }
                }
            }
        }

        /// ``stored()``, reusing `cached` (the parked intents' encoding from an earlier flush) when
        /// the list has not changed since, and its unchanged entries when it has — sessions that
        /// wait long keep many parked intents, and a busy one is written every flush; returns the
        /// encoding of the list as it is now.
        func storedReusingParked(_ cached: ParkedEncoding?) throws -> (bytes: [UInt8], parked: ParkedEncoding?) {
            switch storage {
            case .packed, .loose:
                guard isCompact else { return (packedArray!, nil) }
                return (try Self.storedBytes(withPackedBytes(Self.unpack)!, seq: seq), nil)
            case .live(let live):
                // A copy, not a loan: the box is shared with the record in its shard, which its
                // worker reads meanwhile, and lending it (`inout`) is a modifying access
                // (ThreadSanitizer reports it as a race).
                let state = live.state
                var bytes = Navigator_V1_StoredSession.encodedWithoutParked(state, seq: seq)
                let parked =
                    if let cached, cached.encodes(state.parked) {
                        cached
                    } else {
                        try ParkedEncoding(state.parked, reusing: cached)
                    }
                bytes += parked.bytes
                return (bytes, parked)
            }
        }

        var isPacked: Bool { if case .live = storage { false } else { true } }

        /// Whether it is packed in the compact form of a session at rest (``CompactSession``).
        var isCompact: Bool { withPackedBytes { CompactSession.isCompact($0) } ?? false }

        /// Runs `body` on a packed record's bytes where they are (nil for a live one).
        private func withPackedBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
            switch storage {
            case .live: nil
            case .packed(let packed): packed.withBytes(body)
            case .loose(let bytes): bytes.withUnsafeBytes(body)
            }
        }

        /// A packed record's bytes, as an array (nil for a live one).
        private var packedArray: [UInt8]? {
            switch storage {
            case .live: nil
            case .packed(let packed): packed.array
            case .loose(let bytes): bytes
            }
        }

        /// The arena block its packed bytes are in, if they are.
        var packedBlock: PackedBlock? { if case .packed(let packed) = storage { packed.block } else { nil } }

        /// A packed record's bytes without what its state remembers only for `window` and is
        /// past it (``SessionState/forget(before:window:)``), to keep with ``repack(_:)``: nil
        /// when nothing is past. Not a change: the state file keeps what it has (a restart
        /// forgets it again), and the record's idle time goes on. Also says whether something
        /// is left to forget later; nil for a live record.
        func forgetPast(now: Int64, window: Int64) throws -> (bytes: [UInt8]?, remembers: Bool)? {
            guard var state = withPackedBytes(Self.unpack) else { return nil }
            guard state.forget(before: now, window: window) else {
                // Nothing past, but perhaps at rest in the stored form it was packed in after a
                // flush: compact now.
                guard !isCompact, let compact = CompactSession.encode(state, seq: seq, names: PackedNames.current)
                else { return (nil, state.remembersForAWhile) }
                return (compact, false)
            }
            return (try Self.packedBytes(state, seq: seq), state.remembersForAWhile)
        }

        /// A packed record: keeps `bytes` (from ``forgetPast(now:window:)``) instead, in `arena`.
        mutating func repack(_ bytes: [UInt8], in arena: inout PackedArena) {
            guard isPacked else { return }
            releasePacked()
            storage = .packed(arena.store(bytes))
        }

        /// Keeps only `bytes` (which must be ``stored()`` of this record), in `arena`.
        mutating func pack(_ bytes: [UInt8], in arena: inout PackedArena) {
            releasePacked()
            storage = .packed(arena.store(bytes))
        }

        /// Packed bytes of an array of their own move into `arena` (a restored record entering
        /// its shard); packed bytes elsewhere are copied into it (a record is counted in the
        /// arena it is kept in).
        mutating func settle(in arena: inout PackedArena) {
            switch storage {
            case .live: return
            case .loose(let bytes): storage = .packed(arena.store(bytes))
            case .packed(let packed): storage = .packed(packed.withBytes { arena.store($0) })
            }
        }

        /// Packed bytes in the arena move to its block being filled (compaction).
        mutating func move(to arena: inout PackedArena) {
            guard case .packed(let packed) = storage else { return }
            let moved = packed.withBytes { arena.store($0) }
            packed.release()
            storage = .packed(moved)
        }

        /// The arena no longer counts this record's packed bytes (it is being removed or
        /// replaced).
        func releasePacked() { if case .packed(let packed) = storage { packed.release() } }

        private static func unpack(_ bytes: UnsafeRawBufferPointer) -> SessionState {
            // The bytes were encoded by this process (or checked when loaded), so they decode.
            do {
                if CompactSession.isCompact(bytes) {
                    return try CompactSession.decode(bytes, names: PackedNames.current).state
                }
                return try Navigator_V1_StoredSession(serializedBytes: [UInt8](bytes)).core().state
            } catch {
                preconditionFailure("a packed session does not decode: \(error)")
            }
        }
    }

    final class Shard: Sendable {
        let records = Locked(Records())
        /// Sessions changed since the last flush to disk.
        let dirty = Locked<Set<String>>([])
        /// Parked intents of all its sessions, kept as they change (reading it takes no lock).
        let parked = Atomic<Int>(0)
    }

    let shards: [Shard]
    /// A new session's state (its route map's root: a rollout's candidate may have other tabs).
    let initial: @Sendable (_ session: String) -> SessionState
    /// The epoch every session's stream is in during this run (see ``StateFile/beginRun()``),
    /// with one instance; with several, each partition's lease epoch (``ownership``).
    let epoch: UInt64
    /// Several instances (PostgreSQL store): the partitions this instance serves, and their
    /// epochs; nil with one instance, which serves every session.
    let ownership: PartitionOwnership?

    init(
        shards count: Int, epoch: UInt64, ownership: PartitionOwnership? = nil,
        initial: @escaping @Sendable (_ session: String) -> SessionState
    ) {
        shards = (0..<count).map { _ in Shard() }
        self.epoch = epoch
        self.ownership = ownership
        self.initial = initial
    }

    /// The epoch of the session's stream: the run's, or its partition's lease epoch (0 while
    /// this instance does not hold it).
    func epoch(of session: String) -> UInt64 {
        guard let ownership else { return epoch }
        return ownership.epoch(of: ownership.partition(of: session)) ?? 0
    }

    /// Why this instance does not serve the session now (another instance does, or its
    /// partition is changing hands), or nil when it does.
    func notServed(_ session: String) -> String? {
        guard let ownership else { return nil }
        let partition = ownership.partition(of: session)
        guard !ownership.serves(partition) else { return nil }
        return ownership.whyNotServed(partition, session: session)
    }

    /// The instance that serves `session` when this one does not (nil: this one, or none now).
    func owner(of session: String) -> String? { ownership?.owner(of: session) }

    /// Forgets the sessions of these partitions (no longer this instance's): their records and
    /// their changed marks. Returns the sessions dropped. (``Persistence/drop(partitions:)``
    /// forgets what the write-behind keeps of them too.)
    func drop(partitions: Set<Int32>) -> [String] {
        guard let ownership, !partitions.isEmpty else { return [] }
        var dropped: [String] = []
        for shard in shards {
            let names = shard.records.withLock { records -> [String] in
                let names = records.table.keys.filter { partitions.contains(ownership.partition(of: $0)) }
                for name in names {
                    if let record = records.remove(name), record.parkedCount != 0 {
                        shard.parked.subtract(Int(record.parkedCount), ordering: .relaxed)
                    }
                }
                records.releaseSpareRoom()
                return names
            }
            shard.dirty.withLock { dirty in
                for name in names { dirty.remove(name) }
                dirty.releaseSpareRoom()
            }
            count.subtract(names.count, ordering: .relaxed)
            dropped += names
        }
        return dropped
    }

    /// The changed sessions of these partitions (to write before they are released).
    func changed(in partitions: Set<Int32>) -> Set<String> {
        guard let ownership else { return [] }
        var names: Set<String> = []
        for shard in shards {
            shard.dirty.withLock { dirty in
                for name in dirty where partitions.contains(ownership.partition(of: name)) { names.insert(name) }
            }
        }
        return names
    }

    func shardIndex(of session: String) -> Int { Self.shardIndex(of: session, count: shards.count) }

    /// The shard of a session among `count`: its stable hash (the partitions of several
    /// instances use the same one).
    static func shardIndex(of session: String, count: Int) -> Int { StableHash.bucket(of: session, count: count) }

    /// Runs `body` on the session's record under its shard's lock, and marks the session
    /// changed. A new session starts from the initial state and is kept only if `body` changed
    /// it: a rejected intent or event creates no session.
    func update<R>(_ session: String, _ body: (inout Record) -> R) -> R {
        let shard = shards[shardIndex(of: session)]
        let (result, stored) = shard.records.withLock { records -> (R, Bool) in
            // One lookup of the id (hashing it) for an existing session, not one per access.
            guard let index = records.table.index(forKey: session) else {
                let initial = initial(session)
                let start = seqFloor.load(ordering: .relaxed)
                var record = Record(state: initial, seq: start)
                let result = body(&record)
                guard record.seq != start || record.state != initial else { return (result, false) }
                records.insert(session, record)
                count.add(1, ordering: .relaxed)
                if record.parkedCount != 0 { shard.parked.add(Int(record.parkedCount), ordering: .relaxed) }
                return (result, true)
            }
            let (parkedBefore, wasPacked) = (
                records.table.values[index].parkedCount, records.table.values[index].isPacked
            )
            let result = body(&records.table.values[index])
            let parkedAfter = records.table.values[index].parkedCount
            if wasPacked, !records.table.values[index].isPacked { records.unpacked() }
            if parkedAfter != parkedBefore { shard.parked.add(Int(parkedAfter - parkedBefore), ordering: .relaxed) }
            return (result, true)
        }
        if stored { shard.dirty.withLock { _ = $0.insert(session) } }
        return result
    }

    /// Whether the session exists, or one more may be created within `limit`.
    func admits(_ session: String, limit: Int) -> Bool {
        count.load(ordering: .relaxed) < limit
            || shards[shardIndex(of: session)].records.withLock { $0[session] != nil }
    }

    /// A copy of the session's record, or the initial one if the session is new.
    func read(_ session: String) -> Record {
        shards[shardIndex(of: session)].records.withLock { $0[session] }
            ?? Record(state: initial(session), seq: seqFloor.load(ordering: .relaxed))
    }

    /// The seq a new session starts from: 0, or beyond every seq of a session that expired (see
    /// ``Persistence/expireIdle(now:)``), so a shell still following an expired session sees a
    /// gap, never a reused seq, and resyncs.
    let seqFloor = Atomic<UInt64>(0)

    /// Removes the sessions unchanged since `cutoff` (monotonic ns; a session restored and not
    /// changed since counts from `restoredAt`) and returns them with the highest seq among them.
    func removeIdle(before cutoff: Int64, restoredAt: Int64) -> (sessions: [String], highestSeq: UInt64) {
        var removed: [String] = []
        var highest: UInt64 = 0
        for shard in shards {
            shard.records.withLock { records in
                let idle = records.table.filter { max($0.value.changedAt, restoredAt) < cutoff }
                for (name, record) in idle {
                    records.remove(name)
                    highest = max(highest, record.seq)
                    if record.parkedCount != 0 { shard.parked.subtract(Int(record.parkedCount), ordering: .relaxed) }
                    removed.append(name)
                }
                records.releaseSpareRoom()
                count.subtract(idle.count, ordering: .relaxed)
            }
        }
        return (removed, highest)
    }

    /// Fills the shards from stored records (at start, before any worker runs).
    func load(_ records: [(String, Record)]) {
        for (session, record) in records {
            let shard = shards[shardIndex(of: session)]
            let replaced = shard.records.withLock { $0.insert(session, record) }
            if replaced == nil { count.add(1, ordering: .relaxed) }
            shard.parked.add(Int(record.parkedCount - (replaced?.parkedCount ?? 0)), ordering: .relaxed)
        }
    }

    /// Sessions in memory, kept as they are created (reading it takes no lock).
    private let count = Atomic<Int>(0)

    var sessionCount: Int { count.load(ordering: .relaxed) }

    /// Sessions kept packed (at rest).
    var packedCount: Int { shards.reduce(0) { $0 + $1.records.withLock { $0.packed } } }

    /// The arenas of packed sessions (``PackedArena``): bytes mapped, and bytes of sessions in them.
    var packedBytes: (mapped: Int, live: Int) {
        shards.reduce((0, 0)) { total, shard in
            let size = shard.records.withLock { $0.arena.size }
            return (total.0 + size.mapped, total.1 + size.live)
        }
    }

    var parkedCount: Int { shards.reduce(0) { $0 + $1.parked.load(ordering: .relaxed) } }
}
