import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorYAML
import ServiceLifecycle
import Synchronization
import ZeroMQ

// The engine's lifecycle: its parts as one service group, started, run and stopped.
extension Engine {
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

    /// ZAP, the memory ceiling's watch, flush, egress, workers (worker 0 last), requests, gate:
    /// started in this order, stopped in
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
        // The memory ceiling's watch: a part of its own, so that when it fails the others stop
        // as in a graceful stop (the flush thread, say, carries the workers' stops on).
        if memory.limit != nil {
            parts.append(
                part(
                    MemoryLoop(context: context, memory: memory, supervisor: supervisor),
                    stop: { signalStop(context, MemoryLoop.control) }))
        }
        // Before the workers: they hand it their replies.
        let persistence = self.persistence
        parts.append(
            part(
                FlushLoop(
                    context: context, persistence: persistence,
                    interval: .milliseconds(configuration.flushIntervalMilliseconds),
                    idleExpiry: Int64(configuration.sessionIdleExpirySeconds) * 1_000_000_000,
                    nice: Int32(clamping: configuration.writeBehindNice), counters: counters, supervisor: supervisor,
                    logger: logger),
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
        // Several instances forward what another instance serves (ClusterLink); in secure mode
        // over CURVE, with the server key pair the instances share.
        let forwards = store.ownership != nil && configuration.clusterEndpoint != "off"
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
                        desks: workerDesks,
                        tracer: tracer, tracing: tracer != nil,
                        maxTracedIntentsPerSecond: configuration.maxTracedIntentsPerSecond,
                        recorder: recorders[index], workers: configuration.workers, supervisor: supervisor,
                        logger: logger),
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
                    recorders: recorders, routeMapDesk: routeMapDesk, desks: workerDesks, rolloutKeeper: rolloutKeeper,
                    follows: follows, supervisor: supervisor, logger: logger),
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
            "memory-ceiling": "\(memory.summary)",
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
            rolloutKeeper.start()
            try await group.run()
        } catch {
            ended = error
        }
        ready.store(false, ordering: .releasing)
        partsReady.ended()
        followsClosed.store(true, ordering: .releasing)
        await follows.stopAll("navigatord is stopping")
        desk.close(
            .shuttingDown,
            "the service is shutting down; a request it took may or may not have been carried out: retry the same request once it is back"
        )
        let (persistence, rolloutKeeper) = (self.persistence, self.rolloutKeeper)
        _ = try? await DedicatedThread.run(name: "nav-rollout-stop") { rolloutKeeper.stop() }
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
            var why: [String] = []
            if !complete { why.append("the final flush did not write every session") }
            if shutdownRecord.wasCut {
                why.append(
                    "parts were still running after shutdownTimeoutSeconds (\(configuration.shutdownTimeoutSeconds) s): \(shutdownRecord.parts.joined(separator: ", "))"
                )
            }
            if let ended { why.append("the service group ended with \(ended)") }
            if let failure = supervisor.failure { why.append("\(failure.part) failed") }
            logger.error(
                "navigatord did not stop cleanly; the next run starts a new epoch",
                metadata: ["why": "\(why.joined(separator: "; "))"])
        }
        let context = self.context
        commands.close()  // egress closes it when it ends; not if it never ran
        let routeMapDesk = self.routeMapDesk
        _ = try? await DedicatedThread.run(name: "nav-terminate") {
            routeMapDesk.join()  // an answer being made ends by itself; its socket must close first
            try context.terminate()
        }
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
}
