/// What the route map says about one screen.
public struct ScreenSpec: Hashable, Sendable, Codable {
    /// How the screen is shown when it is not in the tree yet.
    public enum Transition: Hashable, Sendable {
        /// Pushed onto a stack: the top modal's if there is a modal (that is not blocking), else
        /// the screen's home tab.
        case push
        /// Presented as a new modal with this style.
        case modal(PresentationStyle)
        /// Becomes the whole root (a single stack); modals are dismissed.
        case setRoot
        /// Takes the place of the top screen.
        case replace
    }

    /// A condition the session must meet before the screen is shown.
    public struct Guard: Hashable, Sendable, Codable {
        /// A session condition, e.g. `authenticated`; met when it is set to true.
        public var condition: String
        /// The screen shown instead while the condition is not met; the intent waits (parked).
        public var redirect: String

        public init(condition: String, redirect: String) {
            self.condition = condition
            self.redirect = redirect
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            try container.rejectUnknownKeys(["condition", "redirect"], in: "a guard")
            condition = try container.decode(String.self, forKey: AnyKey("condition"))
            redirect = try container.decode(String.self, forKey: AnyKey("redirect"))
        }
    }

    /// What is shown instead of a screen that a session's shell is too old for (``since``).
    public enum Fallback: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The screen's parent, its info taken from the target's.
        case parent
        /// Another screen, its info taken from the target's where it declares it.
        case screen(String)
        /// A screen that shows a web page (a web view), given the URL made from `url`: its
        /// `{key}` placeholders are the target's info values, percent-encoded, and the result is
        /// the screen's info `url`.
        case webView(screen: String, url: String)

        public var description: String {
            switch self {
            case .parent: "parent"
            case .screen(let name): name
            case .webView(let screen, let url): "\(screen) with url \(url)"
            }
        }

        /// `fallback: parent`, `fallback: chatList` (or `{screen: chatList}`), or
        /// `fallback: {screen: web, url: "https://example.com/chat/{conversationId}"}`.
        public init(from decoder: any Decoder) throws {
            if let name = try? decoder.singleValueContainer().decode(String.self) {
                self = name == "parent" ? .parent : .screen(name)
                return
            }
            let container = try decoder.container(keyedBy: AnyKey.self)
            try container.rejectUnknownKeys(["screen", "url"], in: "a fallback")
            let screen = try container.decode(String.self, forKey: AnyKey("screen"))
            if let url = try container.optional(String.self, "url") {
                self = .webView(screen: screen, url: url)
            } else {
                self = .screen(screen)
            }
        }

        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .parent:
                var container = encoder.singleValueContainer()
                try container.encode("parent")
            case .screen(let name):
                var container = encoder.container(keyedBy: AnyKey.self)
                try container.encode(name, forKey: AnyKey("screen"))
            case .webView(let screen, let url):
                var container = encoder.container(keyedBy: AnyKey.self)
                try container.encode(screen, forKey: AnyKey("screen"))
                try container.encode(url, forKey: AnyKey("url"))
            }
        }
    }

    public var transition: Transition
    /// The tab a pushed screen belongs to.
    public var homeTab: String?
    /// The screen beneath this one when the user walks there; used to build a back stack.
    public var parent: String?
    /// The info keys that identify one instance of the screen.
    public var identity: [String]
    /// Declared info keys and their types.
    public var info: [String: InfoSpec]
    /// At most one screen of this name per stack: showing another instance replaces the first.
    public var uniqueInStack: Bool
    /// Navigation may not dismiss it (an incoming call); intents that would are parked.
    public var blocking: Bool
    public var guardCondition: Guard?
    /// A deep-link pattern such as `app://chat/{conversationId}`.
    public var url: String?
    /// The first app version whose shells have this screen: a session whose shell said (in its
    /// `ready` event) it runs an older one gets ``fallback`` instead, or the intent is refused
    /// (`app_too_old`). Shells that never said their version are taken to have every screen.
    public var since: AppVersion?
    public var fallback: Fallback?

    public init(
        transition: Transition = .push, homeTab: String? = nil, parent: String? = nil, identity: [String] = [],
        info: [String: InfoSpec] = [:], uniqueInStack: Bool = false, blocking: Bool = false,
        guard guardCondition: Guard? = nil, url: String? = nil, since: AppVersion? = nil, fallback: Fallback? = nil
    ) {
        self.since = since
        self.fallback = fallback
        self.transition = transition
        self.homeTab = homeTab
        self.parent = parent
        self.identity = identity
        self.info = info
        self.uniqueInStack = uniqueInStack
        self.blocking = blocking
        self.guardCondition = guardCondition
        self.url = url
    }

    static let keys = [
        "transition", "style", "homeTab", "parent", "identity", "info", "uniqueInStack", "blocking", "guard", "url",
        "since", "fallback",
    ]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        try container.rejectUnknownKeys(Self.keys, in: "a screen")
        let transitionName = try container.optional(String.self, "transition") ?? "push"
        let styleName = try container.optional(String.self, "style")
        switch transitionName {
        case "push": transition = .push
        case "modal":
            let name = styleName ?? "sheet"
            guard let style = PresentationStyle(rawValue: name) else {
                throw corrupted(
                    decoder, "style", "style \(name) is unknown; expected sheet, fullScreen, overCurrent or popover")
            }
            transition = .modal(style)
        case "setRoot": transition = .setRoot
        case "replace": transition = .replace
        default:
            throw corrupted(
                decoder, "transition",
                "transition \(transitionName) is unknown; expected push, modal, setRoot or replace")
        }
        if styleName != nil, case .modal = transition {
        } else if styleName != nil {
            throw corrupted(
                decoder, "style",
                "style is given for a \(transitionName) transition; expected it only with transition: modal")
        }
        homeTab = try container.optional(String.self, "homeTab")
        parent = try container.optional(String.self, "parent")
        identity = try container.optional([String].self, "identity") ?? []
        info = try container.optional([String: InfoSpec].self, "info") ?? [:]
        uniqueInStack = try container.optional(Bool.self, "uniqueInStack") ?? false
        blocking = try container.optional(Bool.self, "blocking") ?? false
        guardCondition = try container.optional(Guard.self, "guard")
        url = try container.optional(String.self, "url")
        since = try container.optional(AppVersion.self, "since")
        fallback = try container.optional(Fallback.self, "fallback")
    }

    /// Writes only what differs from the defaults, so an encoded map reads like a written one.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        switch transition {
        case .push: break
        case .modal(let style):
            try container.encode("modal", forKey: AnyKey("transition"))
            try container.encode(style.rawValue, forKey: AnyKey("style"))
        case .setRoot: try container.encode("setRoot", forKey: AnyKey("transition"))
        case .replace: try container.encode("replace", forKey: AnyKey("transition"))
        }
        try container.encodeIfPresent(homeTab, forKey: AnyKey("homeTab"))
        try container.encodeIfPresent(parent, forKey: AnyKey("parent"))
        if !identity.isEmpty { try container.encode(identity, forKey: AnyKey("identity")) }
        if !info.isEmpty { try container.encode(info, forKey: AnyKey("info")) }
        if uniqueInStack { try container.encode(true, forKey: AnyKey("uniqueInStack")) }
        if blocking { try container.encode(true, forKey: AnyKey("blocking")) }
        try container.encodeIfPresent(guardCondition, forKey: AnyKey("guard"))
        try container.encodeIfPresent(url, forKey: AnyKey("url"))
        try container.encodeIfPresent(since, forKey: AnyKey("since"))
        try container.encodeIfPresent(fallback, forKey: AnyKey("fallback"))
    }

    /// The keys that must be present.
    public var requiredInfo: [String] { info.filter(\.value.required).keys.sorted() }

    public var isModal: Bool {
        if case .modal = transition { return true }
        return false
    }
}
