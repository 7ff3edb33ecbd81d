/// A routing intent: what a producer asks to show to one session.
public struct Intent: Hashable, Sendable, Codable {
    /// What to show: contexts outermost first (the last is the target), or a deep link.
    public enum Target: Hashable, Sendable, Codable {
        case path([ScreenContext])
        case url(String)
    }

    /// How urgently the intent must be shown.
    public enum Priority: Int, Hashable, Sendable, Codable, Comparable, CaseIterable {
        /// Parked while a blocking modal is up.
        case normal = 0
        /// Parked too, but released before normal intents.
        case high = 1
        /// May dismiss a blocking modal to reach its target.
        case critical = 2

        public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Idempotency key: the same id within the dedup window is ignored.
    public var id: String
    public var session: String
    public var target: Target
    public var animated: Bool
    /// Who sent it (for audit and logs).
    public var source: String
    public var priority: Priority
    /// How long it may stay parked, in milliseconds; 0 means the resolver's default.
    public var ttlMilliseconds: UInt32
    /// When the producer sent it, unix nanoseconds.
    public var sentAt: Int64
    /// Session conditions to set before resolving.
    public var setConditions: [String: Bool]
    /// Wait (parked, within the time to live) until the session's shell is ready.
    public var waitForReady: Bool
    /// The producer's W3C `traceparent`, valid (``TraceParent/isValid(_:)``) or empty.
    public var traceparent: String = ""

    public init(
        id: String, session: String, target: Target, animated: Bool = true, source: String = "",
        priority: Priority = .normal, ttlMilliseconds: UInt32 = 0, sentAt: Int64 = 0,
        setConditions: [String: Bool] = [:], waitForReady: Bool = false
    ) {
        self.waitForReady = waitForReady
        self.id = id
        self.session = session
        self.target = target
        self.animated = animated
        self.source = source
        self.priority = priority
        self.ttlMilliseconds = ttlMilliseconds
        self.sentAt = sentAt
        self.setConditions = setConditions
    }

    /// An intent for a path of contexts.
    public static func show(
        _ path: ScreenContext..., id: String, session: String = "s", priority: Priority = .normal
    ) -> Intent {
        Intent(id: id, session: session, target: .path(path), priority: priority)
    }
}

/// What a client shell reports about its own tree.
public enum ClientEvent: Hashable, Sendable, Codable {
    /// The shell is up: intents waiting for a ready shell go. `appVersion`: the app's version,
    /// for the route map's `since:` (nil: not said, every screen taken to be there).
    case ready(appVersion: AppVersion? = nil)
    /// The shell goes away or starts over: intents that wait for a ready shell wait again.
    case suspended
    /// The user went back to this screen.
    case poppedTo(NodeID)
    /// The user dismissed modals down to this one (`nil`: all).
    case dismissedTo(NodeID?)
    case tabSelected(String)
    /// The shell pushed a screen of its own (client-namespace id).
    case pushed(Screen, onto: StackRef)
    /// The shell presented a modal of its own (client-namespace ids).
    case presented(Modal)
    /// The shell's whole tree replaces the service's.
    case sync(ScreenTree)
    /// The shell applied the batch with this seq.
    case ack(UInt64)
    /// Session conditions for guards.
    case conditions([String: Bool])
}
