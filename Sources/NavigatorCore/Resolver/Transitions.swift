/// Built-in transition provider: shows a target that is not in the tree the way the route map
/// says, from wherever the user is.
///
/// - push: onto the top modal's stack if a (non-blocking) modal is up, else onto the target's
///   home tab (selecting it, dismissing modals, restoring the tab bar after a set-root), else
///   onto the current stack; missing parents are built beneath it (back-stack synthesis) and a
///   unique-in-stack screen replaces its other instance;
/// - modal: the parent is shown first (if the map names one), then a new modal is presented;
/// - setRoot: a single-stack root with the target; modals go;
/// - replace: the top screen is replaced (pushed instead if the top is a tab's root).
public struct RouteMapTransitions: TransitionProvider {
    public init() {}

    public func plan(
        to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch
    ) throws(ResolveError) -> Plan {
        guard let entry = context.index.entry(target.screen) else {
            throw ResolveError(.unknownScreen, "screen \(target.screen) is not in the route map")
        }
        switch entry.spec.transition {
        case .push:
            return try push(target, entry.spec.homeTab, tree, context, &scratch)
        case .modal(let style):
            var commands: [Command]
            var synthesized: [ScreenContext] = []
            var detail: Detail = ""
            if let parent = context.parent(of: target) {
                let parentPlan = try context.show(parent, in: tree, scratch: &scratch)
                commands = parentPlan.commands
                synthesized = parentPlan.synthesized
                synthesized.append(parent)
                if !commands.isEmpty { detail = "showing its parent \(parent) first (\(parentPlan.detail)); " }
            } else {
                commands = scratch.commandArray()
            }
            let modal = Modal(
                id: scratch.ids.take(), style: style, stack: Screen(id: scratch.ids.take(), target).stackWithRoom)
            commands.append(.present(modal))
            detail += .sentence(.presenting(target, style))
            return Plan(commands, detail, synthesized: synthesized)
        case .setRoot:
            var commands = scratch.commandArray()
            commands.append(.setRoot(.stack(Screen(id: scratch.ids.take(), target).stackWithRoom)))
            return Plan(commands, .sentence(.becomesRoot(target, dismissingModals: !tree.modals.isEmpty)))
        case .replace:
            let ref = tree.topStack
            let top = tree.top
            let isTabRoot: Bool
            if case .modal = ref { isTabRoot = false } else { isTabRoot = tree.stack(ref)?.count == 1 }
            var commands = scratch.commandArray()
            if isTabRoot {
                commands.append(.push(Screen(id: scratch.ids.take(), target), onto: ref))
                return Plan(commands, "\(top) is the root of \(ref), so \(target) is pushed instead of replacing it")
            }
            commands.append(.replace(top.id, with: Screen(id: scratch.ids.take(), target)))
            return Plan(commands, "\(target) replaces \(top) in \(ref)")
        }
    }

    private func push(
        _ target: ScreenContext, _ homeTab: String?, _ tree: ScreenTree, _ context: PlanningContext,
        _ scratch: inout PlanScratch
    ) throws(ResolveError) -> Plan {
        var commands = scratch.commandArray()
        let destination: StackRef
        let place: Detail.Sentence.Place
        // The destination stack once the commands so far have run: dismissing and selecting
        // leave every stack as it is, and a fresh tab bar's stacks are known.
        let stack: [Screen]
        if let modal = tree.modals.last, !context.isBlocking(modal) {
            destination = .modal(modal.id)
            place = .topModal(modal.id)
            stack = modal.stack
        } else if let home = homeTab {
            destination = .tab(home)
            place = .homeTab(home)
            if case .tabs(let bar) = tree.root {
                guard let index = bar.index(of: home) else {
                    throw ResolveError(
                        .internalError,
                        "planning a push of \(target): the tree has no tab named \(home); expected one of \(tree.tabNames.joined(separator: ", "))"
                    )
                }
                if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
                if bar.selected != home { commands.append(.selectTab(home)) }
                stack = bar.tabs[index].stack
            } else {
                let root = context.freshTabBar(selecting: home, ids: &scratch.ids)
                guard case .tabs(let bar) = root, let tab = bar.tabs.first(where: { $0.name == home }) else {
                    throw ResolveError(
                        .internalError,
                        "planning a push of \(target): the route map has no tab named \(home); expected one of \(context.map.tabs.map(\.name).joined(separator: ", "))"
                    )
                }
                commands.append(.setRoot(root))
                stack = tab.stack
            }
        } else {
            if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
            destination = tree.topStackIgnoringModals
            place = .current(destination)
            // The tree's invariant: the top stack exists (tab bar or single stack).
            stack = tree.stack(destination) ?? []
        }
        guard !stack.isEmpty else {
            throw ResolveError(
                .internalError, "planning a push of \(target): \(destination) is empty; expected at least one screen")
        }

        // The chain the user would have walked: parents outermost first, then the target. (Built
        // target first and reversed in place, in the scratch's array: none made for it.)
        var chain = scratch.chainArray()
        defer { scratch.keepChain(&chain) }
        chain.append(target)
        while let parent = context.parent(of: chain[chain.count - 1]), !chain.contains(parent) { chain.append(parent) }
        chain.reverse()

        // Keep the stack up to the deepest screen of the chain it already holds; what lies
        // above goes, so Back leads through the chain. A unique-in-stack screen of the chain
        // that the kept part holds with another identity is cut off too.
        // (The kept part is a prefix of the stack: its length, not a copy.)
        var keptCount = stack.count
        var anchor: (chain: Int, stack: Int)? = nil
        while true {
            anchor = nil
            for chainIndex in chain.indices.reversed() {
                let element = chain[chainIndex]
                if let stackIndex = stack[..<keptCount].lastIndex(where: { context.matches($0, element) }) {
                    anchor = (chainIndex, stackIndex)
                    break
                }
            }
            let limit = anchor?.stack ?? keptCount - 1
            var clash: Int? = nil
            for element in chain[((anchor?.chain ?? -1) + 1)...]
            where context.index.entry(element.screen)?.spec.uniqueInStack == true {
                if let index = stack[...limit].lastIndex(where: { $0.context.screen == element.screen }), index >= 1 {
                    clash = max(clash ?? index, index)
                }
            }
            guard let clash else { break }
            keptCount = clash
        }
        let keepIndex = anchor?.stack ?? keptCount - 1
        if keepIndex < stack.count - 1 { commands.append(.popTo(stack[keepIndex].id)) }
        if let anchor, anchor.chain == chain.count - 1 {
            context.appendRefresh(stack[anchor.stack], to: target, into: &commands)
            return Plan(commands, .sentence(.poppingTo(target, in: destination)))
        }
        // What is pushed: the rest of the chain, without tab roots (the tab has its own).
        var synthesized: [ScreenContext] = []
        let last = chain.count - 1
        for index in ((anchor?.chain ?? -1) + 1)...last
        where index == last || context.tab(rootedAt: chain[index].screen) == nil {
            commands.append(.push(Screen(id: scratch.ids.take(), chain[index]), onto: destination))
            if index < last { synthesized.append(chain[index]) }
        }
        return Plan(commands, .sentence(.pushing(target, onto: place, beneath: synthesized)), synthesized: synthesized)
    }
}
