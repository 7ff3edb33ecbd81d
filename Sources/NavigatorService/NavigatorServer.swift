import Logging
import NavigatorCore
import NavigatorYAML
import ServiceLifecycle
import Synchronization
import ZeroMQ

/// The Navigator service: intents in over ZeroMQ, command batches out to subscribed shells.
///
/// Threads, in start order: flush (the only writer of the state file; it also makes replies to
/// acknowledged requests durable before passing them on), egress (XPUB), workers (one per shard
/// of sessions), requests (ROUTER), ingress (intents PULL). Graceful shutdown stops them in
/// reverse: requests and ingress stop taking work, workers finish what they were given, egress
/// publishes the last of it, the flush thread writes what is left; past
/// `shutdownTimeoutSeconds` the context is shut down and every socket closes.
public final class NavigatorServer: Service, Sendable {
    public let configuration: ServiceConfiguration
    let logger: Logger
    let context: Context
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: ServiceCounters
    let persistence: Persistence
    /// This process's claim on the data directory, from `init` to the end of `stop()`.
    let directoryLock: DataDirectoryLock
    let bound = BoundEndpoints()
    /// Hears of any thread that fails; `run()` then stops the service and throws.
    let supervisor: Supervisor
    let startedAt = WallClock.now()
    private let lifecycle = Mutex(Lifecycle.initial)
    /// Whether the service takes work (/readyz).
    private let ready = Atomic<Bool>(false)
    /// Sessions in the state file's quarantine table (rows that did not load).
    let quarantinedSessions: Int

    enum Lifecycle {
        case initial
        case running([DedicatedThread], flusher: DedicatedThread, http: HTTPEndpoint?)
        case stopped
    }

    /// Builds the service: loads and checks the route map; opens nothing yet.
    public init(configuration: ServiceConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        supervisor = Supervisor { [logger] failure in
            logger.critical(
                "a part of navigatord failed; navigatord stops (state is flushed) and exits non-zero",
                metadata: ["part": "\(failure.part)", "reason": "\(LogText(failure.reason))"])
        }
        let (resolver, source) = try Self.loadResolver(configuration)
        resolvers = ResolverHolder(resolver, source: source)
        counters = ServiceCounters(workers: configuration.workers)
        let holder = resolvers
        directoryLock = try DataDirectoryLock(directory: configuration.dataDirectory)
        let file = try StateFile(directory: configuration.dataDirectory)
        let (epoch, continued) = try file.beginRun()
        store = SessionStore(shards: configuration.workers, epoch: epoch) { holder.resolver.initialState() }
        persistence = Persistence(
            file: file, store: store, packAfter: .seconds(configuration.packIdleAfterSeconds), logger: logger)
        let (restored, quarantined) = try persistence.restore()
        for (session, reason) in quarantined {
            logger.error(
                "a stored session does not load; moved to the quarantine table of the state file",
                metadata: ["session": "\(LogText(session))", "reason": "\(LogText(reason))"])
        }
        quarantinedSessions = try file.quarantinedCount()
        if restored > 0 {
            logger.info(
                "restored \(restored) sessions from \(file.path)",
                metadata: [
                    "epoch": "\(epoch)",
                    "seqs":
                        "\(continued ? "continue (the last run stopped cleanly)" : "start a new epoch (the last run did not stop cleanly)")",
                ])
        }
        context = try Context(ioThreads: 1)
    }

    /// The endpoints bound, with real ports for `tcp://host:*` (known once started).
    public var endpoints: Endpoints { bound.current }

    /// The route map in use and where it came from.
    public var routeMap: (map: RouteMap, source: String) {
        let current = resolvers.snapshot
        return (current.resolver.map, current.source)
    }

    // MARK: Lifecycle

    /// Runs until graceful shutdown (SIGTERM/SIGINT through the ServiceGroup) or cancellation —
    /// then stops and returns — or until a part fails: then it stops (flushing the state) and
    /// throws which part failed and why, so the process exits non-zero and its supervisor
    /// (systemd, Kubernetes) restarts it.
    public func run() async throws {
        try await start()
        let supervisor = self.supervisor
        let failure = await withTaskGroup(of: Supervisor.Failure?.self) { group in
            group.addTask { await supervisor.firstFailure() }
            group.addTask {
                try? await gracefulShutdown()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        await stop()
        if let failure {
            throw ServiceError("navigatord stopped because \(failure.part) failed: \(failure.reason)")
        }
    }

    /// The first part that failed, if one did (the service then stops).
    public var failure: String? { supervisor.failure?.description }

    /// Opens every socket and starts the threads; throws (with everything closed again) if a
    /// socket cannot be bound.
    public func start() async throws {
        let ready = lifecycle.withLock { state -> Bool in
            if case .initial = state { return true }
            return false
        }
        guard ready else { throw ServiceError("the service was started already") }
        // Egress drops over-subscribed peers by shutting their connection down; libzmq may
        // still write to it, which must be an error, not a signal that ends the process.
        Connection.ignoreBrokenPipes()
        var threads: [DedicatedThread] = []
        var http: HTTPEndpoint?
        var flusher: DedicatedThread?
        do {
            if configuration.metricsAddress != "off" {
                let served = try await HTTPEndpoint.start(
                    address: configuration.metricsAddress,
                    routes: [
                        "/metrics": { [self] in respond(to: "/metrics") },
                        "/healthz": { [self] in respond(to: "/healthz") },
                        "/readyz": { [self] in respond(to: "/readyz") },
                    ], logger: logger, onFailure: { [supervisor] error in supervisor.fail("nav-http", error) })
                bound.set(metrics: served.address)
                http = served
            }
            // Before the workers: they hand it their replies.
            flusher = try await FlushLoop(
                context: context, persistence: persistence,
                interval: .milliseconds(configuration.flushIntervalMilliseconds),
                idleExpiry: Int64(configuration.sessionIdleExpirySeconds) * 1_000_000_000, counters: counters,
                supervisor: supervisor, logger: logger
            ).start()
            threads.append(
                try await EgressLoop(
                    context: context, endpoints: configuration.commandEndpoints,
                    highWaterMark: configuration.highWaterMark,
                    handoffHighWaterMark: configuration.handoffHighWaterMark, producers: configuration.workers + 1,
                    maxSubscriptionsPerPeer: configuration.maxSubscriptionsPerPeer,
                    counters: counters, bound: bound, supervisor: supervisor, logger: logger
                ).start())
            for index in 0..<configuration.workers {
                threads.append(
                    try await WorkerLoop(
                        index: index, context: context, store: store, resolvers: resolvers, counters: counters,
                        persistence: persistence, maxSessions: configuration.maxSessions,
                        handoffHighWaterMark: configuration.handoffHighWaterMark, supervisor: supervisor,
                        logger: logger
                    ).start())
            }
            threads.append(
                try await RequestsLoop(
                    context: context, endpoints: configuration.requestEndpoints, workers: configuration.workers,
                    maxMessageBytes: configuration.maxMessageBytes,
                    handoffHighWaterMark: configuration.handoffHighWaterMark, store: store, resolvers: resolvers,
                    counters: counters,
                    bound: bound, startedAt: startedAt, supervisor: supervisor, logger: logger
                ).start())
            threads.append(
                try await IngressLoop(
                    context: context, endpoints: configuration.intentEndpoints, workers: configuration.workers,
                    maxMessageBytes: configuration.maxMessageBytes, highWaterMark: configuration.highWaterMark,
                    handoffHighWaterMark: configuration.handoffHighWaterMark, counters: counters, epoch: store.epoch,
                    bound: bound, supervisor: supervisor, logger: logger
                ).start())
        } catch {
            context.shutdown()
            for thread in threads { await Self.join(thread) }
            if let flusher { await Self.join(flusher) }
            await http?.stop()
            lifecycle.withLock { $0 = .stopped }
            directoryLock.release()
            throw error
        }
        lifecycle.withLock { [flusher] in $0 = .running(threads, flusher: flusher!, http: http) }
        self.ready.store(true, ordering: .releasing)
        let endpoints = bound.current
        logger.info(
            "navigatord started",
            metadata: [
                "intents": "\(endpoints.intents.joined(separator: ","))",
                "requests": "\(endpoints.requests.joined(separator: ","))",
                "commands": "\(endpoints.commands.joined(separator: ","))",
                "workers": "\(configuration.workers)", "routes": "\(resolvers.source)",
                "metrics": "\(endpoints.metrics.map { "http://\($0)" } ?? "off")",
            ])
    }

    /// Stops taking work, lets the workers finish what they were given, and closes everything,
    /// within `shutdownTimeoutSeconds`. Safe to call more than once.
    public func stop() async {
        let running = lifecycle.withLock {
            state -> ([DedicatedThread], DedicatedThread, HTTPEndpoint?)? in
            guard case .running(let threads, let flusher, let http) = state else { return nil }
            state = .stopped
            return (threads, flusher, http)
        }
        guard let (threads, flusher, http) = running else { return }
        ready.store(false, ordering: .releasing)
        logger.info("navigatord stopping: draining in-flight work")
        // Requests first, so nothing reaches a worker after ingress has told it to stop.
        await Self.signal(context, Internal.requestsControl)
        await Self.signal(context, Internal.ingressControl)
        let finished = await Self.joinAll(threads, within: .seconds(configuration.shutdownTimeoutSeconds))
        if !finished {
            logger.warning(
                "navigatord: shutdown bound of \(configuration.shutdownTimeoutSeconds) s reached; closing sockets now")
            context.shutdown()
            for thread in threads { await Self.join(thread) }
        }
        persistence.stop()
        await Self.join(flusher)
        let persistence = self.persistence
        let complete = (try? await DedicatedThread.run(name: "nav-final-flush") { persistence.flushChanged() }) ?? false
        if complete && finished {
            // Every session is on disk: the next run continues this epoch's seqs.
            do {
                try persistence.file.markCleanStop()
            } catch {
                logger.error("could not mark the state file cleanly stopped", metadata: ["error": "\(error)"])
            }
        } else {
            logger.error("not every session could be written at shutdown; the next run starts a new epoch")
        }
        let context = self.context
        _ = try? await DedicatedThread.run(name: "nav-terminate") { try context.terminate() }
        await http?.stop()
        directoryLock.release()
        logger.info("navigatord stopped; state flushed to \(persistence.file.path)")
    }

    // MARK: HTTP

    func respond(to path: String) -> HTTPReply {
        switch path {
        case "/metrics":
            let metrics = counters.metrics
            metrics.sessions.record(store.sessionCount)
            metrics.parked.record(store.parkedCount)
            metrics.quarantined.record(quarantinedSessions)
            metrics.subscribedTopics.record(Int(counters.subscribedTopics.load))
            for (worker, gauge) in metrics.queueDepths.enumerated() { gauge.record(Int(counters.queueDepth(worker))) }
            return HTTPReply(200, "text/plain; version=0.0.4; charset=utf-8", metrics.registry.emitToBuffer())
        case "/healthz":
            return HTTPReply(200, "ok\n")
        case "/readyz":
            if let failure = supervisor.failure {
                return HTTPReply(503, "not ready: \(failure.part) failed; navigatord is stopping\n")
            }
            guard persistence.fileInPlace.load(ordering: .acquiring) else {
                return HTTPReply(503, "not ready: the state file was deleted or replaced and is being written again\n")
            }
            return ready.load(ordering: .acquiring) ? HTTPReply(200, "ready\n") : HTTPReply(503, "not ready\n")
        default:
            return HTTPReply(404, "no such path; try /metrics, /healthz or /readyz\n")
        }
    }

    // MARK: Route map

    /// Loads the route map again from its file (SIGHUP). An invalid map is refused: the error is
    /// logged and thrown, and the map in use stays.
    @discardableResult
    public func reloadRouteMap() throws -> String {
        do {
            let (resolver, source) = try Self.loadResolver(configuration)
            resolvers.replace(with: resolver, source: source)
            logger.info(
                "route map reloaded", metadata: ["routes": "\(source)", "screens": "\(resolver.map.screens.count)"])
            return source
        } catch {
            logger.error("route map reload refused; the previous map stays", metadata: ["error": "\(error)"])
            throw error
        }
    }

    static func loadResolver(_ configuration: ServiceConfiguration) throws -> (Resolver, String) {
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

    // MARK: Threads

    /// Sends a stop marker to a loop's control socket from a short-lived socket of its own.
    private static func signal(_ context: Context, _ endpoint: String) async {
        _ = try? await DedicatedThread.run(name: "nav-signal") {
            let push = try Socket(context, type: .push)
            try push.set(.linger, .seconds(5))
            try push.connect(endpoint)
            try push.send(Internal.stop)
        }
    }

    private static func join(_ thread: DedicatedThread) async {
        _ = try? await DedicatedThread.run(name: "nav-join") { thread.join() }
    }

    /// Whether every thread finished within `limit`. (A task group would wait for a blocked
    /// join regardless of any timeout; a joiner thread and a flag do not.)
    private static func joinAll(_ threads: [DedicatedThread], within limit: Duration) async -> Bool {
        let finished = Atomic<Bool>(false)
        let joiner = DedicatedThread(name: "nav-join") {
            for thread in threads { thread.join() }
            finished.store(true, ordering: .releasing)
        }
        let clock = ContinuousClock()
        let end = clock.now + limit
        while !finished.load(ordering: .acquiring), clock.now < end {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let done = finished.load(ordering: .acquiring)
        if done { await join(joiner) } else { joiner.detach() }
        return done
    }
}
