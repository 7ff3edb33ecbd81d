/// A screen as a producer names it: a screen name from the route map plus its info.
///
/// The route map says which info keys identify the screen (a chat's `conversationId`); the
/// others only refresh a screen already shown.
public struct ScreenContext: Hashable, Sendable, Codable, CustomStringConvertible {
    public var screen: String
    public var info: [String: String]

    public init(_ screen: String, _ info: [String: String] = [:]) {
        self.screen = screen
        self.info = info
    }

    /// `chat(conversationId=42)`, keys sorted.
    public var description: String {
        guard !info.isEmpty else { return screen }
        var text = ""
        write(to: &text)
        return text
    }
}

/// A node of the tree: a context with an id.
public struct Screen: Hashable, Sendable, Codable, CustomStringConvertible {
    public var id: NodeID
    public var context: ScreenContext

    public init(id: NodeID, _ context: ScreenContext) {
        self.id = id
        self.context = context
    }

    public var description: String { "\(context)\(id)" }

    /// A new stack of this one screen, with room for three more: the pushes that follow a new
    /// modal, a restored tab bar or a set-root screen then make no array of their own (the one
    /// made here is made in any case).
    var stackWithRoom: [Screen] {
        var stack: [Screen] = []
        stack.reserveCapacity(4)
        stack.append(self)
        return stack
    }
}

/// How a modal is presented.
public enum PresentationStyle: String, Hashable, Sendable, Codable, CaseIterable {
    case sheet
    case fullScreen
    case overCurrent
    case popover
}

/// Names one navigation stack of a tree.
public enum StackRef: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The stack of the tab with this name.
    case tab(String)
    /// The stack of the modal with this id.
    case modal(NodeID)
    /// The single-stack root.
    case root

    public var description: String {
        switch self {
        case .tab(let name): "tab \(name)"
        case .modal(let id): "modal \(id)"
        case .root: "root stack"
        }
    }
}

public struct Tab: Hashable, Sendable, Codable {
    public var name: String
    /// Bottom first; never empty.
    public var stack: [Screen]

    public init(name: String, stack: [Screen]) {
        self.name = name
        self.stack = stack
    }
}

public struct TabBar: Hashable, Sendable, Codable {
    public var tabs: [Tab]
    public var selected: String

    public init(tabs: [Tab], selected: String) {
        self.tabs = tabs
        self.selected = selected
    }

    func index(of name: String) -> Int? { tabs.firstIndex { $0.name == name } }
}

/// The root of a tree: a tab bar, or a single navigation stack.
public enum Root: Hashable, Sendable, Codable {
    case tabs(TabBar)
    case stack([Screen])
}

/// A modal above the root: its style and its own stack.
public struct Modal: Hashable, Sendable, Codable {
    public var id: NodeID
    public var style: PresentationStyle
    /// Bottom first; never empty.
    public var stack: [Screen]

    public init(id: NodeID, style: PresentationStyle, stack: [Screen]) {
        self.id = id
        self.style = style
        self.stack = stack
    }
}
