import Logging
import NavigatorEngine
import NavigatorHTTP

/// Everything navigatord can be told (``ConfigurationLoader`` reads it from a file, the
/// environment and flags): the engine's settings, the HTTP server's, and the log level. The
/// defaults are the embedded defaults.
public struct NavigatordConfiguration: Sendable, Hashable {
    public var engine = EngineConfiguration()
    /// host:port of the HTTP server (probes, the JSON API, streams, the page); `off`: none.
    public var httpAddress = "127.0.0.1:7480"
    /// Secure mode: the key (a secret of at least 32 bytes, mode 0600) that signs the bearer
    /// tokens HTTP takes (`navctl token` issues them); nil: HTTP takes no calls in secure mode.
    public var tokenKeyFile: String? = nil
    /// The HTTP session streams.
    public var streams = StreamSettings()
    /// HTTP connections open at once (streams included); nil: as many as the open-file limit
    /// allows, less what ZeroMQ and the store keep (``FileLimit``). More than that is refused.
    public var maxHTTPConnections: Int? = nil
    /// Without security: the host names HTTP requests may be addressed to (`Host`) and come
    /// from (`Origin`), any port.
    public var allowedHosts: Set<String> = HTTPConfiguration.loopbackHosts
    /// How long HTTP clients have for their first request's head, and for each later step
    /// (``HTTPConfiguration``); fixed, shortened by tests.
    public var httpFirstRequestTimeout = Duration.seconds(10)
    public var httpRequestTimeout = Duration.seconds(30)
    /// How long a stream's client may read nothing before it is cut off; fixed, shortened by tests.
    public var httpStalledReaderTimeout = Duration.seconds(60)
    public var logLevel: Logger.Level = .info

    public init() {}

    /// Whether the HTTP server runs.
    public var servesHTTP: Bool { httpAddress != "off" }
}
