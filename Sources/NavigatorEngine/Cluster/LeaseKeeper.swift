import Locking
import Logging
import NavigatorPort
import NavigatorStore
import Synchronization
import ZeroMQ

/// Several instances on one PostgreSQL database: the thread that keeps this instance's partition
/// leases (`nav-leases`). Every round (a fifth of the lease time, 1 s by default) it writes the
/// instance's row, renews its leases, lets go of the partitions it lost (another instance took
/// them after its lease ran out: their sessions are dropped here unwritten, and writes of them
/// are fenced), and moves towards an even share of the partitions among the live instances:
/// claiming free or expired ones (their sessions are loaded before they are served) or handing
/// extra ones over (their changes written first, then released for others to claim at once).
///
/// A graceful stop hands every partition over after the final flush (``handOverAll()``).
final class LeaseKeeper: Sendable {
    let leases: PartitionLeases
    let ownership: PartitionOwnership
    let database: PostgresStateDatabase
    let store: SessionStore
    let persistence: Persistence
    let logger: Logger
    /// What this instance advertises (its endpoints are known once bound).
    let record: @Sendable () -> InstanceRecord
    /// The live instances, as the last round read them.
    let peers: LivePeers
    /// Told of partitions this instance stopped serving (lost or handed over).
    let left: @Sendable (Set<Int32>) -> Void
    /// Told of partitions this instance began serving (claimed, their sessions loaded).
    let joined: @Sendable (Set<Int32>) -> Void
    /// When a round last went through (monotonic ns).
    private let lastRound = Atomic<Int64>(0)
    private let stopping = Atomic<Bool>(false)
    private let thread = Locked<DedicatedThread?>(nil)

    /// Counts failed rounds (``EngineCounters/leaseRenewalsFailed``).
    let counters: EngineCounters?

    init(
        leases: PartitionLeases, database: PostgresStateDatabase, store: SessionStore, persistence: Persistence,
        logger: Logger, peers: LivePeers, left: @escaping @Sendable (Set<Int32>) -> Void,
        joined: @escaping @Sendable (Set<Int32>) -> Void, record: @escaping @Sendable () -> InstanceRecord,
        counters: EngineCounters? = nil
    ) {
        self.counters = counters
        self.peers = peers
        self.left = left
        self.joined = joined
        self.leases = leases
        self.ownership = database.ownership
        self.database = database
        self.store = store
        self.persistence = persistence
        self.logger = logger
        self.record = record
    }

    var interval: Duration { leases.ttl / 5 }

    /// Whether a round went through within the lease time (/readyz).
    var isCurrent: Bool {
        let ttl = leases.ttl.components.seconds * 1_000_000_000 + leases.ttl.components.attoseconds / 1_000_000_000
        return MonotonicClock.now() - lastRound.load(ordering: .relaxed) < ttl
    }

    /// What the last heartbeat advertised: a change (the endpoints bound after the first
    /// round) brings the next round forward.
    private let advertised = Locked<InstanceRecord?>(nil)
    /// Rounds that found partitions held but not served: while claimed partitions keep failing
    /// to load (a degraded database), every round finds the last one's, so the line is logged
    /// once and then at most once a minute, as the failing rounds themselves are.
    private let strays = Locked(RepeatedFailure())
    var live: [InstanceRecord] { peers.list }

    /// One round: heartbeat, renewal, losses, and a step towards an even share.
    func round() throws {
        let me = record()
        let live = try leases.heartbeat(me)
        advertised.withLock { $0 = me }
        peers.list = live
        var renewed = try leases.renew()
        // Held in the table but not here: claimed, and then their sessions did not load. Let go
        // now, or they would count towards the share and nobody serve them.
        let stray = Set(renewed.keys).subtracting(ownership.all.keys)
        if !stray.isEmpty {
            try leases.release(Array(stray))
            for partition in stray { renewed[partition] = nil }
            strays.withLock {
                $0.failed(
                    "released partitions held but not served (claimed earlier, their sessions did not load)",
                    metadata: ["partitions": "\(stray.count)"], level: .warning, logger: logger)
            }
        } else {
            strays.withLock { $0.worked("no partitions held but not served any more", logger: logger) }
        }
        let lost = Set(ownership.all.keys).subtracting(renewed.keys)
        if !lost.isEmpty {
            ownership.remove(lost)
            let dropped = persistence.drop(partitions: lost)
            left(lost)
            logger.warning(
                "partition leases lost (they ran out before renewal); their sessions are another instance's now",
                metadata: ["partitions": "\(lost.count)", "sessions dropped": "\(dropped)"])
        }
        let share = PartitionLeases.share(partitions: leases.partitions, instances: live.count)
        if renewed.count < share {
            let claimed = try leases.claim(atMost: share - renewed.count)
            if !claimed.isEmpty {
                // Held (writes are fenced by these epochs) but served only once loaded.
                ownership.add(claimed)
                let loaded: LoadedRows<(record: SessionStore.Record, remembers: Bool)>
                do {
                    loaded = try database.load(partitions: Array(claimed.keys), persistence.restoring())
                } catch {
                    // Not loaded, so not served: the next round lets them go (the stray ones
                    // above), rather than hold partitions nobody serves.
                    ownership.remove(claimed.keys)
                    throw error
                }
                for (session, reason) in loaded.quarantined {
                    logger.error(
                        "a stored session does not load; moved to the quarantine table of the PostgreSQL database",
                        metadata: ["session": "\(LogText(session))", "reason": "\(LogText(reason))"])
                }
                persistence.load(loaded.rows)
                ownership.serve(claimed.keys)
                joined(Set(claimed.keys))
                logger.info(
                    "claimed partitions",
                    metadata: [
                        "partitions": "\(claimed.count)", "sessions": "\(loaded.rows.count)",
                        "held": "\(renewed.count + claimed.count)", "instances": "\(live.count)",
                    ])
            }
        } else if renewed.count > share {
            let extra = Set(renewed.keys.sorted().suffix(renewed.count - share))
            let sessions = try handOver(extra)
            logger.info(
                "handed partitions over for an even share",
                metadata: [
                    "partitions": "\(extra.count)", "sessions": "\(sessions)", "held": "\(share)",
                    "instances": "\(live.count)",
                ])
        }
        let owners = try leases.owners()
        let endpoints = Dictionary(live.map { ($0.id, $0.clusterEndpoint) }) { first, _ in first }
        ownership.setOthers(
            owners.compactMapValues { owner in
                owner.owner == leases.instance ? nil : (owner.owner, endpoints[owner.owner] ?? "")
            })
        lastRound.store(MonotonicClock.now(), ordering: .relaxed)
    }

    /// Stops serving `partitions`, writes their changed sessions (still under this instance's
    /// leases), releases them and drops their sessions; returns how many sessions it dropped.
    @discardableResult
    func handOver(_ partitions: Set<Int32>) throws -> Int {
        guard !partitions.isEmpty else { return 0 }
        ownership.stopServing(partitions)
        try persistence.flush(store.changed(in: partitions))
        try leases.release(Array(partitions))
        ownership.remove(partitions)
        defer { left(partitions) }
        return persistence.drop(partitions: partitions)
    }

    /// Runs rounds on a thread of its own until ``stop()``; a round that fails is logged and
    /// tried again next time (the database may come back before the leases run out).
    func start() {
        let thread = DedicatedThread(name: "nav-leases") { [self] in
            // Logged once, then at most a line a minute while it lasts (counted every time).
            var failure = RepeatedFailure()
            while !stopping.load(ordering: .acquiring) {
                let started = ContinuousClock.now
                do {
                    try round()
                    failure.worked("partition leases renewed again", logger: logger)
                } catch {
                    counters?.leaseRenewalsFailed.add()
                    failure.failed(
                        "the partition leases could not be renewed; trying again", metadata: ["error": "\(error)"],
                        logger: logger)
                    if !isCurrent, !ownership.all.isEmpty {
                        // The leases ran out meanwhile: another instance may hold them now.
                        let lost = Set(ownership.all.keys)
                        ownership.remove(lost)
                        persistence.drop(partitions: lost)
                        left(lost)
                        logger.critical(
                            "partition leases ran out while the database could not be reached; this instance serves no session until it can claim some again",
                            metadata: ["partitions": "\(lost.count)"])
                    }
                }
                let next = started + interval
                while !stopping.load(ordering: .acquiring), ContinuousClock.now < next,
                    failure.isFailing || advertised.withLock({ $0 }) == record()
                {
                    MonotonicClock.pause(min(next - ContinuousClock.now, .milliseconds(50)))
                }
            }
        }
        self.thread.withLock { $0 = thread }
    }

    /// Ends the rounds (the leases stay held until ``handOverAll()`` or until they run out).
    func stop() {
        stopping.store(true, ordering: .releasing)
        let thread = self.thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        thread?.join()
    }

    /// A graceful stop, after the final flush: releases every partition (others claim them at
    /// once) and removes this instance's row.
    func handOverAll() {
        do {
            let held = Set(ownership.all.keys)
            let sessions = try handOver(held)
            try leases.leave()
            logger.info(
                "handed every partition over", metadata: ["partitions": "\(held.count)", "sessions": "\(sessions)"])
        } catch {
            logger.error(
                "handing the partitions over failed; other instances take them once the leases run out",
                metadata: ["error": "\(error)"])
        }
        leases.close()
    }
}

/// The live instances of a deployment, as the lease thread last read them.
final class LivePeers: Sendable {
    private let value = Locked<[InstanceRecord]>([])
    var list: [InstanceRecord] {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}
