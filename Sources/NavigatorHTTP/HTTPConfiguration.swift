import NavigatorTokens

/// What the HTTP server is told.
public struct HTTPConfiguration: Sendable {
    /// `host:port`, `[ipv6]:port`, `localhost:port`; port 0 picks one.
    public var address: String
    /// The largest request body taken, in bytes (JSON of at most the engine's
    /// `maxMessageBytes` of protobuf: four times that).
    public var maxBodyBytes: Int
    public var streams: StreamSettings
    /// Whether the engine runs in secure mode: then every call needs a bearer token.
    public var secure: Bool
    /// Secure mode: the key tokens are checked with; nil refuses every call (401).
    public var tokens: TokenKey?

    public init(
        address: String, maxBodyBytes: Int, streams: StreamSettings = StreamSettings(), secure: Bool = false,
        tokens: TokenKey? = nil
    ) {
        self.address = address
        self.maxBodyBytes = maxBodyBytes
        self.streams = streams
        self.secure = secure
        self.tokens = tokens
    }
}

/// Settings of the HTTP session streams.
public struct StreamSettings: Sendable, Hashable {
    /// Batches kept per streamed session for resuming, at most.
    public var historySize = 64
    /// How long a batch is kept for resuming, and how long a session stays followed after its
    /// last stream closed (a client that reconnects within it gets only what it missed).
    public var historySeconds = 120
    /// Events queued per connection; a reader that falls further behind gets a snapshot.
    public var queueSize = 64
    /// Stream connections open at once, on this instance.
    public var maxStreams = 100_000
    /// A heartbeat is written to a stream idle for this long.
    public var heartbeatSeconds = 15

    public init() {}
}
