import Logging
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes sessions from the store to the state file: behind, in batches, for fire-and-forget
/// work; at once for a session whose acknowledged request is about to be answered.
///
/// Copying a record and writing it happen under one lock, so writes reach the file in the order
/// the copies were taken: a batch flush can never put an older copy over a newer one.
final class Persistence: Sendable {
    let file: StateFile
    let store: SessionStore
    let logger: Logger
    /// Nanoseconds a session stays unchanged before it is packed (see ``compactIdle(now:)``);
    /// 0: never.
    let packAfter: Int64
    private let writing = Mutex(())
    private let stopping = Atomic<Bool>(false)
    /// The sessions each flush wrote and when, oldest first: candidates for packing.
    private let rounds = Mutex<[Round]>([])

    init(file: StateFile, store: SessionStore, packAfter: Duration = .zero, logger: Logger) {
        self.file = file
        self.store = store
        self.packAfter = packAfter.components.seconds * 1_000_000_000 + packAfter.components.attoseconds / 1_000_000_000
        self.logger = logger
    }

    /// Puts every stored session into the store; returns how many.
    func restore() throws -> Int {
        let records = try file.loadAll()
        store.load(records)
        return records.count
    }

    /// Writes every session changed since the last flush. On failure the sessions stay marked
    /// changed and the next flush tries again.
    func flushChanged() {
        writing.withLock { _ in
            let now = MonotonicClock.now()
            for (index, shard) in store.shards.enumerated() {
                let names = shard.dirty.withLock { dirty in
                    defer { dirty.removeAll(keepingCapacity: true) }
                    return dirty
                }
                guard !names.isEmpty else { continue }
                let records = shard.records.withLock { records in
                    names.compactMap { name in records[name].map { (name, $0) } }
                }
                do {
                    let rows = try records.map { name, record in (name, record.seq, try record.stored()) }
                    try file.write(rows)
                    if packAfter > 0 {
                        // What was written is what a session unchanged since will be packed as.
                        let written = rows.map { ($0.0, $0.2) }
                        rounds.withLock { $0.append(Round(at: now, shard: index, sessions: written)) }
                    }
                } catch {
                    shard.dirty.withLock { $0.formUnion(names) }
                    logger.error(
                        "writing \(records.count) sessions to the state file failed; will retry",
                        metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Sessions one flush wrote from one shard, with the bytes written.
    struct Round {
        var at: Int64
        var shard: Int
        var sessions: [(String, [UInt8])]
    }

    /// Packs the sessions that have not changed for ``packAfter`` (see ``SessionStore/Record``):
    /// those a flush wrote at least that long ago and nothing changed since, with the bytes that
    /// flush wrote (no second encoding). A session changed since stays live. Returns how many
    /// were packed.
    @discardableResult
    func compactIdle(now: Int64 = MonotonicClock.now()) -> Int {
        guard packAfter > 0 else { return 0 }
        let cutoff = now - packAfter
        let due = rounds.withLock { rounds in
            let count = rounds.prefix { $0.at <= cutoff }.count
            defer { rounds.removeFirst(count) }
            return Array(rounds.prefix(count))
        }
        var packed = 0
        for round in due {
            let shard = store.shards[round.shard]
            var start = 0
            while start < round.sessions.count {
                // A chunk at a time: the worker waits for this lock.
                let chunk = round.sessions[start..<min(start + 1024, round.sessions.count)]
                start = chunk.endIndex
                packed += shard.records.withLock { records in
                    var count = 0
                    for (name, bytes) in chunk {
                        guard let record = records[name], !record.isPacked, record.changedAt <= round.at else {
                            continue
                        }
                        records[name]?.pack(bytes)
                        count += 1
                    }
                    return count
                }
            }
        }
        return packed
    }

    /// Writes one session now (an acknowledged request is durable before its reply).
    func flush(_ session: String) throws {
        try writing.withLock { _ in
            let shard = store.shards[store.shardIndex(of: session)]
            guard let record = shard.records.withLock({ $0[session] }) else { return }
            try file.write([(session, record.seq, try record.stored())])
        }
    }

    /// Flushes every `interval` on a thread of its own until ``stop()``.
    func startFlushing(every interval: Duration) -> DedicatedThread {
        DedicatedThread(name: "nav-flush") { [self] in
            let step = Duration.milliseconds(5)
            var waited = Duration.zero
            while !stopping.load(ordering: .acquiring) {
                Self.sleep(step)
                waited += step
                if waited >= interval {
                    flushChanged()
                    let started = MonotonicClock.now()
                    let packed = compactIdle()
                    let trimmed = MonotonicClock.now()
                    // Freed live states sit in pages malloc keeps; hand whole free pages back.
                    if packed >= 1000 { Heap.returnFreePages() }
                    if packed > 0 {
                        logger.debug(
                            "packed idle sessions",
                            metadata: [
                                "sessions": "\(packed)", "packMicroseconds": "\((trimmed - started) / 1000)",
                                "trimMicroseconds": "\((MonotonicClock.now() - trimmed) / 1000)",
                            ])
                    }
                    waited = .zero
                }
            }
        }
    }

    func stop() { stopping.store(true, ordering: .releasing) }

    private static func sleep(_ duration: Duration) {
        let nanoseconds = duration.components.attoseconds / 1_000_000_000 + duration.components.seconds * 1_000_000_000
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 { request = remaining }
    }
}
