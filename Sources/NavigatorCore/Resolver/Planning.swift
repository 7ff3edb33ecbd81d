/// Hands out service-namespace ids above everything the tree has seen.
public struct IDAllocator: Sendable {
    public private(set) var next: UInt64

    public init(after tree: ScreenTree) { next = tree.lastServiceID + 1 }

    init(next: UInt64) { self.next = next }

    public mutating func take() -> NodeID {
        defer { next += 1 }
        return NodeID(rawValue: next)
    }
}

/// What a plan is made with: new ids (``ids``), and arrays kept from earlier resolutions
/// (``ResolutionBuffers``) whose room is used again, so that a plan's commands and a push's
/// chain of parents make no array of their own.
public struct PlanScratch: Sendable {
    /// Service-namespace ids for the plan's new screens and modals.
    public var ids: IDAllocator
    /// Empty arrays with room, for plans' commands.
    var commands = SpareArrays<Command>()
    /// Empty arrays with room, for a push's chain of parents.
    var chains = SpareArrays<ScreenContext>()

    init(ids: IDAllocator) { self.ids = ids }

    /// An empty array for a plan's commands with room for four: one kept from an earlier
    /// resolution when there is one (the array goes to the plan; it comes back when the
    /// resolution is handed back, ``ResolutionBuffers/recycle(_:)-(Resolution)``).
    public mutating func commandArray() -> [Command] { commands.take() }

    /// Keeps the array of a plan's commands that is not used after all, for another plan.
    mutating func keepCommands(_ array: inout [Command]) { commands.keep(&array) }

    /// An empty array for a push's chain of parents, with room for four; given back with
    /// ``keepChain(_:)`` when the plan is made.
    mutating func chainArray() -> [ScreenContext] { chains.take() }

    mutating func keepChain(_ chain: inout [ScreenContext]) { chains.keep(&chain) }
}

/// A way to the target: the commands, and what to tell a person about them.
public struct Plan: Hashable, Sendable {
    public var commands: [Command]
    public var detail: Detail
    /// Parents built beneath the target (back-stack synthesis), outermost first.
    public var synthesized: [ScreenContext]

    public init(_ commands: [Command], _ detail: Detail, synthesized: [ScreenContext] = []) {
        self.commands = commands
        self.detail = detail
        self.synthesized = synthesized
    }
}

/// Finds a way to a target that is already somewhere in the tree (step 5 of the resolver).
/// Switchers are asked in order; the first plan wins.
public protocol ContextSwitcher: Sendable {
    /// A plan that brings the target to the top, or `nil` if this switcher does not apply.
    func plan(to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch)
        -> Plan?
}

extension ContextSwitcher {
    /// The name shown in explanations, in words: the type's name split at its capitals, without
    /// "Switcher" (`ExistingScreenSwitcher` -> `existing screen`).
    public var name: String {
        var words: [String] = []
        for character in String(describing: Self.self) {
            if character.isUppercase || words.isEmpty { words.append("") }
            words[words.count - 1].append(Character(character.lowercased()))
        }
        if words.count > 1, words.last == "switcher" { words.removeLast() }
        return words.joined(separator: " ")
    }
}

/// Decides how a target that is not in the tree is shown (step 7 of the resolver).
public protocol TransitionProvider: Sendable {
    func plan(
        to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch
    ) throws(ResolveError) -> Plan
}

/// What switchers and transition providers work with: the route map and helpers over it.
public struct PlanningContext: Sendable {
    let resolver: Resolver

    public var map: RouteMap { resolver.core.map }
    var index: RouteIndex { resolver.core.index }

    /// A screen's spec, for switchers and transition providers of one's own.
    public func spec(_ screen: String) -> ScreenSpec? { index.entry(screen)?.spec }

    /// Whether a screen is an instance of the target: same screen, same identity values.
    public func matches(_ screen: Screen, _ target: ScreenContext) -> Bool {
        guard screen.context.screen == target.screen, let keys = index.entry(target.screen)?.spec.identity else {
            return false
        }
        return keys.allSatisfy { screen.context.info[$0] == target.info[$0] }
    }

    /// The tab whose root is `screen`, if any.
    public func tab(rootedAt screen: String) -> String? { index.entry(screen)?.tabRoot }

    /// The info of `target` that differs from what `screen` shows (what a refresh must set).
    public func changes(from screen: Screen, to target: ScreenContext) -> [String: String] {
        // Nearly always nothing differs: find that out without building a dictionary.
        guard target.info.contains(where: { screen.context.info[$0.key] != $0.value }) else { return [:] }
        return target.info.filter { screen.context.info[$0.key] != $0.value }
    }

    /// The refresh command a found screen needs, if any.
    public func refresh(_ screen: Screen, to target: ScreenContext) -> [Command] {
        var commands: [Command] = []
        appendRefresh(screen, to: target, into: &commands)
        return commands
    }

    /// ``refresh(_:to:)`` added to a plan's commands (no array of its own).
    func appendRefresh(_ screen: Screen, to target: ScreenContext, into commands: inout [Command]) {
        let changes = changes(from: screen, to: target)
        if !changes.isEmpty { commands.append(.refresh(screen.id, info: changes)) }
    }

    /// The parent context of `target`, its info taken from the target's info.
    public func parent(of target: ScreenContext) -> ScreenContext? {
        guard let parentName = index.entry(target.screen)?.spec.parent, let parentEntry = index.entry(parentName)
        else {
            return nil
        }
        // The target's info as it is when the parent declares all of it, none when it declares
        // none of it (both common): a new dictionary only for a mix.
        let declared = target.info.keys.reduce(0) { $0 + (parentEntry.declared($1) != nil ? 1 : 0) }
        if declared == target.info.count { return ScreenContext(parentName, target.info) }
        if declared == 0 { return ScreenContext(parentName) }
        return ScreenContext(parentName, target.info.filter { parentEntry.declared($0.key) != nil })
    }

    /// Whether a modal must not be dismissed or covered by navigation.
    public func isBlocking(_ modal: Modal) -> Bool {
        index.hasBlocking && modal.stack.contains { index.entry($0.context.screen)?.blocking == true }
    }

    public func isBlocking(_ screen: Screen) -> Bool {
        index.hasBlocking && index.entry(screen.context.screen)?.blocking == true
    }

    /// A fresh tab bar as the route map starts it, with new ids, selecting `tab`.
    public func freshTabBar(selecting tab: String, ids: inout IDAllocator) -> Root {
        let tabs = map.tabs.map {
            Tab(name: $0.name, stack: Screen(id: ids.take(), ScreenContext($0.root)).stackWithRoom)
        }
        return .tabs(TabBar(tabs: tabs, selected: tab))
    }

    /// The commands that bring `target` to the top of `tree`, as the resolver would for one
    /// step (already shown, switchers, transition), without guards or blocking. A transition
    /// provider uses it to show a modal's parent before presenting the modal.
    public func show(_ target: ScreenContext, in tree: ScreenTree, scratch: inout PlanScratch) throws(ResolveError)
        -> Plan
    {
        try resolver.planStep(to: target, in: tree, scratch: &scratch, context: self).plan
    }
}
