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
    /// HTTP connections open at once (streams included); one more is answered 503 and closed.
    public var maxConnections: Int
    /// Without security: the host names a request's `Host` and `Origin` may name (any port), so
    /// that no web page can drive or read a local navigatord (DNS rebinding, cross-site
    /// WebSockets). Nil: not checked (secure mode, where every call needs a token).
    public var allowedHosts: Set<String>?
    /// How long a new connection has to send the head of its first request; then how long a
    /// request's body may take after its head, and a connection may stay idle between requests.
    /// A client slower than that is disconnected.
    public var firstRequestTimeout = Duration.seconds(10)
    public var requestTimeout = Duration.seconds(30)
    /// How long a stream's client may leave what is written to it unread (its connection not
    /// taking more) before it is cut off: its events wait in bounded memory meanwhile, but it
    /// holds a connection.
    public var stalledReaderTimeout = Duration.seconds(60)

    /// The host names a plain (not secure) navigatord answers to by default: loopback's.
    public static let loopbackHosts: Set<String> = ["localhost", "127.0.0.1", "::1"]

    /// The host name of a `Host` value or of an origin's authority (`name`, `name:port`,
    /// `[v6]:port`), lower-cased; nil if it is not one.
    public static func hostName(_ authority: String) -> String? {
        var text = Substring(authority)
        if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        let name: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, parts.count == 1 || parts[1].allSatisfy(\.isNumber) else { return nil }
            name = parts[0]
        }
        guard !name.isEmpty, name.utf8.count <= 255 else { return nil }
        return name.lowercased()
    }

    public init(
        address: String, maxBodyBytes: Int, streams: StreamSettings = StreamSettings(), secure: Bool = false,
        tokens: TokenKey? = nil, maxConnections: Int = 10_000, allowedHosts: Set<String>? = loopbackHosts
    ) {
        self.address = address
        self.maxBodyBytes = maxBodyBytes
        self.streams = streams
        self.secure = secure
        self.tokens = tokens
        self.maxConnections = maxConnections
        self.allowedHosts = secure ? nil : allowedHosts
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
