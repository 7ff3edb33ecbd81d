import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Everything `navigatord` can be told. The defaults are the embedded defaults: the demo route
/// map, the endpoints of the README on 127.0.0.1, state in `./navigator-data`.
public struct ServiceConfiguration: Hashable, Sendable {
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
    /// host:port of the HTTP endpoint for /metrics, /healthz and /readyz; `off` disables it.
    public var metricsAddress = "127.0.0.1:7480"
    /// Secure mode: the server's CURVE secret key, a file holding its 40 Z85 characters, readable
    /// by its owner only. Set together with ``accessFile``.
    public var secretKeyFile: String? = nil
    /// Secure mode: the access file, the clients (name, public key, role, sessions).
    public var accessFile: String? = nil
    /// Secure mode: the key (a secret of at least 32 bytes, mode 0600) that signs the bearer
    /// tokens HTTP takes (`navctl token` issues them); nil: HTTP takes no calls in secure mode.
    public var tokenKeyFile: String? = nil
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
    public var instanceID = ServiceConfiguration.hostName
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
    public var workers = ServiceConfiguration.onlineCores
    public var logLevel: Logger.Level = .info
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
    /// Conditions one session may hold.
    public var maxConditions = 64
    /// Bytes of a condition name.
    public var maxConditionKeyBytes = 64
    /// Topics one subscriber connection (commands socket) may hold; one more drops the connection.
    public var maxSubscriptionsPerPeer = 10_000
    /// HTTP session streams: batches kept per streamed session for resuming.
    public var streamHistorySize = 64
    /// HTTP session streams: how long a batch is kept for resuming, and a session followed
    /// after its last stream closed.
    public var streamHistorySeconds = 120
    /// HTTP session streams: events queued per connection before a slow reader gets a snapshot.
    public var streamQueueSize = 64
    /// HTTP session streams: connections open at once on this instance.
    public var maxStreams = 100_000
    /// HTTP session streams: a heartbeat goes to a stream idle for this long.
    public var streamHeartbeatSeconds = 15

    /// The stream settings as the HTTP API uses them.
    var streamSettings: StreamSettings {
        StreamSettings(
            historySize: streamHistorySize, historySeconds: streamHistorySeconds, queueSize: streamQueueSize,
            maxStreams: maxStreams, heartbeatSeconds: streamHeartbeatSeconds)
    }
    /// How long a session may stay unchanged before it is forgotten (memory and state file);
    /// 0 keeps sessions forever.
    public var sessionIdleExpirySeconds = 2_592_000
    /// How often changed sessions are written to the state file.
    public var flushIntervalMilliseconds = 1000
    /// How long a session stays unchanged before its state is kept packed in memory (the state
    /// file's encoding: a few hundred bytes) until its next use; 0 keeps every session live.
    public var packIdleAfterSeconds = 30
    /// How long a graceful shutdown may take before sockets are closed regardless.
    public var shutdownTimeoutSeconds = 10

    public init() {}

    public static var onlineCores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
