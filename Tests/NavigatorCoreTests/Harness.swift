import NavigatorCore
import Testing

/// Drives one session of the demo map the way the service does: each intent or event is applied
/// to the state the previous one left, with a clock that moves 1 ms per step.
struct Harness {
    let resolver: Resolver
    var state: SessionState
    var now: Int64 = 1_700_000_000_000_000_000
    private var counter = 0

    init(map: RouteMap = .demo) {
        self.init(resolver: try! Resolver(map: map))  // the demo map is valid (tested separately)
    }

    init(resolver: Resolver) {
        self.resolver = resolver
        state = resolver.initialState()
    }

    @discardableResult
    mutating func send(_ intent: Intent) -> Resolution {
        let resolution = resolver.resolve(intent, into: &state, now: now)
        now += 1_000_000
        return resolution
    }

    @discardableResult
    mutating func show(
        _ path: ScreenContext..., priority: Intent.Priority = .normal, conditions: [String: Bool] = [:],
        ttl: UInt32 = 0
    ) -> Resolution {
        counter += 1
        var intent = Intent(id: "setup-\(counter)", session: "s", target: .path(path), priority: priority)
        intent.setConditions = conditions
        intent.ttlMilliseconds = ttl
        return send(intent)
    }

    @discardableResult
    mutating func url(_ url: String) -> Resolution {
        counter += 1
        return send(Intent(id: "url-\(counter)", session: "s", target: .url(url)))
    }

    @discardableResult
    mutating func event(_ event: ClientEvent) -> EventResolution {
        let result = resolver.apply(event, to: &state, now: now)
        now += 1_000_000
        return result
    }

    var outline: String { state.tree.outline }
}

func chat(_ id: Int, _ extra: [String: String] = [:]) -> ScreenContext {
    ScreenContext("chat", ["conversationId": "\(id)"].merging(extra) { a, _ in a })
}

func thread(_ conversation: Int, _ thread: Int) -> ScreenContext {
    ScreenContext("thread", ["conversationId": "\(conversation)", "threadId": "\(thread)"])
}

let callID = "5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10"
let incomingCall = ScreenContext("incomingCall", ["callId": callID, "caller": "Ada"])

/// What kind of outcome a scenario expects.
enum Expected: Hashable, Sendable, CustomStringConvertible {
    case resolved, refreshed, ignored, parked
    case rejected(ResolveError.Code)

    init(_ outcome: Resolution.Outcome) {
        switch outcome {
        case .resolved: self = .resolved
        case .refreshed: self = .refreshed
        case .ignored: self = .ignored
        case .parked: self = .parked
        case .rejected(let error): self = .rejected(error.code)
        }
    }

    var description: String {
        switch self {
        case .resolved: "resolved"
        case .refreshed: "refreshed"
        case .ignored: "ignored"
        case .parked: "parked"
        case .rejected(let code): "rejected(\(code.rawValue))"
        }
    }
}

/// The demo map's starting tree, as an outline.
let initialOutline = """
    *tab home: home#1
    tab search: search#2
    tab chats: chatList#3
    tab profile: myProfile#4
    """
