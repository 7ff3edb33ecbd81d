import Locking

/// The endpoints the engine's sockets bound — the server's side of them (with the ports chosen
/// for `tcp://host:*`); a client connects to them as ``ServerEndpoints``.
public struct BoundEndpoints: Hashable, Sendable {
    public var intents: [String] = []
    public var requests: [String] = []
    public var commands: [String] = []
    /// Several instances: where peers forward messages to this one (nil: not bound).
    public var cluster: String?

    public init(intents: [String] = [], requests: [String] = [], commands: [String] = []) {
        self.intents = intents
        self.requests = requests
        self.commands = commands
    }
}

/// What the engine's sockets bound so far, as each loop binds them.
final class BindingRecord: Sendable {
    private let value = Locked(BoundEndpoints())

    func set(intents: [String]) { value.withLock { $0.intents = intents } }
    func set(requests: [String]) { value.withLock { $0.requests = requests } }
    func set(commands: [String]) { value.withLock { $0.commands = commands } }
    func set(cluster: String?) { value.withLock { $0.cluster = cluster } }
    var current: BoundEndpoints { value.withLock { $0 } }
}
