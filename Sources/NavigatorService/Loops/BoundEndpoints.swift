import Synchronization

/// The endpoints the sockets actually bound (with the ports chosen for `tcp://host:*`).
public struct Endpoints: Hashable, Sendable {
    public var intents: [String] = []
    public var requests: [String] = []
    public var commands: [String] = []
    /// host:port of the HTTP endpoint, or nil when it is off.
    public var metrics: String?
    /// Several instances: where peers forward messages to this one (nil: not bound).
    public var cluster: String?

    public init(intents: [String] = [], requests: [String] = [], commands: [String] = [], metrics: String? = nil) {
        self.intents = intents
        self.requests = requests
        self.commands = commands
        self.metrics = metrics
    }
}

final class BoundEndpoints: Sendable {
    private let value = Mutex(Endpoints())

    func set(intents: [String]) { value.withLock { $0.intents = intents } }
    func set(requests: [String]) { value.withLock { $0.requests = requests } }
    func set(commands: [String]) { value.withLock { $0.commands = commands } }
    func set(metrics: String?) { value.withLock { $0.metrics = metrics } }
    func set(cluster: String?) { value.withLock { $0.cluster = cluster } }
    var current: Endpoints { value.withLock { $0 } }
}
