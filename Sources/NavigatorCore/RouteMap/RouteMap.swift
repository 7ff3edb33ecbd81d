/// The declarative description of an app's navigation: its tabs and, for every screen, how it is
/// shown, where it lives, what identifies it and what it needs. Read from YAML or JSON and
/// validated as a whole; see ``validate()``.
public struct RouteMap: Hashable, Sendable, Codable {
    /// One tab of the tab bar, in display order.
    public struct TabSpec: Hashable, Sendable, Codable {
        public var name: String
        /// The screen at the bottom of the tab's stack.
        public var root: String

        public init(name: String, root: String) {
            self.name = name
            self.root = root
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            try container.rejectUnknownKeys(["name", "root"], in: "a tab")
            name = try container.decode(String.self, forKey: AnyKey("name"))
            root = try container.decode(String.self, forKey: AnyKey("root"))
        }
    }

    /// Tabs in order; empty for an app whose root is a single stack (see ``rootScreen``).
    public var tabs: [TabSpec]
    /// The bottom screen of a single-stack app (no tabs).
    public var rootScreen: String?
    /// The tab selected at start; the first tab if absent.
    public var initialTab: String?
    public var screens: [String: ScreenSpec]

    public init(tabs: [TabSpec], rootScreen: String? = nil, initialTab: String? = nil, screens: [String: ScreenSpec]) {
        self.tabs = tabs
        self.rootScreen = rootScreen
        self.initialTab = initialTab
        self.screens = screens
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        try container.rejectUnknownKeys(["tabs", "root", "initialTab", "screens"], in: "the route map")
        tabs = try container.optional([TabSpec].self, "tabs") ?? []
        rootScreen = try container.optional(String.self, "root")
        initialTab = try container.optional(String.self, "initialTab")
        screens = try container.decode([String: ScreenSpec].self, forKey: AnyKey("screens"))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        if !tabs.isEmpty { try container.encode(tabs, forKey: AnyKey("tabs")) }
        try container.encodeIfPresent(rootScreen, forKey: AnyKey("root"))
        try container.encodeIfPresent(initialTab, forKey: AnyKey("initialTab"))
        try container.encode(screens, forKey: AnyKey("screens"))
    }

    /// The tab whose root is `screen`, if any.
    public func tab(rootedAt screen: String) -> TabSpec? { tabs.first { $0.root == screen } }

    /// The tree a new session starts with: every tab showing its root (ids 1, 2, ...), the
    /// initial tab selected; or the single root screen.
    public func initialTree() -> ScreenTree {
        if tabs.isEmpty {
            // Validation guarantees a root screen; the fallback keeps this total.
            let screen = Screen(id: 1, ScreenContext(rootScreen ?? "root"))
            return try! ScreenTree(root: .stack([screen]))  // one screen, valid id: cannot fail
        }
        let bar = TabBar(
            tabs: tabs.enumerated().map { index, tab in
                Tab(name: tab.name, stack: [Screen(id: NodeID(rawValue: UInt64(index + 1)), ScreenContext(tab.root))])
            },
            selected: initialTab ?? tabs[0].name)
        // Validated maps have unique tab names and an existing initial tab.
        return (try? ScreenTree(root: .tabs(bar)))
            ?? (try! ScreenTree(root: .stack([Screen(id: 1, ScreenContext(tabs[0].root))])))
    }
}
