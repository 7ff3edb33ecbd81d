import NavigatorCore

// Conversions between NavigatorCore's tree and commands and their wire messages. Reading from the
// wire checks what protobuf cannot (a oneof that must be set, a non-empty stack, a valid tree) and
// says which field was wrong.

extension Navigator_V1_ScreenContext {
    public init(_ context: ScreenContext) {
        self.init()
        screen = context.screen
        info = context.info
    }

    public var core: ScreenContext { ScreenContext(screen, info) }
}

extension Navigator_V1_Screen {
    public init(_ screen: Screen) {
        self.init()
        id = screen.id.rawValue
        context = .init(screen.context)
    }

    public func core(_ field: String) throws(WireError) -> Screen {
        let node = NodeID(rawValue: id)
        guard node.isValid else { throw WireError(.malformed, "\(field).id is \(id); expected a non-zero id") }
        return Screen(id: node, context.core)
    }
}

extension Navigator_V1_PresentationStyle {
    public init(_ style: PresentationStyle) {
        switch style {
        case .sheet: self = .sheet
        case .fullScreen: self = .fullScreen
        case .overCurrent: self = .overCurrent
        case .popover: self = .popover
        }
    }

    /// Unknown and unspecified styles read as a sheet, as the protocol says.
    public var core: PresentationStyle {
        switch self {
        case .fullScreen: .fullScreen
        case .overCurrent: .overCurrent
        case .popover: .popover
        default: .sheet
        }
    }
}

extension Navigator_V1_StackRef {
    public init(_ ref: StackRef) {
        self.init()
        switch ref {
        case .tab(let name): tab = name
        case .modal(let id): modal = id.rawValue
        case .root: root = true
        }
    }

    public func core(_ field: String) throws(WireError) -> StackRef {
        switch target {
        case .tab(let name): return .tab(name)
        case .modal(let id): return .modal(NodeID(rawValue: id))
        case .root: return .root
        case nil: throw WireError(.malformed, "\(field) names no stack; expected tab, modal or root")
        }
    }
}

func screens(_ list: [Navigator_V1_Screen], _ field: String) throws(WireError) -> [Screen] {
    var result: [Screen] = []
    result.reserveCapacity(list.count)
    for (index, screen) in list.enumerated() { result.append(try screen.core("\(field)[\(index)]")) }
    return result
}

extension Navigator_V1_Modal {
    public init(_ modal: Modal) {
        self.init()
        id = modal.id.rawValue
        style = .init(modal.style)
        stack = modal.stack.map(Navigator_V1_Screen.init)
    }

    public func core(_ field: String) throws(WireError) -> Modal {
        Modal(id: NodeID(rawValue: id), style: style.core, stack: try screens(stack, "\(field).stack"))
    }
}

extension Navigator_V1_Root {
    public init(_ root: Root) {
        self.init()
        switch root {
        case .tabs(let bar):
            tabBar = .with {
                $0.tabs = bar.tabs.map { tab in
                    .with {
                        $0.name = tab.name
                        $0.stack = tab.stack.map(Navigator_V1_Screen.init)
                    }
                }
                $0.selected = bar.selected
            }
        case .stack(let list):
            stack = .with { $0.stack = list.map(Navigator_V1_Screen.init) }
        }
    }

    public func core(_ field: String) throws(WireError) -> Root {
        switch kind {
        case .tabBar(let bar):
            var tabs: [Tab] = []
            for (index, tab) in bar.tabs.enumerated() {
                tabs.append(Tab(name: tab.name, stack: try screens(tab.stack, "\(field).tab_bar.tabs[\(index)].stack")))
            }
            return .tabs(TabBar(tabs: tabs, selected: bar.selected))
        case .stack(let root):
            return .stack(try screens(root.stack, "\(field).stack.stack"))
        case nil:
            throw WireError(.malformed, "\(field) is empty; expected tab_bar or stack")
        }
    }
}

extension Navigator_V1_ScreenTree {
    public init(_ tree: ScreenTree) {
        self.init()
        root = .init(tree.root)
        modals = tree.modals.map(Navigator_V1_Modal.init)
        version = tree.version
        lastServiceID = tree.lastServiceID
    }

    /// The tree, validated as NavigatorCore validates every tree.
    public func core(_ field: String = "tree") throws(WireError) -> ScreenTree {
        guard hasRoot else { throw WireError(.malformed, "\(field).root is missing") }
        let root = try root.core("\(field).root")
        var list: [Modal] = []
        for (index, modal) in modals.enumerated() { list.append(try modal.core("\(field).modals[\(index)]")) }
        do {
            return try ScreenTree(root: root, modals: list, version: version, lastServiceID: lastServiceID)
        } catch {
            throw WireError(.malformed, "\(field) is not a valid tree: \(error.message)")
        }
    }
}

extension Navigator_V1_Command {
    public init(_ command: Command) {
        self.init()
        switch command {
        case .selectTab(let name): selectTab = .with { $0.tab = name }
        case .push(let screen, let ref):
            push = .with {
                $0.stack = .init(ref)
                $0.screen = .init(screen)
            }
        case .present(let modal): present = .with { $0.modal = .init(modal) }
        case .popTo(let id): popTo = .with { $0.screenID = id.rawValue }
        case .popToRoot(let ref): popToRoot = .with { $0.stack = .init(ref) }
        case .dismissTo(let id): dismissTo = .with { $0.modalID = id?.rawValue ?? 0 }
        case .setRoot(let root): setRoot = .with { $0.root = .init(root) }
        case .replace(let id, let screen):
            replace = .with {
                $0.screenID = id.rawValue
                $0.screen = .init(screen)
            }
        case .refresh(let id, let info):
            refresh = .with {
                $0.screenID = id.rawValue
                $0.info = info
            }
        }
    }

    public func core(_ field: String) throws(WireError) -> Command {
        switch kind {
        case .selectTab(let value): return .selectTab(value.tab)
        case .push(let value):
            return .push(
                try value.screen.core("\(field).push.screen"), onto: try value.stack.core("\(field).push.stack"))
        case .present(let value): return .present(try value.modal.core("\(field).present.modal"))
        case .popTo(let value): return .popTo(NodeID(rawValue: value.screenID))
        case .popToRoot(let value): return .popToRoot(try value.stack.core("\(field).pop_to_root.stack"))
        case .dismissTo(let value): return .dismissTo(value.modalID == 0 ? nil : NodeID(rawValue: value.modalID))
        case .setRoot(let value): return .setRoot(try value.root.core("\(field).set_root.root"))
        case .replace(let value):
            return .replace(NodeID(rawValue: value.screenID), with: try value.screen.core("\(field).replace.screen"))
        case .refresh(let value): return .refresh(NodeID(rawValue: value.screenID), info: value.info)
        case nil: throw WireError(.malformed, "\(field) has no command set")
        }
    }
}

extension Navigator_V1_CommandBatch {
    /// The batch's commands as NavigatorCore commands, ready for `ScreenTree.apply`.
    public func coreCommands() throws(WireError) -> [Command] {
        var result: [Command] = []
        result.reserveCapacity(commands.count)
        for (index, command) in commands.enumerated() { result.append(try command.core("commands[\(index)]")) }
        return result
    }
}
