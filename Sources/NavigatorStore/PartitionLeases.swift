import Locking
import NavigatorCore
import Postgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What an instance says about itself in `navigator_instances`: where peers forward to it and
/// where clients and shells reach it.
public struct InstanceRecord: Hashable, Sendable {
    public var id: String
    public var clusterEndpoint: String
    public var requestEndpoints: [String]
    public var commandEndpoints: [String]

    public init(id: String, clusterEndpoint: String, requestEndpoints: [String], commandEndpoints: [String]) {
        self.id = id
        self.clusterEndpoint = clusterEndpoint
        self.requestEndpoints = requestEndpoints
        self.commandEndpoints = commandEndpoints
    }
}

/// The partition leases of a PostgreSQL store, as one instance sees and changes them: its own
/// connection, used by the lease thread only.
///
/// A lease row says which instance owns a partition, until when, and its epoch: every claim
/// raises it, so it is the fencing token of writes (``PostgresStateDatabase/write(_:)`` writes a
/// session only while its partition's row still names this instance with the epoch it claimed)
/// and the stream epoch of the partition's sessions. Expiry is the database's clock, so the
/// instances' clocks need not agree.
public final class PartitionLeases: Sendable {
    public let instance: String
    public let partitions: Int
    /// How long a lease lasts without renewal.
    public let ttl: Duration
    private let url: String
    private let location: String
    private let connection: Locked<PostgresConnection?>
    /// This process's mark in its instance row: a row of the same id with another token is
    /// another process (a predecessor that died, or a second instance given the same id).
    public let token = Int64.random(in: 1...Int64.max)

    public init(url: String, instance: String, partitions: Int, ttl: Duration) {
        self.url = url
        self.instance = instance
        self.partitions = partitions
        self.ttl = ttl
        location = PostgresConnection.redact(url)
        connection = Locked(nil)
    }

    private var ttlMilliseconds: Int64 {
        ttl.components.seconds * 1000 + ttl.components.attoseconds / 1_000_000_000_000_000
    }

    private func using<R>(_ body: (PostgresConnection) throws -> R) throws -> R {
        try connection.withLock { current in
            let connection: PostgresConnection
            if let current, current.isOpen {
                connection = current
            } else {
                current = nil
                do {
                    connection = try PostgresConnection(url: url, applicationName: "navigatord-leases")
                } catch let error as PostgresError {
                    throw StoreError(.unavailable, error.message)
                }
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

    /// Writes this instance's row with a fresh expiry; returns every live instance, this one
    /// included, by id.
    public func heartbeat(_ me: InstanceRecord) throws -> [InstanceRecord] {
        try using { connection in
            // The rows of instances that died without handing over (kill -9, a lost machine, a
            // pod's random name never seen again) go an hour after they ran out: else the table
            // gained one for each, for the life of the database, read whole every second.
            try connection.execute(
                "DELETE FROM navigator_instances WHERE expires_at < now() - interval '1 hour' AND id <> $1",
                [.text(me.id)])
            try connection.execute(
                """
                INSERT INTO navigator_instances (id, token, cluster_endpoint, request_endpoints, command_endpoints, expires_at)
                    VALUES ($1, $6, $2, $3, $4, now() + $5 * interval '1 millisecond')
                ON CONFLICT (id) DO UPDATE SET token = excluded.token, cluster_endpoint = excluded.cluster_endpoint,
                    request_endpoints = excluded.request_endpoints, command_endpoints = excluded.command_endpoints,
                    expires_at = excluded.expires_at
                """,
                [
                    .text(me.id), .text(me.clusterEndpoint), .text(me.requestEndpoints.joined(separator: ",")),
                    .text(me.commandEndpoints.joined(separator: ",")), .int64(ttlMilliseconds), .int64(token),
                ])
            let rows = try connection.execute(
                """
                SELECT id, cluster_endpoint, request_endpoints, command_endpoints FROM navigator_instances
                    WHERE expires_at > now() ORDER BY id
                """)
            return try (0..<rows.count).map { row in
                InstanceRecord(
                    id: try rows[row, 0].text(), clusterEndpoint: try rows[row, 1].text(),
                    requestEndpoints: try rows[row, 2].text().split(separator: ",").map(String.init),
                    commandEndpoints: try rows[row, 3].text().split(separator: ",").map(String.init))
            }
        }
    }

    /// Before the first round: waits until no other live process uses this instance id (a
    /// predecessor killed less than a lease ago: its row runs out), refusing if one keeps it
    /// alive (a second instance with the same id); then releases the leases the id still holds
    /// (the predecessor's sessions load anew, at new epochs, when claimed).
    public func join() throws {
        let deadline = ContinuousClock.now + ttl + .seconds(2)
        var lastExpiry: Int64? = nil
        while true {
            let live = try using { connection in
                try connection.execute(
                    """
                    SELECT (extract(epoch FROM expires_at) * 1000)::bigint FROM navigator_instances
                        WHERE id = $1 AND token <> $2 AND expires_at > now()
                    """, [.text(instance), .int64(token)])
            }
            guard !live.isEmpty else { break }
            let expiry = try live[0, 0].int64()
            if let lastExpiry, expiry > lastExpiry {
                throw StoreError(
                    .invalidSetting,
                    "instance id \(instance) is in use by another running navigatord (its row in navigator_instances is being renewed); expected a unique --instance-id per instance"
                )
            }
            lastExpiry = expiry
            guard ContinuousClock.now < deadline else {
                throw StoreError(
                    .invalidSetting, "instance id \(instance): the previous process's row did not run out in time")
            }
            Self.pause(.milliseconds(100))
        }
        _ = try using { connection in
            try connection.execute(
                "UPDATE navigator_leases SET owner = NULL, expires_at = now() WHERE owner = $1", [.text(instance)])
        }
    }

    private static func pause(_ duration: Duration) {
        let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        _ = nanosleep(&request, nil)
    }

    /// Extends the leases this instance holds that have not run out; returns them (partition ->
    /// epoch). A lease that ran out is not extended, even if nobody took it: the instance lost
    /// it and must claim it again (with a new epoch) to serve its sessions.
    public func renew() throws -> [Int32: UInt64] {
        try using { connection in
            try Self.leases(
                connection.execute(
                    """
                    UPDATE navigator_leases SET expires_at = now() + $2 * interval '1 millisecond'
                        WHERE owner = $1 AND expires_at > now()
                    RETURNING partition, epoch
                    """, [.text(instance), .int64(ttlMilliseconds)]))
        }
    }

    /// Claims up to `count` partitions that are free or whose lease ran out, lowest first;
    /// returns them with their new epochs. Instances claiming at once take different rows (SKIP
    /// LOCKED).
    public func claim(atMost count: Int) throws -> [Int32: UInt64] {
        guard count > 0 else { return [:] }
        return try using { connection in
            try Self.leases(
                connection.execute(
                    """
                    UPDATE navigator_leases SET owner = $1, epoch = epoch + 1,
                        expires_at = now() + $2 * interval '1 millisecond'
                    WHERE partition IN (
                        SELECT partition FROM navigator_leases WHERE owner IS NULL OR expires_at <= now()
                            ORDER BY partition LIMIT $3 FOR UPDATE SKIP LOCKED)
                    RETURNING partition, epoch
                    """, [.text(instance), .int64(ttlMilliseconds), .int64(Int64(count))]))
        }
    }

    /// Gives partitions up, free for any instance at once (their sessions were written first).
    public func release(_ partitions: [Int32]) throws {
        guard !partitions.isEmpty else { return }
        _ = try using { connection in
            try connection.execute(
                "UPDATE navigator_leases SET owner = NULL, expires_at = now() WHERE owner = $1 AND partition = ANY($2)",
                [.text(instance), .int32Array(partitions)])
        }
    }

    /// Removes this instance's row (a graceful stop, after releasing its partitions).
    public func leave() throws {
        _ = try using { connection in
            try connection.execute("DELETE FROM navigator_instances WHERE id = $1", [.text(instance)])
        }
    }

    /// Who owns each partition now (live leases only): partition -> (instance, epoch).
    public func owners() throws -> [Int32: (owner: String, epoch: UInt64)] {
        try using { connection in
            let rows = try connection.execute(
                "SELECT partition, owner, epoch FROM navigator_leases WHERE owner IS NOT NULL AND expires_at > now()")
            var owners: [Int32: (owner: String, epoch: UInt64)] = [:]
            for row in 0..<rows.count {
                owners[try rows[row, 0].int32()] = (
                    try rows[row, 1].text(), UInt64(bitPattern: try rows[row, 2].int64())
                )
            }
            return owners
        }
    }

    public func close() { connection.withLock { $0 = nil } }

    private static func leases(_ rows: PostgresRows) throws -> [Int32: UInt64] {
        var leases: [Int32: UInt64] = [:]
        for row in 0..<rows.count { leases[try rows[row, 0].int32()] = UInt64(bitPattern: try rows[row, 1].int64()) }
        return leases
    }

    /// How many partitions an instance should hold when `instances` are live: an even share,
    /// rounded up (so every partition finds an owner).
    public static func share(partitions: Int, instances: Int) -> Int {
        let instances = max(instances, 1)
        return (partitions + instances - 1) / instances
    }
}

/// The partitions this instance owns now, with the epochs it claimed them at: the lease thread
/// changes it, the workers, the flush thread and the requests thread read it.
public final class PartitionOwnership: Sendable {
    public let instance: String
    public let partitions: Int
    /// The leases held: partition -> epoch (what writes are fenced by).
    private let held = Locked<[Int32: UInt64]>([:])
    /// The partitions whose sessions this instance works on: held, loaded and not being
    /// released.
    private let serving = Locked<Set<Int32>>([])
    /// The owners of the partitions this instance does not serve, as last read, with where
    /// they take forwarded messages ("" if they do not).
    private let others = Locked<[Int32: (owner: String, endpoint: String)]>([:])

    public init(instance: String, partitions: Int) {
        self.instance = instance
        self.partitions = partitions
    }

    /// The partition of a session: FNV-1a of its id's UTF-8 bytes modulo the partition count,
    /// stable across runs and instances.
    public func partition(of session: String) -> Int32 {
        Int32(StableHash.bucket(of: session, count: partitions))
    }

    /// The epoch this instance holds `partition` at, or nil if it does not own it.
    public func epoch(of partition: Int32) -> UInt64? { held.withLock { $0[partition] } }

    public var all: [Int32: UInt64] { held.withLock { $0 } }

    public func add(_ leases: [Int32: UInt64]) { held.withLock { $0.merge(leases) { _, new in new } } }

    public func remove(_ partitions: some Sequence<Int32>) {
        let partitions = Set(partitions)
        serving.withLock { $0.subtract(partitions) }
        held.withLock { held in for partition in partitions { held[partition] = nil } }
    }

    public func serves(_ partition: Int32) -> Bool { serving.withLock { $0.contains(partition) } }

    public var served: Set<Int32> { serving.withLock { $0 } }

    /// Starts (or stops) working on these partitions' sessions.
    public func serve(_ partitions: some Sequence<Int32>) { serving.withLock { $0.formUnion(partitions) } }
    public func stopServing(_ partitions: some Sequence<Int32>) { serving.withLock { $0.subtract(partitions) } }

    /// Who owns the partitions this instance does not (from the lease thread's last reading).
    public func setOthers(_ owners: [Int32: (owner: String, endpoint: String)]) { others.withLock { $0 = owners } }

    /// The instance that owns `session`'s partition, if another instance does (from the lease
    /// thread's last reading): a `MOVED` refusal names it.
    public func owner(of session: String) -> String? {
        let partition = partition(of: session)
        guard !serves(partition), let owner = others.withLock({ $0[partition]?.owner }), owner != instance else {
            return nil
        }
        return owner
    }

    /// Where to forward a message for `session`: its owner's cluster endpoint, if another
    /// instance owns it and takes forwarded messages; nil when this instance serves it, or
    /// nobody does right now.
    public func forwardEndpoint(of session: String) -> String? {
        let partition = partition(of: session)
        guard !serves(partition), let other = others.withLock({ $0[partition] }), other.owner != instance,
            !other.endpoint.isEmpty
        else { return nil }
        return other.endpoint
    }

    /// The cluster endpoints of the instances that own partitions now (a peer that left is
    /// no longer among them once the lease thread read the leases again).
    public var peerEndpoints: Set<String> {
        others.withLock { Set($0.values.map(\.endpoint).filter { !$0.isEmpty }) }
    }

    public func whyNotServed(_ partition: Int32, session: String) -> String {
        if let owner = others.withLock({ $0[partition]?.owner }), owner != instance {
            return
                "session \(session) is in partition \(partition), which instance \(owner) serves; this is \(instance). Nothing was changed: send it there, or retry"
        }
        return
            "session \(session) is in partition \(partition), which is changing hands (no instance serves it right now). Nothing was changed: retry shortly"
    }
}

/// Writes that were not applied because their partitions' leases are no longer this
/// instance's (another instance claimed them): the rest of the batch was written.
public struct FencedWrite: Error, CustomStringConvertible {
    public var sessions: [String]
    public var partitions: Set<Int32>

    public var description: String {
        "\(sessions.count) sessions of partitions \(partitions.sorted().map(String.init).joined(separator: ", ")) were not written: this instance no longer holds their leases (fenced)"
    }
}
