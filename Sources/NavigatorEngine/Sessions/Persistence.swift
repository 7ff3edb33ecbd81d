import Locking
import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import Synchronization
import ZeroMQ

/// Writes sessions from the store to the database (the state file, or PostgreSQL): behind, in
/// batches, for fire-and-forget work; at once for a session whose acknowledged request is about
/// to be answered.
///
/// Copying a record and writing it happen under one lock, so writes reach the file in the order
/// the copies were taken: a batch flush can never put an older copy over a newer one.
final class Persistence: Sendable {
    let database: any StateDatabase
    let store: SessionStore
    let logger: Logger
    /// Nanoseconds a session stays unchanged before it is packed (see ``compactIdle(now:)``);
    /// 0: never.
    let packAfter: Int64
    private let writing = Locked(())
    private let stopping = Atomic<Bool>(false)
    /// False while the state file is found deleted or replaced and not yet written again in
    /// full (/readyz says so).
    let fileInPlace = Atomic<Bool>(true)
    /// Sessions written by flushes, candidates for packing: when, not what (a session under
    /// load is written again and again and never packed; keeping what was written would keep a
    /// second copy of every such session's state).
    private let candidates = Locked(Candidates())
    /// The encodings of the parked lists the last flushes wrote, for live sessions that have
    /// parked intents: reused while a list does not change. The flush thread fills it (flushes,
    /// packing, idle expiry); sessions handed to another instance leave it
    /// (``drop(partitions:)``, on the lease thread).
    private let parkedEncodings = Locked<[String: SessionStore.Record.ParkedEncoding]>([:])
    /// Sessions packed since malloc last handed free pages back (``flushAndPack(between:)``).
    private let packedSinceTrim = Atomic<Int>(0)
    /// Whether the last write-behind round wrote or packed anything (``flushAndPack(between:)``).
    private let wasBusy = Atomic<Bool>(false)
    /// When the service last came to rest (monotonic ns), and how many times it did.
    private let lastRest = Atomic<Int64>(0)
    let rests = Atomic<Int>(0)
    /// How long a session remembers intent ids and expired intents (the resolver's dedup
    /// window, which a reload may change), in nanoseconds.
    let rememberedFor: @Sendable () -> Int64
    /// Packed sessions to look at again once what they remember for a while is past
    /// (``forgetPast(now:)``).
    private let resting = Locked(Resting())

    /// Sessions whose write (or deletion) was fenced: their partition's lease is another
    /// instance's now (several instances; `navigator_fenced_writes_total`).
    let fencedWrites = Atomic<UInt64>(0)
    /// Writes of sessions that failed (the store away or failing; the sessions are written at a
    /// later flush), the state file's rewriting included: `navigator_state_writes_failed_total`.
    let failedWrites = Atomic<UInt64>(0)
    /// Those failures in the log, whichever path wrote (the write-behind, the writes before
    /// acknowledged replies): the first at once, then a line a minute while they last.
    private let writeFailure = Locked(RepeatedFailure())
    /// The same for writing a state file that was deleted or replaced again.
    private let reopenFailure = Locked(RepeatedFailure())

    /// A write reached the store (written, or fenced by another instance's claim): if writes
    /// had been failing, that is said once.
    private func storeAnswered() {
        writeFailure.withLock { $0.worked("sessions are written to \(database.kind) again", logger: logger) }
    }
    /// Changes of traced intents waiting to be written (their `navigator.persist` spans); nil
    /// without a tracer.
    let traced: TracedWrites?

    init(
        database: any StateDatabase, store: SessionStore, packAfter: Duration = .zero,
        rememberedFor: @escaping @Sendable () -> Int64 = { Resolver.Options().dedupWindow },
        traced: TracedWrites? = nil,
        logger: Logger
    ) {
        self.database = database
        self.traced = traced
        self.store = store
        self.packAfter = packAfter.components.seconds * 1_000_000_000 + packAfter.components.attoseconds / 1_000_000_000
        self.rememberedFor = rememberedFor
        self.logger = logger
    }

    /// Puts every stored session into the store; returns how many, and the sessions that did
    /// not load (now in the quarantine table) with the reasons.
    func restore(wallNow: Int64 = WallClock.now()) throws -> (
        restored: Int, quarantined: [(session: String, reason: String)]
    ) {
        let loaded = try database.loadAll(restoring(wallNow: wallNow))
        let floor = try database.seqFloor()
        guard floor <= SessionStore.Record.maxStoredSeq else {
            throw EngineError(
                .damagedState,
                "\(database.location) says new sessions start at seq \(floor), beyond \(SessionStore.Record.maxStoredSeq) (2^47), the most a stored seq may be: the stored state is damaged; it is left as it is"
            )
        }
        load(loaded.rows)
        store.seqFloor.store(floor, ordering: .relaxed)
        return (loaded.rows.count, loaded.quarantined)
    }

    /// How a stored row becomes a record (``SessionStore/Record/restore(_:_:forgettingBefore:window:)``):
    /// what it remembered for a while and is past now is forgotten as it loads.
    func restoring(wallNow now: Int64 = WallClock.now()) -> (String, [UInt8]) throws -> (
        record: SessionStore.Record, remembers: Bool
    ) {
        let window = rememberedFor()
        return { session, bytes in
            try SessionStore.Record.restore(session, bytes, forgettingBefore: now, window: window)
        }
    }

    /// Puts restored records into the store; those that still remember something for a while
    /// are looked at again once that is past.
    func load(_ rows: [(session: String, record: (record: SessionStore.Record, remembers: Bool))]) {
        store.load(rows.map { ($0.session, $0.record.record) })
        let due = MonotonicClock.now() + rememberedFor()
        resting.withLock { resting in
            for row in rows where row.record.remembers { resting.add(row.session, due: due) }
        }
    }

    /// Writes every session changed since the last flush; returns whether all were written. On
    /// failure the sessions stay marked changed and the next flush tries again.
    @discardableResult
    func flushChanged() -> Bool {
        while true {
            let (written, more) = flushChanged(atMost: Self.chunk)
            guard written else { return false }
            guard more else { return true }
        }
    }

    /// Sessions written per transaction by the write-behind: the flush thread answers the
    /// acknowledged requests waiting between two chunks, so a reply waits for its own session's
    /// write and at most one chunk, not for the whole round. Small enough that a chunk's commit
    /// (SQLite writing its pages to the WAL, which cannot give way) is short, and that a reply
    /// waits behind few sessions' writes, which take longer while the workers take the core from
    /// them (``EngineConfiguration/writeBehindNice``).
    static let chunk = 64

    /// Writes up to `limit` of the sessions changed since they were last written, in one
    /// transaction; returns whether they were written and whether more are waiting.
    func flushChanged(atMost limit: Int) -> (written: Bool, more: Bool) {
        let written = writeChunk {
            var budget = limit
            return store.shards.indices.compactMap { index -> (shard: Int, names: Set<String>)? in
                guard budget > 0 else { return nil }
                let names = store.shards[index].dirty.withLock { dirty in Self.take(budget, from: &dirty) }
                budget -= names.count
                return names.isEmpty ? nil : (index, names)
            }
        }
        return (written, store.shards.contains { shard in shard.dirty.withLock { !$0.isEmpty } })
    }

    /// Writes the sessions `take` names (by shard) in one transaction; returns whether they
    /// were written (false too when a replaced state file could not be put back: `take` is not
    /// called then).
    private func writeChunk(_ take: () -> [(shard: Int, names: Set<String>)]) -> Bool {
        writing.withLock { _ in
            guard restoreFileIfGone() else { return false }
            return write(take(), now: MonotonicClock.now())
        }
    }

    /// Sessions of a round, grouped by shard.
    private static func byShard(_ sessions: ArraySlice<(order: UInt64, session: String, shard: Int)>)
        -> [(shard: Int, names: Set<String>)]
    {
        Dictionary(grouping: sessions, by: \.shard).map { shard, items in (shard, Set(items.map(\.session))) }
    }

    /// Takes up to `limit` names out of `set`.
    private static func take(_ limit: Int, from set: inout Set<String>) -> Set<String> {
        guard set.count > limit else {
            let all = set
            // Room for as many as this round took: a steady rate reuses it, and a service at
            // rest lets go of the room a burst of changes made.
            set = Set(minimumCapacity: all.count)
            return all
        }
        let some = Set(set.prefix(limit))
        set.subtract(some)
        set.releaseSpareRoom()
        return some
    }

    /// Writes `parts` (names by shard) in one transaction; on failure marks them changed again
    /// (the next flush retries) and returns false. Called under `writing`.
    private func write(_ parts: [(shard: Int, names: Set<String>)], now: Int64) -> Bool {
        guard !parts.isEmpty else { return true }  // the callers leave out shards with no names
        // Traced changes made from here on are the next write's.
        let traces = traced?.take(parts.lazy.flatMap(\.names)) ?? [:]
        let records = parts.flatMap { part in
            store.shards[part.shard].records.withLock { records in
                part.names.compactMap { name in records[name].map { (name, $0) } }
            }
        }
        do {
            let encoded = try parkedEncodings.withLock { cache in
                // A worker waiting for this core gets it within half a millisecond (``GiveWay``).
                var giveWay = GiveWay(every: GiveWay.halfAMillisecond)
                return try records.map { name, record in
                    giveWay.step()
                    return (name, record.seq, try record.storedReusingParked(cache[name]))
                }
            }
            let rows = encoded.map { ($0.0, $0.1, $0.2.bytes) }
            try database.write(rows)
            storeAnswered()
            traced?.record(traces, at: WallClock.now())
            // The parked lists' encodings, for the next flush of sessions that keep them.
            parkedEncodings.withLock { cache in
                for (name, _, stored) in encoded {
                    cache[name] = stored.parked.flatMap { $0.list.isEmpty ? nil : $0 }
                }
                cache.releaseSpareRoom()
            }
            if packAfter > 0 {
                candidates.withLock { candidates in
                    for (name, _, _) in rows { candidates.add(name, at: now) }
                }
            }
            return true
        } catch let fenced as FencedWrite {
            // Partitions another instance has claimed: their sessions are its to write now (the
            // lease thread drops them here); the others were written.
            fencedWrites.add(UInt64(fenced.sessions.count), ordering: .relaxed)
            let lost = Set(fenced.sessions)
            traced?.record(traces.filter { !lost.contains($0.key) }, at: WallClock.now())
            traced?.record(traces.filter { lost.contains($0.key) }, at: WallClock.now(), failure: "\(fenced)")
            logger.warning(
                "changes of sessions whose partitions another instance has claimed were not written",
                metadata: ["sessions": "\(fenced.sessions.count)", "reason": "\(fenced)"])
            storeAnswered()
            return true
        } catch {
            for part in parts { store.shards[part.shard].dirty.withLock { $0.formUnion(part.names) } }
            traced?.putBack(traces)
            failedWrites.add(1, ordering: .relaxed)
            writeFailure.withLock {
                $0.failed(
                    "writing \(records.count) sessions to \(database.kind) failed; will retry",
                    metadata: ["error": "\(error)"], logger: logger)
            }
            return false
        }
    }

    /// When the state file was deleted or replaced under the running service, opens it anew and
    /// writes every session into it; returns whether the file is in place (again). Called under
    /// `writing`.
    private func restoreFileIfGone() -> Bool {
        guard !database.isInPlace else { return true }
        fileInPlace.store(false, ordering: .releasing)
        // Said once; while writing it again keeps failing, a line a minute (``RepeatedFailure``).
        reopenFailure.withLock { failure in
            guard !failure.isFailing else { return }
            logger.error(
                "the state file \(database.location) was deleted or replaced while navigatord ran; writing every session to it again"
            )
        }
        do {
            try database.reopen(epoch: store.epoch)
            for shard in store.shards {
                // Changes marked from here on are flushed later; those before are in the copy.
                let dirty = shard.dirty.withLock { dirty in
                    defer { dirty.removeAll(keepingCapacity: true) }
                    return dirty
                }
                do {
                    // Copies out of the lock (their packed bytes stay valid), encoded outside it:
                    // compact ones are decoded and encoded again, which the worker must not wait for.
                    let records = shard.records.withLock { records in records.table.map { ($0.key, $0.value) } }
                    let rows = try records.map { name, record in (name, record.seq, try record.stored()) }
                    try database.write(rows)
                } catch {
                    shard.dirty.withLock { $0.formUnion(dirty) }
                    throw error
                }
            }
        } catch {
            failedWrites.add(1, ordering: .relaxed)
            reopenFailure.withLock {
                $0.failed(
                    "writing the state file again failed; will retry", metadata: ["error": "\(error)"], logger: logger)
            }
            return false
        }
        fileInPlace.store(true, ordering: .releasing)
        reopenFailure.withLock { $0 = RepeatedFailure() }
        logger.notice("the state file \(database.location) holds every session again")
        return true
    }

    /// The last write of each session flushed within the idle time, and the writes in order.
    struct Candidates {
        private var latest: [String: Int64] = [:]
        private var order: [(at: Int64, session: String)] = []
        private var head = 0

        /// A session a flush wrote at `at` (monotonic ns): only its latest write counts.
        mutating func add(_ session: String, at: Int64) {
            latest[session] = at
            order.append((at, session))
        }

        /// The sessions whose latest write is at or before `cutoff`, with its time; they are
        /// forgotten.
        mutating func take(through cutoff: Int64) -> [(session: String, at: Int64)] {
            var due: [(session: String, at: Int64)] = []
            while head < order.count, order[head].at <= cutoff {
                let (at, session) = order[head]
                head += 1
                // An older write of a session written again later is passed over.
                if latest[session] == at {
                    due.append((session, at))
                    latest[session] = nil
                }
            }
            if head == order.count, order.capacity > 4096 {
                // All taken (sessions at rest): let go of the room, not only the entries.
                (order, latest, head) = ([], [:], 0)
            } else if head > 4096, head * 2 > order.count {
                order.removeFirstReleasingRoom(head)
                head = 0
                latest.releaseSpareRoom()
            }
            return due
        }
    }

    /// Packs the sessions that have not changed for ``packAfter`` (see ``SessionStore/Record``):
    /// those a flush wrote at least that long ago and nothing changed since, as the state file
    /// keeps them — encoded again here, out of the shard's lock, from a copy of the unchanged
    /// record (its parked list's encoding reused while the list is unchanged). A session changed
    /// since stays live. Between chunks of 1,024 sessions `between` runs (the flush thread
    /// answers acknowledged requests there). Returns how many were packed.
    @discardableResult
    func compactIdle(now: Int64 = MonotonicClock.now()) -> Int { compactIdle(now: now, between: {}) }

    /// ``compactIdle(now:)``, running `between` between its chunks.
    @discardableResult
    func compactIdle(now: Int64, between: () throws -> Void) rethrows -> Int {
        guard packAfter > 0 else { return 0 }
        let due = candidates.withLock { $0.take(through: now - packAfter) }
        var byShard = Array(repeating: [(session: String, at: Int64)](), count: store.shards.count)
        for entry in due { byShard[store.shardIndex(of: entry.session)].append(entry) }
        var packed = 0
        var failed: [(session: String, error: any Error)] = []
        var chunks = 0
        for (shard, entries) in zip(store.shards, byShard) {
            var start = 0
            while start < entries.count {
                if chunks > 0 { try between() }
                chunks += 1
                // A chunk at a time: the worker waits for this lock.
                let chunk = entries[start..<min(start + 1024, entries.count)]
                start = chunk.endIndex
                // Copies of the records unchanged since their write (a live state is copied on
                // its next change while a copy holds it), encoded outside the lock.
                let idle = shard.records.withLock { records in
                    var idle: [(String, Int64, SessionStore.Record)] = []
                    idle.reserveCapacity(chunk.count)
                    for (name, at) in chunk {
                        if let record = records[name], !record.isPacked, record.changedAt <= at {
                            idle.append((name, at, record))
                        }
                    }
                    return idle
                }
                let cached = parkedEncodings.withLock { cache in idle.map { cache[$0.0] } }
                var encoded: [(name: String, at: Int64, bytes: [UInt8])] = []
                encoded.reserveCapacity(idle.count)
                for ((name, at, record), parked) in zip(idle, cached) {
                    do {
                        encoded.append((name, at, try record.storedReusingParked(parked).bytes))
                    } catch {
                        // Not expected (its last flush encoded the same state): it stays live,
                        // and is looked at again after its next change and flush.
                        failed.append((name, error))
                    }
                }
                let packedNames = shard.records.withLock { records in
                    var names: [String] = []
                    for (name, at, bytes) in encoded {
                        // Changed between the two takings of the lock: stays live.
                        guard let record = records[name], !record.isPacked, record.changedAt <= at else { continue }
                        records.pack(name, bytes)
                        names.append(name)
                    }
                    return names
                }
                packed += packedNames.count
                database.forgetPlaces(of: packedNames)
                parkedEncodings.withLock { cache in
                    for name in packedNames { cache[name] = nil }
                    cache.releaseSpareRoom()
                }
                // Looked at again once what it remembers for a while is past (``forgetPast``).
                let due = now + rememberedFor()
                resting.withLock { resting in for name in packedNames { resting.add(name, due: due) } }
            }
        }
        for (session, error) in failed.prefix(3) {
            logger.error(
                "an idle session could not be encoded to be packed; it stays in memory as it is",
                metadata: ["session": "\(LogText(session))", "error": "\(error)", "sessions": "\(failed.count)"])
        }
        return packed
    }

    /// Packed sessions, each with when what it remembers for a while (intent ids, expired
    /// intents) will be past: the monotonic time it was packed or loaded, plus the window.
    /// Oldest first, so due in order (a reload that shortens the window delays the sessions
    /// queued before it, at most by the old window).
    struct Resting {
        private var queue: [(due: Int64, session: String)] = []
        private var head = 0

        mutating func add(_ session: String, due: Int64) { queue.append((due, session)) }

        /// Up to `limit` sessions due at `now`; they are forgotten here.
        mutating func take(dueBy now: Int64, limit: Int) -> [String] {
            var due: [String] = []
            while head < queue.count, queue[head].due <= now, due.count < limit {
                due.append(queue[head].session)
                head += 1
            }
            if head == queue.count, queue.capacity > 4096 {
                (queue, head) = ([], 0)  // all taken: let go of the room too
            } else if head > 4096, head * 2 > queue.count {
                queue.removeFirstReleasingRoom(head)
                head = 0
            }
            return due
        }
    }

    /// Sessions looked at per round by ``forgetPast(now:)``: each is decoded under its shard's
    /// lock, which the worker waits for.
    static let forgetChunk = 2_048

    /// Packed sessions whose intent ids and expired intents are past the window: they keep
    /// only what lasts (the tree, conditions, parked intents), re-encoded, still packed. One
    /// that still remembers something not yet past (it was loaded within the window) is looked
    /// at again a window later. Returns how many records shrank.
    @discardableResult
    func forgetPast(now: Int64 = MonotonicClock.now(), wallNow: Int64 = WallClock.now()) -> Int {
        let due = resting.withLock { $0.take(dueBy: now, limit: Self.forgetChunk) }
        guard !due.isEmpty else { return 0 }
        let window = rememberedFor()
        var byShard = Array(repeating: [String](), count: store.shards.count)
        for session in due { byShard[store.shardIndex(of: session)].append(session) }
        var shrunk = 0
        var again: [String] = []
        var failed: [(String, any Error)] = []
        for (shard, sessions) in zip(store.shards, byShard) where !sessions.isEmpty {
            shard.records.withLock { records in
                var smaller: [(String, [UInt8])] = []
                for session in sessions {
                    do {
                        // A session changed since is live, and queued again when packed again.
                        guard let result = try records[session]?.forgetPast(now: wallNow, window: window) else {
                            continue
                        }
                        if let bytes = result.bytes { smaller.append((session, bytes)) }
                        if result.remembers { again.append(session) }
                    } catch {
                        failed.append((session, error))  // it stays as it was
                    }
                }
                // Into the shard's arena; the blocks the old bytes leave are compacted later
                // (``compactArenas()``).
                for (session, bytes) in smaller { records.repack(session, bytes) }
                shrunk += smaller.count
            }
        }
        for (session, error) in failed.prefix(3) {
            logger.error(
                "a packed session could not be encoded again without what it no longer remembers; kept as it was",
                metadata: ["session": "\(LogText(session))", "error": "\(error)", "sessions": "\(failed.count)"])
        }
        if !again.isEmpty {
            resting.withLock { resting in for session in again { resting.add(session, due: now + window) } }
        }
        return shrunk
    }

    /// Sessions moved per hold of a shard's lock by ``compactArenas()`` (the worker waits for it).
    static let compactChunk = 4_096

    /// Moves the packed records kept in arena blocks a quarter free or more (their sessions
    /// unpacked, packed again, forgotten or dropped since) to the block being filled, so the
    /// emptied blocks are unmapped (``PackedArena``); returns how many records moved. `atRest`:
    /// the blocks an eighth free or more (``PackedArena/sparse(atRest:)``).
    @discardableResult
    func compactArenas(atRest: Bool = false) -> Int {
        var moved = 0
        for shard in store.shards {
            let sessions = shard.records.withLock { $0.sparseSessions(atRest: atRest) }
            var start = 0
            while start < sessions.count {
                let chunk = sessions[start..<min(start + Self.compactChunk, sessions.count)]
                start = chunk.endIndex
                moved += shard.records.withLock { $0.compact(chunk) }
            }
        }
        return moved
    }

    /// Forgets the sessions of these partitions (another instance's now): their records and
    /// changed marks in the store, and the parked lists' encodings kept for their next write.
    /// Returns how many sessions it dropped.
    @discardableResult
    func drop(partitions: Set<Int32>) -> Int {
        // Not while a write is under way: it read the records before they went and would keep
        // their encodings after.
        writing.withLock { _ in
            let dropped = store.drop(partitions: partitions)
            guard !dropped.isEmpty else { return 0 }
            parkedEncodings.withLock { cache in
                for name in dropped { cache[name] = nil }
                cache.releaseSpareRoom()
            }
            return dropped.count
        }
    }

    /// The sessions whose parked list's encoding is kept for their next write (for tests).
    var sessionsWithParkedEncodings: Set<String> { parkedEncodings.withLock { Set($0.keys) } }

    /// When this store was filled from the file: restored sessions unchanged since count as idle
    /// from then.
    private let restoredAt = MonotonicClock.now()

    /// Forgets the sessions unchanged for `idleFor` nanoseconds, in memory and in the state file
    /// (`sessionIdleExpirySeconds`); returns how many. New sessions then start their seqs beyond
    /// every expired one's, with a gap, so their shells resync.
    @discardableResult
    func expireIdle(after idleFor: Int64, now: Int64 = MonotonicClock.now()) -> Int {
        writing.withLock { _ in
            let (sessions, highest) = store.removeIdle(before: now - idleFor, restoredAt: restoredAt)
            guard !sessions.isEmpty else { return 0 }
            // +1: the next session's first batch is 2 beyond an expired one's last seq, a gap.
            let floor = max(store.seqFloor.load(ordering: .relaxed), highest + 1)
            store.seqFloor.store(floor, ordering: .relaxed)
            parkedEncodings.withLock { cache in
                for name in sessions { cache[name] = nil }
                cache.releaseSpareRoom()
            }
            do {
                try database.expire(sessions, seqFloor: floor)
            } catch let fenced as FencedWrite {
                // Their partitions are another instance's now: its sessions, not deleted.
                fencedWrites.add(UInt64(fenced.sessions.count), ordering: .relaxed)
                logger.warning(
                    "idle sessions whose partitions another instance has claimed were not deleted",
                    metadata: ["sessions": "\(fenced.sessions.count)", "reason": "\(fenced)"])
            } catch {
                logger.error(
                    "expired sessions could not be deleted from \(database.kind); they will load again at the next start",
                    metadata: ["sessions": "\(sessions.count)", "error": "\(error)"])
            }
            logger.info("expired idle sessions", metadata: ["sessions": "\(sessions.count)"])
            return sessions.count
        }
    }

    /// Writes these sessions now, in one transaction (acknowledged requests are durable before
    /// their replies; see ``FlushLoop``). Sessions with nothing to write (gone, or never made)
    /// write nothing, and say nothing of whether a store that was away is back. Throws
    /// ``NotServed`` for a session whose partition changed hands before its write,
    /// ``FencedWrite`` for one another instance claimed meanwhile, and the store's error when it
    /// could not be written.
    func flush(_ sessions: Set<String>) throws {
        try writing.withLock { _ in
            guard restoreFileIfGone() else {
                throw EngineError(
                    .notDurable, "the state file \(database.location) is gone and could not be written again yet")
            }
            let traces = traced?.take(sessions) ?? [:]
            var rows: [(String, UInt64, [UInt8])] = []
            for session in sessions {
                let shard = store.shards[store.shardIndex(of: session)]
                guard let record = shard.records.withLock({ $0[session] }) else {
                    // Several instances: its partition was handed over or lost between the
                    // change and this write; the change is not durable here.
                    if let reason = store.notServed(session) {
                        traced?.record(traces, at: WallClock.now(), failure: "not written: \(reason)")
                        throw NotServed(reason: reason)
                    }
                    continue
                }
                rows.append((session, record.seq, try record.stored()))
            }
            guard !rows.isEmpty else {
                // Nothing reached the store: it says nothing about whether the store answers.
                traced?.record(traces, at: WallClock.now())
                return
            }
            do {
                try database.write(rows)
            } catch let fenced as FencedWrite {
                // The store answered: another instance claimed some of these sessions' partitions.
                traced?.putBack(traces)
                fencedWrites.add(UInt64(fenced.sessions.count), ordering: .relaxed)
                storeAnswered()
                throw fenced
            } catch {
                traced?.putBack(traces)
                failedWrites.add(1, ordering: .relaxed)
                writeFailure.withLock {
                    $0.failed(
                        "writing \(rows.count) sessions before their replies failed; the replies say UNAVAILABLE",
                        metadata: ["error": "\(error)"], logger: logger)
                }
                throw error
            }
            storeAnswered()
            traced?.record(traces, at: WallClock.now())
        }
    }

    /// A change that was not written because its session's partition changed hands between the
    /// change and its write (several instances): not the store failing.
    struct NotServed: Error, CustomStringConvertible {
        let reason: String
        var description: String { "the change was not written: \(reason)" }
    }

    /// The write-behind round: every changed session (between chunks, `between` runs: the flush
    /// thread answers acknowledged requests there), then packing the idle ones.
    ///
    /// A round writes the sessions changed when it begins, `chunk` at a time; those changed
    /// during the round wait for the next one. (A round that went on while anything was changed
    /// never ended under steady load: the flush thread wrote continuously, costing the workers
    /// about 13% of their throughput.)
    func flushAndPack(between: () throws -> Void = {}) rethrows {
        // The round's sessions in the order the database writes fastest, so that each chunk's
        // rows are neighbours there (``StateDatabase/writeOrder(of:)``).
        var round: [(order: UInt64, session: String, shard: Int)] = []
        for (index, shard) in store.shards.enumerated() {
            for session in shard.dirty.withLock({ dirty in Self.take(.max, from: &dirty) }) {
                round.append((database.writeOrder(of: session), session, index))
            }
        }
        round.sort { $0.order < $1.order }
        let wrote = !round.isEmpty
        var start = 0
        while start < round.count {
            let chunk = round[start..<min(start + Self.chunk, round.count)]
            guard writeChunk({ Self.byShard(chunk) }) else {
                // What this round did not write stays marked changed, for the next.
                for part in Self.byShard(round[start...]) {
                    store.shards[part.shard].dirty.withLock { $0.formUnion(part.names) }
                }
                break
            }
            start = chunk.endIndex
            if start < round.count {
                GiveWay.now()
                try between()
            }
        }
        let started = MonotonicClock.now()
        let packed = try compactIdle(now: started, between: between) + forgetPast(now: started)
        let moved = compactArenas()
        let trimmed = MonotonicClock.now()
        // Freed live states sit in pages malloc keeps; hand whole free pages back once a
        // thousand sessions were packed — in one round (after a restart's expiries) or over
        // many (a trickle of expiries packs a few each round, and RSS stayed at its peak).
        let sinceTrim = packedSinceTrim.add(packed, ordering: .relaxed).newValue
        // And when the service comes to rest — a round that wrote and packed nothing after one
        // that did, at most every 10 s (a trickle of changes alternates) — whatever was packed
        // since, with the state file's page cache (~2 MB; the next writes read their pages
        // again).
        let busy = wrote || packed > 0 || moved > 0
        if busy { wasBusy.store(true, ordering: .relaxed) }
        let cameToRest =
            !busy && wasBusy.load(ordering: .relaxed)
            && started - lastRest.load(ordering: .relaxed) >= 10_000_000_000
        if cameToRest {
            wasBusy.store(false, ordering: .relaxed)
            lastRest.store(started, ordering: .relaxed)
            rests.add(1, ordering: .relaxed)
            logger.debug("at rest: the state file's page cache and malloc's free pages given back")
        }
        // At rest the packed sessions are also moved together into as few blocks as they fill
        // (busy, a block keeps up to a quarter free); not counted as busy, so the next round is
        // at rest too.
        let settled = cameToRest ? compactArenas(atRest: true) : 0
        if sinceTrim >= 1000 || cameToRest {
            packedSinceTrim.store(0, ordering: .relaxed)
            if cameToRest { database.releaseMemory() }
            Heap.returnFreePages()
        }
        if packed > 0 || moved > 0 || settled > 0 {
            logger.debug(
                "packed idle sessions",
                metadata: [
                    "sessions": "\(packed)", "moved": "\(moved)", "movedAtRest": "\(settled)",
                    "packMicroseconds": "\((trimmed - started) / 1000)",
                    "trimMicroseconds": "\((MonotonicClock.now() - trimmed) / 1000)",
                ])
        }
    }

    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    func stop() { stopping.store(true, ordering: .releasing) }
}
