import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorYAML
import ServiceLifecycle
import Synchronization
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
    let counters: ServiceCounters
    let persistence: Persistence
    /// This process's claim on the data directory (SQLite store), from `init` to the end of
    /// `stop()`; nil with PostgreSQL, whose instance lock is the database's.
    let directoryLock: DataDirectoryLock?
    let bound: BindingRecord
    /// Calls made in process (``NavigatorPort``), admitted by the requests thread.
    let desk: CallDesk
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
    private let lifecycle = Mutex(Lifecycle.initial)
    /// Whether every part opened and the engine has not begun to stop (``readiness``).
    private let ready = Atomic<Bool>(false)
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
    private let partsReady: PartsReady
    /// Secure mode (CURVE + ZAP): the server's keys and the access list; nil without security.
    public let security: Security?
    /// Secure mode: ready once the ZAP handler answers; the other parts wait for it.
    private let zapReady = PartsReady(expected: 1)
    private let shutdownRecord = ShutdownRecord()

    /// Builds the service: loads and checks the route map; opens nothing yet.
    public init(configuration: EngineConfiguration, logger: Logger) throws {
        self.configuration = configuration
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
        var (resolver, source) = try Self.loadResolver(configuration)
        counters = ServiceCounters(workers: configuration.workers)
        let database: any StateDatabase
        var cluster: PostgresStateDatabase? = nil
        switch configuration.store {
        case .sqlite:
            directoryLock = try DataDirectoryLock(directory: configuration.dataDirectory)
            database = try StateFile(directory: configuration.dataDirectory)
        case .postgresql(let url):
            directoryLock = nil
            cluster = try PostgresStateDatabase(url: url, instance: configuration.instanceID)
            database = cluster!
        }
        // One instance: the run's epoch (continued after a clean stop). Several: each partition's
        // lease epoch.
        let (epoch, continued) = cluster == nil ? try database.beginRun() : (0, false)
        resolver.options.dedupKey = database.dedupKey
        resolvers = ResolverHolder(resolver, source: source)
        let holder = resolvers
        store = SessionStore(shards: configuration.workers, epoch: epoch, ownership: cluster?.ownership) {
            holder.resolver.initialState()
        }
        persistence = Persistence(
            database: database, store: store, packAfter: .seconds(configuration.packIdleAfterSeconds), logger: logger)
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
                })
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

        // ZAP (secure mode), flush, egress, each worker, requests.
        partsReady = PartsReady(expected: (security == nil ? 0 : 1) + 3 + configuration.workers)
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

    // MARK: Lifecycle

    /// Runs navigatord's parts as one `ServiceGroup` until graceful shutdown (SIGTERM/SIGINT
    /// through the enclosing group, or ``stop()``) — then it returns once every part has stopped
    /// and the state is flushed — or until a part fails: then the others stop gracefully, the
    /// state is flushed, and it throws which part failed and why, so the process exits non-zero
    /// and its supervisor (systemd, Kubernetes) restarts it. A socket that cannot be bound throws
    /// the same way, before the service was ever ready.
    public func run() async throws {
        let group = try claim()
        try await run(group)
    }

    /// The first part that failed, if one did (the service then stops).
    public var failure: String? { supervisor.failure?.description }

    /// Starts the parts in the background and returns once every socket is bound and the
    /// service is ready; throws (with everything closed again) if a part cannot start. For
    /// tests and embedding; ``stop()`` ends it.
    public func start() async throws {
        let group = try claim()
        let task = Task { try await run(group) }
        lifecycle.withLock { $0 = .running(group, task) }
        guard await partsReady.wait() else {
            lifecycle.withLock { $0 = .stopped }
            try await task.value
            throw EngineError(.lifecycle, "navigatord ended before it was ready")
        }
    }

    /// Stops taking work, lets the workers finish what they were given, flushes the state and
    /// closes everything, within `shutdownTimeoutSeconds`. Safe to call more than once.
    public func stop() async {
        let running = lifecycle.withLock { state -> (ServiceGroup, Task<Void, any Error>)? in
            guard case .running(let group, let task) = state else { return nil }
            state = .stopped
            return (group, task)
        }
        guard let (group, task) = running else { return }
        await group.triggerGracefulShutdown()
        _ = await task.result
    }

    /// The group of parts, once: a service runs one time.
    private func claim() throws -> ServiceGroup {
        let fresh = lifecycle.withLock { state -> Bool in
            guard case .initial = state else { return false }
            state = .claimed
            return true
        }
        guard fresh else { throw EngineError(.lifecycle, "the service was started already") }
        return makeGroup()
    }

    /// ZAP, flush, egress, workers (worker 0 last), requests, gate: started in this order, stopped in
    /// reverse. A part that ends, well or badly, shuts the group down gracefully; past
    /// `shutdownTimeoutSeconds` the parts still running are cancelled (their loops end as the
    /// context shuts down).
    private func makeGroup() -> ServiceGroup {
        let (context, record) = (self.context, shutdownRecord)
        let gate = security == nil ? nil : zapReady
        func part(_ loop: some SocketLoop, stop: (@Sendable () -> Void)? = nil) -> any Service {
            LoopPart(
                loop: loop, context: context, record: record, opened: { [self] in opened() }, stop: stop, after: gate)
        }
        var parts: [any Service] = []
        if let security {
            // First: no socket binds before the ZAP handler answers, since libzmq admits any key
            // while none does. Stopped last.
            let zapReady = self.zapReady
            parts.append(
                LoopPart(
                    loop: ZAPLoop(
                        context: context, security: security, counters: counters, supervisor: supervisor,
                        logger: logger),
                    context: context, record: record, opened: { [self] in opened() },
                    stop: { signalStop(context, ZAPLoop.control) },
                    check: {
                        try await DedicatedThread.run(name: "nav-zap-probe") { try ZAPLoop.probe(context) }
                        zapReady.opened()
                    },
                    releases: zapReady))
        }
        // Before the workers: they hand it their replies.
        let persistence = self.persistence
        parts.append(
            part(
                FlushLoop(
                    context: context, persistence: persistence,
                    interval: .milliseconds(configuration.flushIntervalMilliseconds),
                    idleExpiry: Int64(configuration.sessionIdleExpirySeconds) * 1_000_000_000, counters: counters,
                    supervisor: supervisor, logger: logger),
                stop: { persistence.stop() }))
        parts.append(
            part(
                EgressLoop(
                    context: context, commands: commands, endpoints: configuration.commandEndpoints,
                    highWaterMark: configuration.highWaterMark,
                    handoffHighWaterMark: configuration.handoffHighWaterMark, producers: configuration.workers,
                    maxSubscriptionsPerPeer: configuration.maxSubscriptionsPerPeer, security: security,
                    counters: counters, bound: bound, supervisor: supervisor, logger: logger)))
        // Worker 0 reads the intents socket: after the others in the group, so that it is asked to
        // stop (its intake) before them, even when requests has ended already; the others end
        // once intake and requests have sent them their stop markers.
        // Several instances in plain mode forward what another instance serves (ClusterLink).
        let forwards = store.ownership != nil && security == nil && configuration.clusterEndpoint != "off"
        let intake = Intake(
            endpoints: configuration.intentEndpoints, workers: configuration.workers,
            maxMessageBytes: configuration.maxMessageBytes, highWaterMark: configuration.highWaterMark,
            handoffHighWaterMark: configuration.handoffHighWaterMark, counters: counters, bound: bound,
            security: security, forwarding: forwards ? store.ownership : nil, logger: logger)
        let stopIntake: @Sendable () -> Void = { signalStop(context, Internal.ingressControl) }
        for index in (0..<configuration.workers).reversed() {
            let reader = index == Intake.reader
            parts.append(
                part(
                    WorkerLoop(
                        index: index, context: context, commands: commands, store: store, resolvers: resolvers,
                        counters: counters, persistence: persistence, follows: follows,
                        maxSessions: configuration.maxSessions,
                        handoffHighWaterMark: configuration.handoffHighWaterMark, intake: reader ? intake : nil,
                        supervisor: supervisor, logger: logger),
                    stop: reader ? stopIntake : nil))
        }
        // Stopping requests stops intake too: the requests thread ends only once every worker
        // has, and the workers stop once both have stopped taking work.
        parts.append(
            part(
                RequestsLoop(
                    context: context, commands: commands, endpoints: configuration.requestEndpoints,
                    workers: configuration.workers,
                    maxMessageBytes: configuration.maxMessageBytes,
                    handoffHighWaterMark: configuration.handoffHighWaterMark, store: store, resolvers: resolvers,
                    counters: counters, bound: bound, security: security, startedAt: startedAt,
                    clusterEndpoints: forwards ? [configuration.clusterEndpoint] : [],
                    instances: { [self] in instances }, instanceID: configuration.instanceID, desk: desk,
                    supervisor: supervisor, logger: logger),
                stop: {
                    signalStop(context, Internal.ingressControl)
                    signalStop(context, Internal.requestsControl)
                }))
        parts.append(
            GatePart { [self] in
                ready.store(false, ordering: .releasing)
                logger.info("navigatord stopping: draining in-flight work")
            })
        precondition(parts.count - 1 == partsReady.expected, "every part but the gate reports when it opened")
        var group = ServiceGroupConfiguration(
            services: parts.map {
                .init(
                    service: $0, successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup)
            },
            logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(configuration.shutdownTimeoutSeconds)
        return ServiceGroup(configuration: group)
    }

    /// A part has bound its sockets; the last one makes the service ready.
    private func opened() {
        guard partsReady.opened() else { return }
        ready.store(true, ordering: .releasing)
    }

    /// Waits until every part has opened its sockets (true), or the engine ended first (false).
    public func opening() async -> Bool { await partsReady.wait() }

    /// What the engine says about itself when it starts: its endpoints, workers, route map and
    /// security (the composition root logs it with its own parts').
    public var summary: Logger.Metadata {
        let endpoints = bound.current
        return [
            "intents": "\(endpoints.intents.joined(separator: ","))",
            "requests": "\(endpoints.requests.joined(separator: ","))",
            "commands": "\(endpoints.commands.joined(separator: ","))",
            "workers": "\(configuration.workers)", "routes": "\(resolvers.source)",
            "security":
                "\(security.map { "CURVE, server public key \($0.publicKey), \($0.access.clients.count) clients in \($0.accessFile)" } ?? (configuration.allowInsecureRemote ? "off (--allow-insecure-remote)" : "off (loopback only)"))",
        ]
    }

    /// Runs the group to its end, then writes what is left and lets everything go.
    private func run(_ group: ServiceGroup) async throws {
        // Egress drops over-subscribed peers by shutting their connection down; libzmq may still
        // write to it, which must be an error, not a signal that ends the process.
        Connection.ignoreBrokenPipes()
        var ended: (any Error)?
        do {
            if let leaseKeeper {
                // Partitions claimed and their sessions loaded before any worker runs.
                try await DedicatedThread.run(name: "nav-leases") {
                    try leaseKeeper.leases.join()
                    try leaseKeeper.round()
                }
                leaseKeeper.start()
            }
            try await group.run()
        } catch {
            ended = error
        }
        ready.store(false, ordering: .releasing)
        partsReady.ended()
        followsClosed.store(true, ordering: .releasing)
        await follows.stopAll("navigatord is stopping")
        desk.close(.shuttingDown, "the service is shutting down and takes no new requests")
        let persistence = self.persistence
        persistence.stop()
        let complete = (try? await DedicatedThread.run(name: "nav-final-flush") { persistence.flushChanged() }) ?? false
        let clean = complete && !shutdownRecord.wasCut && ended == nil && supervisor.failure == nil
        if let leaseKeeper {
            // Every partition to the other instances at once, its changes written first.
            _ = try? await DedicatedThread.run(name: "nav-handover") {
                leaseKeeper.stop()
                leaseKeeper.handOverAll()
            }
        } else if clean {
            // Every session is on disk: the next run continues this epoch's seqs.
            do {
                try persistence.database.markCleanStop()
            } catch {
                logger.error(
                    "could not mark \(persistence.database.kind) cleanly stopped", metadata: ["error": "\(error)"])
            }
        } else if partsReady.wasReady {
            logger.error("navigatord did not stop cleanly; the next run starts a new epoch")
        }
        let context = self.context
        commands.close()  // egress closes it when it ends; not if it never ran
        _ = try? await DedicatedThread.run(name: "nav-terminate") { try context.terminate() }
        persistence.database.close()
        directoryLock?.release()
        if let failure = supervisor.failure {
            throw EngineError(.partFailed, "navigatord stopped because \(failure.part) failed: \(failure.reason)")
        }
        if let ended { throw ended }
        logger.info("navigatord stopped; state flushed to \(persistence.database.location)")
    }

    /// Whether every part opened and the service has not begun to stop.
    var isReady: Bool { ready.load(ordering: .acquiring) }

    // MARK: Route map

    /// Loads the route map again from its file (SIGHUP). An invalid map is refused: the error is
    /// logged and thrown, and the map in use stays.
    @discardableResult
    public func reloadRouteMap() throws -> String {
        do {
            var (resolver, source) = try Self.loadResolver(configuration)
            resolver.options.dedupKey = resolvers.resolver.options.dedupKey  // the state file's
            resolvers.replace(with: resolver, source: source)
            logger.info(
                "route map reloaded", metadata: ["routes": "\(source)", "screens": "\(resolver.map.screens.count)"])
            return source
        } catch {
            logger.error("route map reload refused; the previous map stays", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Secure mode: reads the access file again (SIGHUP). An invalid file is refused (logged and
    /// thrown) and the list in use stays. A client removed or narrowed gets no new connection
    /// and no further request served; egress drops its subscriptions that are no longer allowed.
    public func reloadAccessFile() throws {
        guard let security else { return }
        do {
            let (clients, changed) = try security.reload()
            logger.info(
                "access file reloaded",
                metadata: [
                    "file": "\(security.accessFile)", "clients": "\(clients)",
                    "removedOrChanged": "\(changed.joined(separator: ","))",
                ])
        } catch {
            logger.error("access file reload refused; the previous list stays", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// The route map and the resolver's options from the configuration (the dedup key is the
    /// state file's: the caller sets it).
    static func loadResolver(_ configuration: EngineConfiguration) throws -> (Resolver, String) {
        let map: RouteMap
        let source: String
        if let path = configuration.routeMapPath {
            map = try RouteMapYAML.load(contentsOfFile: path)
            source = path
        } else {
            map = .demo
            source = "embedded demo"
        }
        var options = Resolver.Options()
        options.dedupWindow = Int64(configuration.dedupWindowSeconds) * 1_000_000_000
        options.defaultTTL = Int64(configuration.parkedTTLSeconds) * 1_000_000_000
        options.maxParked = configuration.maxParkedPerSession
        options.limits = TreeLimits(
            maxModals: configuration.maxModals, maxStackDepth: configuration.maxStackDepth,
            maxTabs: configuration.maxTabs, maxInfoEntries: configuration.maxInfoEntries,
            maxTextBytes: configuration.maxTextBytes)
        options.maxConditions = configuration.maxConditions
        options.maxConditionKeyBytes = configuration.maxConditionKeyBytes
        return (try Resolver(map: map, options: options), source)
    }
}
