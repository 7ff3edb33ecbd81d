import ArgumentParser
import Logging
import NavigatorCore
import NavigatorEngine
import NavigatorTokens
import NavigatorYAML
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `navigatord`: parse options, build the configuration, run ``Navigator`` (the engine and its
/// HTTP server). Everything else is in NavigatorEngine, NavigatorHTTP and NavigatorStore.
@main
struct Navigatord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navigatord",
        abstract: "The Navigator service: resolves routing intents into navigation commands for client shells.",
        discussion: """
            Producers PUSH intents to the intents socket; clients send requests (acknowledged \
            intents, client events, snapshots, explain, stats, routes, route map checks, impact \
            reports and rollouts) to the requests socket; \
            client shells SUB to their session's command batches on the commands socket. The \
            wire protocol is in docs/wire-protocol.md and proto/navigator/v1.

            With no options navigatord runs on its embedded defaults: the demo route map, the \
            endpoints below on 127.0.0.1, state in ./navigator-data. Settings come from, in \
            rising precedence: a YAML config file (--config or NAVIGATOR_CONFIG; keys as in \
            deploy/navigatord.example.yaml), NAVIGATOR_* environment variables, and these \
            options. List settings take several values (repeat the option; comma-separated in \
            the environment).

            Signals: SIGTERM or SIGINT stop gracefully (intake stops, in-flight work drains, \
            state is flushed, exit 0); SIGHUP reloads the route map and, in secure mode, the \
            access file (an invalid file is refused and the old one kept).

            Traces: off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, \
            or OTEL_TRACES_EXPORTER=otlp) says where; then each sampled intent's spans, children \
            of its traceparent, go there over OTLP/HTTP; the other OTEL_ variables apply \
            (OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_SERVICE_NAME, ...). See docs/operations.md.

            Memory: navigatord holds glibc's malloc trim and mmap thresholds at 128 KiB, so \
            that what it frees goes back to the system (glibc raises them as large blocks are \
            freed); MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, or GLIBC_TUNABLES naming \
            glibc.malloc.trim_threshold or glibc.malloc.mmap_threshold leave them to glibc.

            Security: without --secret-key-file and --access-file every endpoint must be \
            loopback, ipc or inproc (else navigatord refuses to start, unless \
            --allow-insecure-remote). With them, every socket is a CURVE server, only the \
            access file's keys get in, and each client touches only its own sessions.

            Exit status: 0 after a graceful stop; 2 for a bad setting, route map, secret key \
            file or access file, or a non-loopback endpoint without security; 1 when navigatord \
            cannot run, or when one of its threads failed (it is named; the state is flushed \
            first, so a supervisor can restart it); 64 for an unknown option.
            """,
        version: NavigatorVersion.current
    )

    @Option(help: ArgumentHelp("YAML configuration file. [env: NAVIGATOR_CONFIG]", valueName: "file"))
    var config: String?

    @Option(
        help: help(
            "intents", "Intents endpoint (PULL binds; producers PUSH) [default: tcp://127.0.0.1:7401]", list: true))
    var intents: [String] = []

    @Option(
        help: help(
            "requests", "Requests endpoint (ROUTER binds; clients DEALER) [default: tcp://127.0.0.1:7402]", list: true))
    var requests: [String] = []

    @Option(
        help: help("commands", "Commands endpoint (XPUB binds; shells SUB) [default: tcp://127.0.0.1:7403]", list: true)
    )
    var commands: [String] = []

    @Option(
        name: [.customLong("http"), .customLong("metrics")],
        help: help(
            "http",
            "The HTTP server's host:port ([ipv6]:port): /metrics, /healthz, /readyz, the JSON API (/v1/...), session streams and the page (port 0: a free one, shown in the start-up log), or off; --metrics is its older name [default: 127.0.0.1:7480]"
        )
    )
    var http: String?

    @Option(help: help("dataDirectory", "Directory of the state file [default: ./navigator-data]"))
    var dataDirectory: String?

    @Option(
        help: help(
            "store",
            "Where sessions are kept: sqlite (the state file in --data-directory, one instance) or a PostgreSQL URL postgresql://user[:password]@host[:port]/database (the schema is created and migrated by navigatord; put the password in NAVIGATOR_STORE or a passfile, not on the command line) [default: sqlite]"
        ))
    var store: String?

    @Option(
        help: help(
            "instanceId",
            "Several instances (PostgreSQL store): this instance's unique name; its partition leases carry it [default: the host name]"
        ))
    var instanceId: String?

    @Option(
        help: help(
            "leaseSeconds",
            "Several instances: how long a partition lease lasts unrenewed (renewed every fifth of it); a dead instance's sessions move to the others after this long [default: 5]"
        ))
    var leaseSeconds: String?

    @Option(
        help: help(
            "clusterEndpoint",
            "Several instances: where peers forward intents and requests for this instance's sessions (plain mode), or off [default: tcp://127.0.0.1:7404]"
        ))
    var clusterEndpoint: String?

    @Option(
        help: help(
            "advertiseHost",
            "Several instances: the host peers reach this instance at when the cluster endpoint binds every interface [default: the host name]"
        ))
    var advertiseHost: String?

    @Option(help: help("routes", "Route map file, YAML or JSON (demo: the built-in map) [default: demo]"))
    var routes: String?

    @Option(help: help("workers", "Worker threads resolving intents [default: one per core]"))
    var workers: String?

    @Option(help: help("logLevel", "trace, debug, info, notice, warning, error or critical [default: info]"))
    var logLevel: String?

    @Option(help: help("maxMessageBytes", "Largest intent or request accepted, in bytes [default: 65536]"))
    var maxMessageBytes: String?

    @Option(help: help("highWaterMark", "Messages queued per peer (PUSH blocks, PUB drops beyond) [default: 100000]"))
    var highWaterMark: String?

    @Option(
        help: help(
            "handoffHighWaterMark",
            "Messages queued to each worker from worker 0 (which reads the intents socket) and from requests; beyond it the intents socket is not read and acknowledged requests get OVERLOADED [default: 100]"
        ))
    var handoffHighWaterMark: String?

    @Option(help: help("dedupWindowSeconds", "How long intent ids are remembered [default: 600]"))
    var dedupWindowSeconds: String?

    @Option(help: help("parkedTTLSeconds", "How long an intent may wait parked unless it says [default: 300]"))
    var parkedTTLSeconds: String?

    @Option(help: help("maxParkedPerSession", "Parked intents kept per session [default: 64]"))
    var maxParkedPerSession: String?

    @Option(
        help: help(
            "maxSessions",
            "Sessions held at once; an intent or event that would create one more is refused [default: 2000000]"))
    var maxSessions: String?

    @Option(
        help: help(
            "maxMemoryMegabytes",
            "Resident memory (MiB) above which navigatord stops, saying so, its state flushed (libzmq lets a peer make it hold a message's frames without bound until the last); 0: none [default: the machine's memory or its cgroup's limit, the lower, less a tenth and at least 512 MiB]"
        ))
    var maxMemoryMegabytes: String?

    @Option(help: help("maxModals", "Modals one session may present at once [default: 16]"))
    var maxModals: String?

    @Option(help: help("maxStackDepth", "Screens in one navigation stack [default: 64]"))
    var maxStackDepth: String?

    @Option(help: help("maxTabs", "Tabs of a tab-bar root [default: 16]"))
    var maxTabs: String?

    @Option(help: help("maxInfoEntries", "Info entries of one screen [default: 32]"))
    var maxInfoEntries: String?

    @Option(help: help("maxTextBytes", "Bytes of a screen name, tab name, info key or info value [default: 1024]"))
    var maxTextBytes: String?

    @Option(
        help: help("maxTreeBytes", "Bytes of every name, key and value of one session's tree together [default: 65536]")
    )
    var maxTreeBytes: String?

    @Option(help: help("maxConditions", "Conditions one session may hold [default: 64]"))
    var maxConditions: String?

    @Option(help: help("maxConditionKeyBytes", "Bytes of a condition name [default: 64]"))
    var maxConditionKeyBytes: String?

    @Option(
        help: help(
            "maxSubscriptionsPerPeer",
            "Topics one subscriber connection may hold on the commands socket; one more drops it [default: 10000]"))
    var maxSubscriptionsPerPeer: String?

    @Option(
        help: help("streamHistorySize", "HTTP streams: batches kept per streamed session for resuming [default: 64]"))
    var streamHistorySize: String?

    @Option(
        help: help(
            "streamHistorySeconds",
            "HTTP streams: seconds a batch is kept for resuming, and a session followed after its last stream [default: 120]"
        ))
    var streamHistorySeconds: String?

    @Option(
        help: help(
            "streamQueueSize",
            "HTTP streams: events queued per connection before a slow one gets a snapshot [default: 64]"))
    var streamQueueSize: String?

    @Option(help: help("maxStreams", "HTTP streams open at once on this instance [default: 100000]"))
    var maxStreams: String?

    @Option(
        help: help(
            "maxConnections",
            "HTTP connections open at once, streams included; one more is answered 503 [default: the open-file limit (raised to its hard limit at start) less 1024 kept for ZeroMQ and the store; more is refused]"
        ))
    var maxConnections: String?

    @Option(
        help: help(
            "allowedHosts",
            "Without security: the host names HTTP requests may name in Host and Origin, any port; others get 403 so no web page can drive a local navigatord [default: localhost,127.0.0.1,::1]",
            list: true))
    var allowedHosts: [String] = []

    @Option(help: help("streamHeartbeatSeconds", "HTTP streams: seconds idle before a heartbeat [default: 15]"))
    var streamHeartbeatSeconds: String?

    @Option(
        help: help(
            "sessionIdleExpirySeconds",
            "Seconds a session may stay unchanged before it is forgotten, in memory and in the state file; 0: never [default: 2592000, 30 days]"
        ))
    var sessionIdleExpirySeconds: String?

    @Option(
        help: help(
            "flushIntervalMilliseconds",
            "How often changed sessions are written; acknowledged requests are written before their reply regardless [default: 1000]"
        ))
    var flushIntervalMilliseconds: String?

    @Option(
        help: help(
            "writeBehindNice",
            "How many nice values below the workers' the flush thread runs, 0...19, down to nice 19 at most (Linux): above 0 the workers take the core from a write-behind round rather than waiting for it, which shortens the intents' latency tail on few cores; 0: the workers' priority [default: 10]"
        ))
    var writeBehindNice: String?

    @Option(
        help: help(
            "packIdleAfterSeconds",
            "Seconds a session stays unchanged before its state is kept packed in memory until its next use; 0: never [default: 30]"
        ))
    var packIdleAfterSeconds: String?

    @Option(
        help: help(
            "landingWindowSeconds",
            "An intent has landed when a shell acknowledges its batch within this many seconds of its sending [default: 10]"
        ))
    var landingWindowSeconds: String?

    @Option(
        help: help(
            "maxTracedIntentsPerSecond",
            "Traces exported: intents a second traced because their producer's traceparent says sampled; more are not traced [default: 1000]"
        ))
    var maxTracedIntentsPerSecond: String?

    @Option(
        help: help(
            "flightRecorderIntents",
            "The last intents kept with their sessions' trees, for navctl routes impact to replay against a candidate map (0: none) [default: 4096]"
        ))
    var flightRecorderIntents: String?

    @Option(
        help: help(
            "security.secretKeyFile",
            "Secure mode: file with the server's CURVE secret key (40 Z85 characters, mode 0600; navctl keygen makes one); with --access-file"
        ))
    var secretKeyFile: String?

    @Option(
        help: help(
            "security.accessFile",
            "Secure mode: YAML file of the clients allowed in (name, public key, role, sessions); SIGHUP reloads it"))
    var accessFile: String?

    @Option(
        help: help(
            "security.tokenKeyFile",
            "Secure mode: file with the key of HTTP's bearer tokens (a secret of at least 32 bytes, mode 0600; navctl token issues tokens)"
        ))
    var tokenKeyFile: String?

    @Flag(
        help: ArgumentHelp(
            "Without security, bind endpoints other than loopback, ipc and inproc anyway: anyone who reaches them can steer and watch every session [env: NAVIGATOR_SECURITY_ALLOW_INSECURE_REMOTE=true]"
        ))
    var allowInsecureRemote = false

    @Option(help: help("shutdownTimeoutSeconds", "Longest graceful shutdown before sockets close [default: 10]"))
    var shutdownTimeoutSeconds: String?

    func run() async throws {
        let flags: [String: [String]] = [
            "intents": intents, "requests": requests, "commands": commands, "http": one(http),
            "dataDirectory": one(dataDirectory), "store": one(store), "instanceId": one(instanceId),
            "leaseSeconds": one(leaseSeconds), "clusterEndpoint": one(clusterEndpoint),
            "advertiseHost": one(advertiseHost), "routes": one(routes),
            "workers": one(workers), "logLevel": one(logLevel),
            "maxMessageBytes": one(maxMessageBytes), "highWaterMark": one(highWaterMark),
            "handoffHighWaterMark": one(handoffHighWaterMark),
            "dedupWindowSeconds": one(dedupWindowSeconds),
            "parkedTTLSeconds": one(parkedTTLSeconds),
            "maxParkedPerSession": one(maxParkedPerSession),
            "maxSessions": one(maxSessions),
            "maxMemoryMegabytes": one(maxMemoryMegabytes),
            "maxModals": one(maxModals),
            "maxStackDepth": one(maxStackDepth),
            "maxTabs": one(maxTabs),
            "maxInfoEntries": one(maxInfoEntries),
            "maxTextBytes": one(maxTextBytes),
            "maxTreeBytes": one(maxTreeBytes),
            "maxConditions": one(maxConditions),
            "maxConditionKeyBytes": one(maxConditionKeyBytes),
            "maxSubscriptionsPerPeer": one(maxSubscriptionsPerPeer),
            "streamHistorySize": one(streamHistorySize),
            "streamHistorySeconds": one(streamHistorySeconds),
            "streamQueueSize": one(streamQueueSize),
            "maxStreams": one(maxStreams),
            "maxConnections": one(maxConnections),
            "allowedHosts": allowedHosts,
            "streamHeartbeatSeconds": one(streamHeartbeatSeconds),
            "sessionIdleExpirySeconds": one(sessionIdleExpirySeconds),
            "flushIntervalMilliseconds": one(flushIntervalMilliseconds),
            "writeBehindNice": one(writeBehindNice),
            "packIdleAfterSeconds": one(packIdleAfterSeconds),
            "landingWindowSeconds": one(landingWindowSeconds),
            "maxTracedIntentsPerSecond": one(maxTracedIntentsPerSecond),
            "flightRecorderIntents": one(flightRecorderIntents),
            "shutdownTimeoutSeconds": one(shutdownTimeoutSeconds),
            "security.secretKeyFile": one(secretKeyFile),
            "security.accessFile": one(accessFile),
            "security.tokenKeyFile": one(tokenKeyFile),
            "security.allowInsecureRemote": allowInsecureRemote ? ["true"] : [],
        ]
        let environment = ProcessEnvironment.current
        let configuration: NavigatordConfiguration
        do {
            configuration = try ConfigurationLoader.load(
                file: config ?? environment["NAVIGATOR_CONFIG"], environment: environment, flags: flags)
        } catch {
            printError("navigatord: \(error)")
            throw ExitCode(2)
        }
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "navigatord")
        // Before the store is read: a restore frees large blocks, which would raise them.
        if Heap.holdThresholds(environment: environment) {
            logger.debug("malloc's trim and mmap thresholds held at \(Heap.heldThreshold / 1024) KiB")
        } else {
            logger.debug("malloc's trim and mmap thresholds left to glibc and the environment")
        }
        let telemetry: Telemetry?
        do {
            telemetry = try Telemetry.fromEnvironment(environment, logger: logger)
        } catch {
            printError("navigatord: \(error)")
            throw ExitCode(2)
        }
        do {
            try await Navigator(configuration: configuration, telemetry: telemetry, logger: logger).run()
        } catch let error as RouteMapLoadError {
            // A route map that does not load is a bad setting, like any other: exit status 2.
            printError("navigatord: \(error)")
            throw ExitCode(2)
        } catch let error as RouteMapErrors {
            printError("navigatord: \(error)")
            throw ExitCode(2)
        } catch let error as ConfigurationError {
            // The key or access file of secure mode.
            printError("navigatord: \(error)")
            throw ExitCode(2)
        } catch let error as TokenKey.FileError {
            printError("navigatord: \(error)")
            throw ExitCode(2)
        } catch {
            // Said once, on stderr (a part that failed while running was logged at critical
            // already, with its name).
            printError("navigatord: \(error)")
            throw ExitCode(1)
        }
    }
}

/// An option given at most once, as the loader's list of values.
func one(_ value: String?) -> [String] { value.map { [$0] } ?? [] }

/// Help for an option of a setting, naming its environment variable.
func help(_ key: String, _ text: String, list: Bool = false) -> ArgumentHelp {
    let env = ConfigurationLoader.environmentName(key)
    return ArgumentHelp("\(text) [env: \(env)\(list ? ", comma-separated" : "")]", valueName: "value")
}

func printError(_ text: String) {
    var standardError = StandardError()
    print(text, to: &standardError)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var text = string
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}

/// The process environment as a dictionary, without Foundation.
enum ProcessEnvironment {
    static var current: [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}
