import Locking
import Logging
import NavigatorEngine
import NavigatorHTTP
import NavigatorTokens
import ServiceLifecycle
import UnixSignals
import ZeroMQ

/// navigatord put together: the engine (its sockets, workers and store), the HTTP server that
/// reaches it in process through its port, and — when run as the process — the signals, in one
/// service group. Started in this order and stopped in reverse: on SIGTERM the HTTP server stops
/// taking requests and ends its streams while the engine still answers what is in flight, then
/// the engine drains, flushes and closes. A part that fails stops the others the same way, and
/// ``run()`` throws why.
final class Navigator: Sendable {
    let configuration: NavigatordConfiguration
    let engine: Engine
    /// The HTTP server; nil when `http` is `off`.
    let http: HTTPServer?
    /// Traces exported over OTLP, when the environment asks for them.
    let telemetry: Telemetry?
    let logger: Logger
    /// Set once the engine has opened its sockets and the HTTP server listens.
    private let started = Latch()
    private let lifecycle = Locked(Lifecycle.initial)

    private enum Lifecycle {
        case initial
        case starting
        case running(ServiceGroup, Task<Void, any Error>)
        case ran
    }

    /// Builds the parts (the route map, the store and the keys are read now; nothing listens
    /// yet). Throws what is wrong with the configuration or its files.
    init(configuration: NavigatordConfiguration, telemetry: Telemetry? = nil, logger: Logger) async throws {
        try ConfigurationLoader.checkExposure(configuration)
        self.configuration = configuration
        self.telemetry = telemetry
        self.logger = logger
        // Opening the state file or connecting to PostgreSQL blocks: not on the cooperative pool.
        let engine = try await DedicatedThread.run(name: "nav-open") {
            try Engine(configuration: configuration.engine, tracer: telemetry?.tracer, logger: logger)
        }
        self.engine = engine
        if configuration.servesHTTP {
            let maxConnections = try Self.httpConnections(configuration)
            var tokens: TokenKey?
            if let file = configuration.tokenKeyFile { tokens = try await TokenKey.load(file: file) }
            let started = self.started
            var settings = HTTPConfiguration(
                address: configuration.httpAddress, maxBodyBytes: configuration.engine.maxMessageBytes * 4,
                streams: configuration.streams, secure: configuration.engine.isSecure, tokens: tokens,
                maxConnections: maxConnections, allowedHosts: configuration.allowedHosts)
            settings.firstRequestTimeout = configuration.httpFirstRequestTimeout
            settings.requestTimeout = configuration.httpRequestTimeout
            settings.stalledReaderTimeout = configuration.httpStalledReaderTimeout
            http = HTTPServer(
                configuration: settings, port: engine, logger: logger, onRunning: { _ in started.httpListens() })
        } else {
            http = nil
            started.httpListens()
        }
    }

    /// How many HTTP connections may be open at once: `maxConnections`, or what the open-file
    /// limit (raised to its hard limit now) leaves after what ZeroMQ and the store keep; a
    /// configured number beyond that is refused.
    static func httpConnections(_ configuration: NavigatordConfiguration) throws -> Int {
        let limit = FileLimit.raise()
        let capacity = FileLimit.connectionCapacity(of: limit)
        guard let wanted = configuration.maxHTTPConnections else { return capacity }
        guard wanted <= capacity else {
            throw ConfigurationError(
                "maxConnections \(wanted) is more than this process can open: its open-file limit is \(limit) (ulimit -n, raised to the hard limit), of which \(FileLimit.reserve(of: limit)) are kept for ZeroMQ and the store; expected at most \(capacity), or a higher limit (ulimit -Hn, LimitNOFILE=)"
            )
        }
        return wanted
    }

    /// Runs until SIGTERM or SIGINT (graceful: intake stops, in-flight work drains, state is
    /// flushed), reloading the route map (and, in secure mode, the access file) on SIGHUP.
    func run() async throws {
        var configuration = ServiceGroupConfiguration(
            services: services(signals: true), gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = shutdownBound
        try await ServiceGroup(configuration: configuration).run()
    }

    /// How long a graceful stop may take in all: the HTTP server's (its streams end at once,
    /// requests in flight finish) and then the engine's own bound.
    private var shutdownBound: Duration { .seconds(2 * configuration.engine.shutdownTimeoutSeconds + 5) }

    /// Starts everything in the background and returns once the engine's sockets are bound and
    /// the HTTP server listens; throws (everything stopped again) if a part cannot start. For tests;
    /// ``stop()`` ends it.
    func start() async throws {
        var configuration = ServiceGroupConfiguration(services: services(signals: false), logger: logger)
        configuration.maximumGracefulShutdownDuration = shutdownBound
        let group = ServiceGroup(configuration: configuration)
        let claimed = lifecycle.withLock { state -> Bool in
            guard case .initial = state else { return false }
            state = .starting
            return true
        }
        guard claimed else { throw EngineError(.lifecycle, "navigatord was started already") }
        let task = Task { try await group.run() }
        lifecycle.withLock { $0 = .running(group, task) }
        guard await started.wait() else {
            await stop()
            _ = try await task.value
            throw EngineError(.lifecycle, "navigatord ended before it was ready")
        }
    }

    /// Stops what ``start()`` started, gracefully. Safe to call more than once.
    func stop() async {
        let running = lifecycle.withLock { state -> (ServiceGroup, Task<Void, any Error>)? in
            guard case .running(let group, let task) = state else { return nil }
            state = .ran
            return (group, task)
        }
        guard let (group, task) = running else { return }
        await group.triggerGracefulShutdown()
        _ = await task.result
    }

    /// The HTTP server's address once it listens (the port chosen for 0).
    var httpAddress: String? { http?.address }

    private func services(signals: Bool) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        func part(_ service: any Service) -> ServiceGroupConfiguration.ServiceConfiguration {
            .init(
                service: service, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup)
        }
        // The exporter first, so that it stops last: the engine's final spans go out.
        var services = telemetry.map { [part($0.service)] } ?? []
        services.append(part(engine))
        if let http { services.append(part(HTTPPart(server: http, started: started))) }
        services.append(part(Announcer(navigator: self)))
        if signals { services.append(part(Reloader(engine: engine, logger: logger))) }
        return services
    }

    /// The HTTP server; if it ends before it listened (its address taken, say), the start failed.
    private struct HTTPPart: Service {
        let server: HTTPServer
        let started: Latch

        func run() async throws {
            defer { started.failUnlessListening() }
            try await server.run()
        }
    }

    /// Says "navigatord started" with every endpoint once the engine and the HTTP server are
    /// both up (tests and operators read the endpoints from it); then waits for the end.
    private struct Announcer: Service {
        let navigator: Navigator

        func run() async throws {
            let engineOpened = await navigator.engine.opening()
            guard engineOpened, await navigator.started.waitForHTTP() else {
                navigator.started.settle(up: false)
                return
            }
            var metadata = navigator.engine.summary
            metadata["http"] = "\(navigator.httpAddress.map { "http://\($0)" } ?? "off")"
            metadata["traces"] = "\(navigator.telemetry?.summary ?? "off")"
            navigator.logger.info("navigatord started", metadata: metadata)
            navigator.started.settle(up: true)
            try? await gracefulShutdown()
        }
    }

    /// Reloads the route map (and, in secure mode, the access file) on each SIGHUP until
    /// graceful shutdown; a file that does not load is refused and the one in use stays.
    private struct Reloader: Service {
        let engine: Engine
        let logger: Logger

        func run() async throws {
            let hangups = await UnixSignalsSequence(trapping: .sighup)
            for await _ in hangups.cancelOnGracefulShutdown() {
                logger.info("SIGHUP: reloading the route map\(engine.security == nil ? "" : " and the access file")")
                // Off the pool: a rollout's end is written to the store. A refusal is logged; the
                // service goes on.
                _ = try? await DedicatedThread.run(name: "nav-reload") { [engine] in try engine.reloadRouteMap() }
                try? engine.reloadAccessFile()
            }
        }
    }
}

/// Whether navigatord came up: the HTTP server listening (or off), then the engine's sockets
/// bound (true), or the start failing first (false). Every waiter is resumed once.
final class Latch: Sendable {
    private struct State {
        var listening = false
        /// Settled: up or not.
        var up: Bool?
        var httpWaiters: [CheckedContinuation<Bool, Never>] = []
        var waiters: [CheckedContinuation<Bool, Never>] = []
    }

    private let state = Locked(State())

    /// The HTTP server listens (or there is none).
    func httpListens() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.listening = true
            defer { state.httpWaiters = [] }
            return state.httpWaiters
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    /// Everything came up, or the start failed: every waiter hears it.
    func settle(up: Bool) {
        let (waiters, httpWaiters) = state.withLock {
            state -> ([CheckedContinuation<Bool, Never>], [CheckedContinuation<Bool, Never>]) in
            guard state.up == nil else { return ([], []) }
            state.up = up
            defer {
                state.waiters = []
                state.httpWaiters = []
            }
            return (state.waiters, state.httpWaiters)
        }
        for waiter in waiters { waiter.resume(returning: up) }
        for waiter in httpWaiters { waiter.resume(returning: up) }
    }

    /// The HTTP server ended: if it never listened, the start failed.
    func failUnlessListening() {
        let failed = state.withLock { !$0.listening && $0.up == nil }
        if failed { settle(up: false) }
    }

    /// Waits for the HTTP server to listen (true), or for the start to fail (false).
    func waitForHTTP() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Bool? in
                if state.listening { return true }
                if let up = state.up { return up }
                state.httpWaiters.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Waits until everything came up (true) or the start failed (false).
    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Bool? in
                if let up = state.up { return up }
                state.waiters.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}
