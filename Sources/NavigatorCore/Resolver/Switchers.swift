/// Built-in switcher: a screen with the target's identity anywhere in the tree — the frontmost
/// one — is brought to the top: the modals above it are dismissed, its tab selected, its stack
/// popped to it, and its info refreshed if the target's differs.
public struct ExistingScreenSwitcher: ContextSwitcher {
    public init() {}

    public func plan(
        to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch
    )
        -> Plan?
    {
        // Frontmost first: modals from the top down, then the selected tab, then the other tabs
        // in order. No intermediate arrays, and the modals and tabs read where they are (by
        // index), not copied out one by one: this runs for most intents.
        let modals = tree.modals
        for modal in modals.indices.reversed() {
            if let index = modals[modal].stack.lastIndex(where: { context.matches($0, target) }) {
                return plan(.modal(modals[modal].id), modals[modal].stack, index, target, tree, context, &scratch)
            }
        }
        switch tree.root {
        case .stack(let screens):
            if let index = screens.lastIndex(where: { context.matches($0, target) }) {
                return plan(.root, screens, index, target, tree, context, &scratch)
            }
        case .tabs(let bar):
            let selected = bar.index(of: bar.selected)
            if let selected, let index = bar.tabs[selected].stack.lastIndex(where: { context.matches($0, target) }) {
                return plan(.tab(bar.selected), bar.tabs[selected].stack, index, target, tree, context, &scratch)
            }
            for tab in bar.tabs.indices where tab != selected {
                if let index = bar.tabs[tab].stack.lastIndex(where: { context.matches($0, target) }) {
                    return plan(.tab(bar.tabs[tab].name), bar.tabs[tab].stack, index, target, tree, context, &scratch)
                }
            }
        }
        return nil
    }

    private func plan(
        _ ref: StackRef, _ screens: [Screen], _ index: Int, _ target: ScreenContext, _ tree: ScreenTree,
        _ context: PlanningContext, _ scratch: inout PlanScratch
    ) -> Plan {
        let screen = screens[index]
        var commands = scratch.commandArray()  // at most dismiss, select, pop and refresh
        switch ref {
        case .modal(let id):
            if tree.modals.last?.id != id { commands.append(.dismissTo(id)) }
        case .tab(let name):
            if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
            if tree.selectedTab != name { commands.append(.selectTab(name)) }
        case .root:
            if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
        }
        if index < screens.count - 1 { commands.append(.popTo(screen.id)) }
        context.appendRefresh(screen, to: target, into: &commands)
        return Plan(commands, .sentence(.alreadyIn(screen, ref)))
    }

    /// The name its plans' sentence gives it (``ContextSwitcher/name``, written out once).
    static let builtInName = "existing screen"
}

/// Built-in switcher: a tab's root screen selects the tab and pops it to its root. When the root
/// is not a tab bar (after a set-root screen such as a welcome flow), the tab bar comes back.
public struct TabRootSwitcher: ContextSwitcher {
    public init() {}

    public func plan(
        to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch
    )
        -> Plan?
    {
        guard let tab = context.tab(rootedAt: target.screen) else { return nil }
        guard case .tabs = tree.root, let stack = tree.stack(.tab(tab)) else {
            let root = context.freshTabBar(selecting: tab, ids: &scratch.ids)
            var commands = scratch.commandArray()
            commands.append(.setRoot(root))
            if case .tabs(let bar) = root, let screen = bar.tabs.first(where: { $0.name == tab })?.stack[0] {
                context.appendRefresh(screen, to: target, into: &commands)
            }
            return Plan(commands, .sentence(.tabRoot(screen: target.screen, tab: tab, restoringTabBar: true)))
        }
        var commands = scratch.commandArray()
        if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
        if tree.selectedTab != tab { commands.append(.selectTab(tab)) }
        if stack.count > 1 { commands.append(.popToRoot(.tab(tab))) }
        context.appendRefresh(stack[0], to: target, into: &commands)
        return Plan(commands, .sentence(.tabRoot(screen: target.screen, tab: tab, restoringTabBar: false)))
    }

    /// The name its plans' sentence gives it (``ContextSwitcher/name``, written out once).
    static let builtInName = "tab root"
}

extension ScreenTree {
    /// The stack that would be on top if there were no modals.
    var topStackIgnoringModals: StackRef {
        switch root {
        case .tabs(let bar): .tab(bar.selected)
        case .stack: .root
        }
    }
}
