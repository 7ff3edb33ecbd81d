import Locking
import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorYAML
import ServiceLifecycle
import Synchronization
import Tracing
import ZeroMQ

/// The Navigator engine: intents in over ZeroMQ (and, through ``NavigatorPort``, from the edges
/// in process), command batches out to subscribed shells and followers.
///
/// Its parts are swift-service-lifecycle services in one `ServiceGroup` (``Parts.swift``), in
/// start order: ZAP (secure mode), flush (the only writer of the state file; it also makes
/// replies to acknowledged requests durable before passing them on), egress (binds the XPUB and
/// keeps its subscriptions; workers publish onto it themselves), workers (one per shard of
/// sessions; worker 0 also reads the intents PULL), requests (ROUTER and the calls made in
/// process), and a gate. Each socket loop runs on a thread of its own. Graceful shutdown stops
/// them in reverse: the gate turns ``readiness`` to not ready, intake and requests stop taking
/// work, workers finish what they were given and publish the last of it, egress closes the XPUB,
/// the flush thread writes what is left; past `shutdownTimeoutSeconds` the context is shut down
/// and every socket closes. A part that fails stops the group the same way, and ``run()`` throws
/// which part and why.
public final class Engine: Service, Sendable {
    public let configuration: EngineConfiguration
    let logger: Logger
    let context: Context
    /// The commands XPUB: egress binds it and reads its subscriptions; workers publish onto it
    /// directly, under its lock (no thread between them and the shells).
    let commands: SharedSocket
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: EngineCounters
    let persistence: Persistence
    /// Where spans of traced intents go; nil: none are traced.
    let tracer: (any Tracer)?
    /// This process's claim on the data directory (SQLite store), from `init` to the end of
    /// `stop()`; nil with PostgreSQL, whose instance lock is the database's.
    let directoryLock: DataDirectoryLock?
    let bound: BindingRecord
    /// Calls made in process (``NavigatorPort``), admitted by the requests thread.
    let desk: CallDesk
    /// The flight recorder, one part a worker (``FlightRecorder``); the thread that checks
    /// candidate route maps and replays the recorder against them.
    let recorders: [FlightRecorder]
    /// Each worker's state and sockets, under a lock: worker 0 resolves another's intents while it sleeps.
    let workerDesks: [WorkerDesk]
    let routeMapDesk: RouteMapDesk
    /// The staged rollout of a route map: kept in the store, followed by a thread of its own.
    let rolloutKeeper: RolloutKeeper
    /// Follows made in process (``NavigatorPort/follow(_:as:_:)``).
    let follows: SessionFollows
    let callCounter = Atomic<UInt64>(0)
    /// Several instances: the live instances, as the lease thread last read them.
    let livePeers: LivePeers
    /// Set once the service stops: no new follow.
    let followsClosed = Atomic<Bool>(false)
    /// Hears of any thread that fails; `run()` then stops the service and throws.
    let supervisor: Supervisor
    let startedAt = WallClock.now()
    let lifecycle = Locked(Lifecycle.initial)
    /// Whether every part opened and the engine has not begun to stop (``readiness``).
    let ready = Atomic<Bool>(false)
    /// Sessions in the state file's quarantine table (rows that did not load).
    let quarantinedSessions: Int
    /// Several instances (PostgreSQL store): the thread that keeps this instance's partition
    /// leases; nil with SQLite.
    let leaseKeeper: LeaseKeeper?

    enum Lifecycle {
        case initial
        /// Its group was made (``run()`` runs it).
        case claimed
        /// Started in the background by ``start()``.
        case running(ServiceGroup, Task<Void, any Error>)
        case stopped
    }
    /// Parts that report when they have opened: all but the gate.
    let partsReady: PartsReady
    /// The resident-memory ceiling (``MemoryGuard``), read once at start.
    let memory: MemoryGuard
    /// Secure mode (CURVE + ZAP): the server's keys and the access list; nil without security.
    public let security: Security?
    /// Secure mode: ready once the ZAP handler answers; the other parts wait for it.
    let zapReady = PartsReady(expected: 1)
    let shutdownRecord = ShutdownRecord()

    /// Builds the service: loads and checks the route map; opens nothing yet.
    /// `tracer`: where the spans of traced intents go (``IntentTrace``; navigatord gives
    /// OpenTelemetry's when the OTEL_ variables ask for traces); nil: intents are not traced.
    public init(configuration: EngineConfiguration, tracer: (any Tracer)? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.tracer = tracer
        self.logger = logger
        let bound = BindingRecord()
        self.bound = bound
        supervisor = Supervisor { [logger] failure in
            logger.critical(
                "a part of navigatord failed; navigatord stops (state is flushed) and exits non-zero",
                metadata: ["part": "\(failure.part)", "reason": "\(LogText(failure.reason))"])
        }
        try configuration.checkExposure()
        if let secretKeyFile = configuration.secretKeyFile, let accessFile = configuration.accessFile {
            security = try Security.load(secretKeyFile: secretKeyFile, accessFile: accessFile)
        } else {
            security = nil
        }
        // The route map first: a map that does not load is refused before any file is touched.
        var (resolver, source, version) = try Self.loadResolver(configuration)
        counters = EngineCounters(
            workers: configuration.workers, landingWindow: .seconds(configuration.landingWindowSeconds))
        let database: any StateDatabase
        var cluster: PostgresStateDatabase? = nil
        switch configuration.store {
        case .sqlite:
            directoryLock = try DataDirectoryLock(directory: configuration.dataDirectory)
            database = try StateFile(directory: configuration.dataDirectory)
        case .postgresql(let url):
            directoryLock = nil
            // A stalled transaction lets go of its locks well before its instance's leases run out.
            cluster = try PostgresStateDatabase(
                url: url, instance: configuration.instanceID,
                transactionIdleLimit: .seconds(configuration.leaseSeconds) / 2)
            database = cluster!
        }
        // One instance: the run's epoch (continued after a clean stop). Several: each partition's
        // lease epoch.
        let (epoch, continued) = cluster == nil ? try database.beginRun() : (0, false)
        resolver.options.dedupKey = database.dedupKey
        resolvers = ResolverHolder(.init(resolver: resolver, source: source, version: version))
        let holder = resolvers
        store = SessionStore(shards: configuration.workers, epoch: epoch, ownership: cluster?.ownership) {
            holder.snapshot.pick($0).resolver.initialState()
        }
        persistence = Persistence(
            database: database, store: store, packAfter: .seconds(configuration.packIdleAfterSeconds),
            rememberedFor: { holder.resolver.options.dedupWindow },
            traced: tracer.map { _ in TracedWrites(store: cluster == nil ? "sqlite" : "postgresql") },
            logger: logger)
        let remote: RemoteFollows?
        if cluster != nil {
            // Sessions another instance serves are followed through a peer's sockets, as this
            // instance (its key pair, in secure mode).
            let (instance, keys, peers) = (configuration.instanceID, security?.serverKeys, LivePeers())
            // 2 topics a session (batches, rejections), and room for a few more, within what a
            // peer takes from one subscriber (the instances of a deployment share settings).
            let capacity = max(1, (configuration.maxSubscriptionsPerPeer - 10) / 2)
            remote = RemoteFollows(capacity: capacity, logger: logger) {
                guard
                    let peer = peers.list.first(where: {
                        $0.id != instance && !$0.requestEndpoints.isEmpty && !$0.commandEndpoints.isEmpty
                    })
                else { return nil }
                return ServerEndpoints(
                    intents: "", requests: peer.requestEndpoints[0], commands: peer.commandEndpoints[0],
                    curve: keys.map { CurveCredentials(keys: $0, serverKey: $0.publicKey) })
            }
            livePeers = peers
        } else {
            remote = nil
            livePeers = LivePeers()
        }
        rolloutKeeper = RolloutKeeper(
            holder: holder, database: database, metrics: counters.routes, instance: configuration.instanceID,
            shared: cluster != nil, logger: logger, failures: counters.rolloutStoreFailures)
        rolloutKeeper.restore()  // a restart keeps the split
        let follows = SessionFollows(store: store, remote: remote, logger: logger)
        self.follows = follows
        if let cluster, case .postgresql(let url) = configuration.store {
            quarantinedSessions = try database.quarantinedCount()
            // Sessions load as their partitions are claimed (``LeaseKeeper``).
            let (store, persistence, bound) = (self.store, self.persistence, self.bound)
            let instance = configuration.instanceID
            leaseKeeper = LeaseKeeper(
                leases: PartitionLeases(
                    url: url, instance: instance, partitions: cluster.partitions,
                    ttl: .seconds(configuration.leaseSeconds)),
                database: cluster, store: store, persistence: persistence, logger: logger,
                peers: livePeers, left: { partitions in follows.stoppedServing(partitions) },
                joined: { partitions in follows.startedServing(partitions) },
                record: { [advertiseHost = configuration.advertiseHost] in
                    let endpoints = bound.current
                    return InstanceRecord(
                        id: instance,
                        clusterEndpoint: endpoints.cluster.map { Self.advertised($0, host: advertiseHost) } ?? "",
                        requestEndpoints: endpoints.requests.map { Self.advertised($0, host: advertiseHost) },
                        commandEndpoints: endpoints.commands.map { Self.advertised($0, host: advertiseHost) })
                }, counters: counters)
            logger.info(
                "sessions in \(database.location), shared by partition leases",
                metadata: [
                    "instance": "\(instance)", "partitions": "\(cluster.partitions)",
                    "lease": "\(configuration.leaseSeconds) s",
                ])
        } else {
            leaseKeeper = nil
            let (restored, quarantined) = try persistence.restore()
            for (session, reason) in quarantined {
                logger.error(
                    "a stored session does not load; moved to the quarantine table of \(database.kind)",
                    metadata: ["session": "\(LogText(session))", "reason": "\(LogText(reason))"])
            }
            quarantinedSessions = try database.quarantinedCount()
            if restored > 0 {
                logger.info(
                    "restored \(restored) sessions from \(database.location)",
                    metadata: [
                        "epoch": "\(epoch)",
                        "seqs":
                            "\(continued ? "continue (the last run stopped cleanly)" : "start a new epoch (the last run did not stop cleanly)")",
                    ])
            }
        }
        // One I/O thread: secure mode's ConnectionLedger relies on it (a connection's accepted
        // event always before its disconnected event).
        context = try Context(ioThreads: 1)
        commands = try SharedSocket(context, type: .xpub)
        desk = try CallDesk(context: context, highWaterMark: configuration.handoffHighWaterMark)
        let share = (configuration.flightRecorderIntents + configuration.workers - 1) / max(1, configuration.workers)
        recorders = (0..<configuration.workers).map { _ in FlightRecorder(capacity: share) }
        workerDesks = (0..<configuration.workers).map { _ in WorkerDesk() }
        routeMapDesk = RouteMapDesk(context: context, logger: logger)

        memory = MemoryGuard(megabytes: configuration.maxMemoryMegabytes)
        // ZAP (secure mode), the memory ceiling's watch (when there is a ceiling), flush, egress,
        // each worker, requests.
        partsReady = PartsReady(
            expected: (security == nil ? 0 : 1) + (memory.limit == nil ? 0 : 1) + 3 + configuration.workers)
    }

    /// A bound endpoint as other machines reach it: an endpoint bound to every interface
    /// (`tcp://0.0.0.0:7404`) names `host` (the host name when empty) instead.
    static func advertised(_ endpoint: String, host: String) -> String {
        for any in ["tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"] where endpoint.hasPrefix(any) {
            let name = host.isEmpty ? EngineConfiguration.hostName : host
            return "tcp://\(name):" + endpoint.dropFirst(any.count)
        }
        return endpoint
    }

    /// The live instances: with PostgreSQL as the lease thread last read them; with SQLite,
    /// this one.
    var instances: [InstanceRecord] {
        if let leaseKeeper { return leaseKeeper.live }
        let endpoints = bound.current
        return [
            InstanceRecord(
                id: configuration.instanceID, clusterEndpoint: "",
                requestEndpoints: endpoints.requests.map { Self.advertised($0, host: configuration.advertiseHost) },
                commandEndpoints: endpoints.commands.map { Self.advertised($0, host: configuration.advertiseHost) })
        ]
    }

    /// The endpoints bound, with real ports for `tcp://host:*` (known once started).
    public var endpoints: BoundEndpoints { bound.current }

    /// The route map in use and where it came from.
    public var routeMap: (map: RouteMap, source: String) {
        let current = resolvers.snapshot
        return (current.resolver.map, current.source)
    }
}
