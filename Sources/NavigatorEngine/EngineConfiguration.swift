import NavigatorStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the engine can be told (navigatord's settings but those of HTTP and logging). The
/// defaults are the embedded defaults: the demo route map, the endpoints of the README on
/// 127.0.0.1, state in `./navigator-data`.
public struct EngineConfiguration: Hashable, Sendable {
    /// This machine's host name (the default instance id).
    public static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "navigatord" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "navigatord" : name
    }

    /// Where producers PUSH intents (PULL binds here).
    public var intentEndpoints = ["tcp://127.0.0.1:7401"]
    /// Where clients send requests (ROUTER binds here).
    public var requestEndpoints = ["tcp://127.0.0.1:7402"]
    /// Where shells subscribe to command batches (XPUB binds here).
    public var commandEndpoints = ["tcp://127.0.0.1:7403"]
    /// Secure mode: the server's CURVE secret key, a file holding its 40 Z85 characters, readable
    /// by its owner only. Set together with ``accessFile``.
    public var secretKeyFile: String? = nil
    /// Secure mode: the access file, the clients (name, public key, role, sessions).
    public var accessFile: String? = nil
    /// Without security, bind non-loopback endpoints anyway (anyone who reaches them can steer
    /// and watch every session).
    public var allowInsecureRemote = false
    /// Where the state file lives (SQLite store).
    public var dataDirectory = "./navigator-data"
    /// Which database keeps the sessions: the SQLite state file in ``dataDirectory`` (one
    /// instance, the default) or a PostgreSQL database.
    public var store = StoreSelection.sqlite
    /// Several instances (PostgreSQL store): this instance's name among them, unique per
    /// instance (its leases carry it).
    public var instanceID = EngineConfiguration.hostName
    /// Several instances: how long a partition lease lasts without renewal (renewed every fifth
    /// of it): an instance that dies loses its partitions to the others after this long.
    public var leaseSeconds = 5
    /// Several instances: where peers forward intents and requests for this instance's sessions
    /// (a ROUTER binds here; advertised in the database); `off`: no forwarding (every instance
    /// answers MOVED for the sessions it does not serve).
    public var clusterEndpoint = "tcp://127.0.0.1:7404"
    /// Several instances: the host peers reach this instance at, when the cluster endpoint binds
    /// every interface (`tcp://0.0.0.0:7404`, `tcp://*:7404`); empty: the host name.
    public var advertiseHost = ""
    /// A route map file (YAML or JSON); `nil` means the built-in demo map.
    public var routeMapPath: String? = nil
    /// Worker threads resolving intents; sessions are spread over them.
    public var workers = EngineConfiguration.onlineCores
    /// Largest intent or request accepted; larger ones are rejected as too large.
    public var maxMessageBytes = 64 * 1024
    /// Messages queued per peer before PUSH producers block and PUB drops for slow shells.
    public var highWaterMark: Int32 = 100_000
    /// Messages queued between the service's own threads (from worker 0, which reads the intents
    /// socket, and from requests to each worker); an intent message carries up to 64 intents.
    /// When a worker's queue is full, the intents socket is not read (it fills to `highWaterMark` and
    /// producers' PUSH blocks) and acknowledged requests for it are answered OVERLOADED.
    public var handoffHighWaterMark: Int32 = 100
    /// How long intent ids are remembered for dedup.
    public var dedupWindowSeconds = 600
    /// How long an intent may stay parked when it does not say.
    public var parkedTTLSeconds = 300
    /// Parked intents one session may hold; the oldest expire beyond it.
    public var maxParkedPerSession = 64
    /// Sessions held at once; an intent or event that would create one more is refused.
    public var maxSessions = 2_000_000
    /// Resident memory, in MiB, above which navigatord stops with the reason, its state flushed
    /// (``MemoryGuard``: libzmq lets a peer make it hold an unfinished message's frames without
    /// bound). nil: ``MemoryGuard/defaultLimit()`` (the machine's memory or its cgroup's limit,
    /// less a margin); 0: no ceiling.
    public var maxMemoryMegabytes: Int? = nil
    /// Modals one session may present at once.
    public var maxModals = 16
    /// Screens in one navigation stack.
    public var maxStackDepth = 64
    /// Tabs of a tab-bar root.
    public var maxTabs = 16
    /// Info entries of one screen.
    public var maxInfoEntries = 32
    /// Bytes of a screen name, tab name, info key or info value.
    public var maxTextBytes = 1_024
    /// Bytes of every name, key and value of one session's tree together.
    public var maxTreeBytes = 65_536
    /// Conditions one session may hold.
    public var maxConditions = 64
    /// Bytes of a condition name.
    public var maxConditionKeyBytes = 64
    /// Topics one subscriber connection (commands socket) may hold; one more drops the connection.
    public var maxSubscriptionsPerPeer = 10_000
    /// How long a session may stay unchanged before it is forgotten (memory and state file);
    /// 0 keeps sessions forever.
    public var sessionIdleExpirySeconds = 2_592_000
    /// How often changed sessions are written to the state file.
    public var flushIntervalMilliseconds = 1000
    /// How many nice values below the workers' the flush thread (the write-behind, and the
    /// commits acknowledged requests wait for) runs, 0...19, at most down to nice 19 (Linux;
    /// elsewhere it stays at theirs, with a warning). Above 0, a woken worker or libzmq I/O thread
    /// takes the core from a write-behind round rather than waiting out a stretch of it, which made
    /// much of the intents' latency tail on a machine of few cores (BENCHMARKS.md, "The write-behind
    /// gives way"); an acknowledged request's commit waits behind the round's current chunk
    /// (``Persistence/chunk``), which then takes longer. 0: the workers' priority.
    public var writeBehindNice = 10
    /// How long a session stays unchanged before its state is kept packed in memory (the state
    /// file's encoding: a few hundred bytes) until its next use; 0 keeps every session live.
    public var packIdleAfterSeconds = 30
    /// An intent has landed when a shell acknowledges its batch within this many seconds of
    /// its sending (the landing ratio by route, `navctl stats --routes`).
    public var landingWindowSeconds = 10
    /// When traces are exported: intents a second (the whole instance) traced because their
    /// producer's `traceparent` says sampled; beyond, they are not traced. Producers cannot make
    /// navigatord trace, and pay for, every intent.
    public var maxTracedIntentsPerSecond = 1_000
    /// The flight recorder: how many of the last intents the instance keeps, each with its
    /// session's tree as it was before, for `routes_impact` to replay against a candidate route
    /// map (split evenly between the workers; 0: none kept, no impact reports).
    public var flightRecorderIntents = 4_096
    /// How long a graceful shutdown may take before sockets are closed regardless.
    public var shutdownTimeoutSeconds = 10

    public init() {}

    public static var onlineCores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// Safe by default: security is both files or neither, and without it every socket must be
    /// loopback, ipc or inproc unless ``allowInsecureRemote`` says otherwise.
    public func checkExposure() throws(ConfigurationError) {
        switch (secretKeyFile, accessFile) {
        case (nil, nil): break
        case (_?, _?): return
        case (nil, _?):
            throw ConfigurationError(
                "security.accessFile is set without security.secretKeyFile; secure mode needs both (--secret-key-file, --access-file)"
            )
        case (_?, nil):
            throw ConfigurationError(
                "security.secretKeyFile is set without security.accessFile; secure mode needs both (--secret-key-file, --access-file)"
            )
        }
        guard !allowInsecureRemote else { return }
        let endpoints =
            intentEndpoints.map { ("intents", $0) } + requestEndpoints.map { ("requests", $0) }
            + commandEndpoints.map { ("commands", $0) }
            + (store != .sqlite && clusterEndpoint != "off" ? [("clusterEndpoint", clusterEndpoint)] : [])
        for (key, endpoint) in endpoints where !EndpointCheck.isLocal(endpoint) {
            throw ConfigurationError(
                "\(key) endpoint \(endpoint) is not loopback, and security is off: anyone who reaches it could steer and watch every session; expected tcp://127.0.0.1:port, ipc:// or inproc:// — or configure security (--secret-key-file, --access-file), or pass --allow-insecure-remote"
            )
        }
    }

    /// Whether the engine runs in secure mode (CURVE and the access file).
    public var isSecure: Bool { secretKeyFile != nil && accessFile != nil }
}

/// A configuration that cannot be used: where the bad value came from, and what was expected.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Which endpoints only this machine can reach.
public enum EndpointCheck {
    /// Whether only this machine can reach the endpoint: ipc, inproc, or tcp on a loopback
    /// address (`*`, `0.0.0.0`, other addresses, host and interface names other than
    /// `localhost` and `lo` are not).
    public static func isLocal(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return false }
        var host = String(endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host == "lo" || isLoopback(host)
    }

    /// Whether `host` is a loopback name or address.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
