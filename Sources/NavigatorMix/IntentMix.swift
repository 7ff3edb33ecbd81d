import NavigatorCore

/// A realistic stream of intents and client events for any route map: targets pushed and
/// presented, paths with back stacks, deep links, tab switches, refreshes, duplicates, a share of
/// invalid intents, and shells going back. Used by `navload` and the resolver benchmark.
///
/// Values are drawn from small pools so that sessions revisit screens (switchers, refreshes and
/// dedup then do real work). Deterministic for a seed.
public struct IntentMix: Sendable {
    /// What comes next for a session.
    public enum Action: Hashable, Sendable {
        case intent(Intent)
        case event(ClientEvent)
    }

    /// Relative weights of each kind of action.
    public struct Weights: Hashable, Sendable {
        public var target = 35
        public var path = 10
        public var url = 10
        public var tabSwitch = 15
        public var refresh = 10
        public var duplicate = 5
        public var invalid = 5
        public var event = 15
        /// Blocking screens (an incoming call): rare, and everything else waits while one is up.
        public var blocking = 1

        public init() {}
    }

    public let map: RouteMap
    public var weights: Weights
    private var random: SplitMix64
    private var counter: UInt64 = 0
    private let screens: [String]
    private let blockingScreens: [String]
    private let withParents: [String]
    private let withURLs: [String]

    public init(map: RouteMap, weights: Weights = Weights(), seed: UInt64 = 1) {
        self.map = map
        self.weights = weights
        random = SplitMix64(seed: seed)
        let all = map.screens.keys.sorted()
        blockingScreens = all.filter { map.screens[$0]!.blocking }
        screens = all.filter { !map.screens[$0]!.blocking }
        withParents = screens.filter { map.screens[$0]!.parent != nil }
        withURLs = screens.filter { map.screens[$0]!.url != nil }
    }

    /// The next action for `session`, sent at `sentAt` (unix ns).
    public mutating func next(session: String, sentAt: Int64 = 0) -> Action {
        let table: [(Int, Kind)] = [
            (weights.target, .target), (weights.path, .path), (weights.url, .url), (weights.tabSwitch, .tabSwitch),
            (weights.refresh, .refresh), (weights.duplicate, .duplicate), (weights.invalid, .invalid),
            (weights.event, .event), (blockingScreens.isEmpty ? 0 : weights.blocking, .blocking),
        ]
        var roll = Int(random.next() % UInt64(max(1, table.reduce(0) { $0 + $1.0 })))
        var kind = Kind.target
        for (weight, candidate) in table {
            if roll < weight {
                kind = candidate
                break
            }
            roll -= weight
        }
        counter += 1
        var id = "m\(counter)"
        let target: Intent.Target
        switch kind {
        case .target:
            target = .path([context(screens.randomElement(using: &random)!)])
        case .blocking:
            target = .path([context(blockingScreens.randomElement(using: &random)!)])
        case .path:
            guard let leaf = withParents.randomElement(using: &random) else {
                return next(session: session, sentAt: sentAt)
            }
            var path = [context(leaf)]
            while let parent = map.screens[path[0].screen]?.parent, path.count < 4 {
                let spec = map.screens[parent]!
                path.insert(ScreenContext(parent, path[0].info.filter { spec.info[$0.key] != nil }), at: 0)
            }
            target = .path(path)
        case .url:
            guard let screen = withURLs.randomElement(using: &random) else {
                return next(session: session, sentAt: sentAt)
            }
            target = .url(url(for: screen))
        case .tabSwitch:
            let root = map.tabs.randomElement(using: &random)?.root ?? map.rootScreen ?? screens[0]
            target = .path([ScreenContext(root)])
        case .refresh:
            target = .path([context(screens.randomElement(using: &random)!, optionalShare: 2)])
        case .duplicate:
            id = "m\(max(1, counter - 1 - random.next() % 3))"
            target = .path([context(screens.randomElement(using: &random)!)])
        case .invalid:
            target =
                random.next() % 2 == 0
                ? .path([ScreenContext("noSuchScreen\(random.next() % 10)")])
                : .path([ScreenContext(screens.randomElement(using: &random)!, ["undeclaredKey": "x"])])
        case .event:
            // Users close what was presented most often of all.
            switch random.next() % 6 {
            case 0, 1, 2: return .event(.dismissedTo(nil))
            case 3: return .event(.tabSelected(map.tabs.randomElement(using: &random)?.name ?? ""))
            case 4: return .event(.conditions(["authenticated": random.next() % 10 != 0]))
            default: return .event(.ready())
            }
        }
        return .intent(Intent(id: id, session: session, target: target, source: "mix", sentAt: sentAt))
    }

    private enum Kind { case target, path, url, tabSwitch, refresh, duplicate, invalid, event, blocking }

    private mutating func context(_ screen: String, optionalShare: UInt64 = 5) -> ScreenContext {
        var info: [String: String] = [:]
        for (key, spec) in map.screens[screen]!.info.sorted(by: { $0.key < $1.key })
        where spec.required || random.next() % optionalShare == 0 {
            info[key] = value(spec.type)
        }
        return ScreenContext(screen, info)
    }

    private mutating func value(_ type: InfoType) -> String {
        switch type {
        case .int: String(1 + random.next() % 20)
        case .string: ["a", "b", "c", "d"][Int(random.next() % 4)]
        case .bool: random.next() % 2 == 0 ? "true" : "false"
        case .uuid: "00000000-0000-4000-8000-00000000000\(random.next() % 8)"
        case .oneOf(let values): values[Int(random.next() % UInt64(values.count))]
        }
    }

    private mutating func url(for screen: String) -> String {
        let spec = map.screens[screen]!
        let info = context(screen).info
        // Fill the pattern's captures; the scheme and literals stay as written.
        var text = spec.url!
        for (key, value) in info {
            text = text.replacingOccurrences(of: "{\(key)}", with: value)
        }
        return text
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
