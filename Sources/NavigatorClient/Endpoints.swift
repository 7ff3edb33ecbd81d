/// Where navigatord listens; the defaults match navigatord's.
public struct ServiceEndpoints: Hashable, Sendable {
    public var intents: String
    public var requests: String
    public var commands: String

    public init(
        intents: String = "tcp://127.0.0.1:7401", requests: String = "tcp://127.0.0.1:7402",
        commands: String = "tcp://127.0.0.1:7403"
    ) {
        self.intents = intents
        self.requests = requests
        self.commands = commands
    }
}
