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
    private let writing = Mutex(())
    private let stopping = Atomic<Bool>(false)

    init(file: StateFile, store: SessionStore, logger: Logger) {
        self.file = file
        self.store = store
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
            for shard in store.shards {
                let names = shard.dirty.withLock { dirty in
                    defer { dirty.removeAll(keepingCapacity: true) }
                    return dirty
                }
                guard !names.isEmpty else { continue }
                let records = shard.records.withLock { records in
                    names.compactMap { name in records[name].map { (name, $0) } }
                }
                do {
                    try file.write(records)
                } catch {
                    shard.dirty.withLock { $0.formUnion(names) }
                    logger.error(
                        "writing \(records.count) sessions to the state file failed; will retry",
                        metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Writes one session now (an acknowledged request is durable before its reply).
    func flush(_ session: String) throws {
        try writing.withLock { _ in
            let shard = store.shards[store.shardIndex(of: session)]
            guard let record = shard.records.withLock({ $0[session] }) else { return }
            try file.write([(session, record)])
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
