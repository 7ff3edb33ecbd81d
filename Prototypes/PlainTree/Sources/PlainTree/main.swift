// A model of the resolver's commonest work on a tree of plain values (issue 31's "tree of plain
// values"), to measure what such a tree would cost against the resolver as it is, on the same
// intents in the same run. Not part of the service: see docs/plain-tree.md.
//
// What it covers: single-screen intents for push screens and tab roots (navload's mix without
// paths, deep links, modals, set-root, replace, events, guards or parked intents) on sessions whose
// root is the demo map's tab bar: validation, dedup, already shown, the existing-screen switcher,
// the push transition with back-stack synthesis and unique-in-stack, the commands applied, the
// tree's limits and invariant checked, and the explanation kept as data. A check pass compares
// every outcome and command, and the trees, with the resolver's.
import NavigatorCore
import NavigatorMix

#if canImport(Glibc)
    import Glibc
#endif

// MARK: The route map as tables

final class PMap {
    struct Declared {
        var key: UInt16
        var type: InfoType
        var required: Bool
    }
    let names: [String]
    let nameBytes: [Int]
    let keys: [String]
    let keyBytes: [Int]
    let isPush: [Bool]
    let homeTab: [Int]  // -1: none
    let parent: [Int]  // -1: none
    let unique: [Bool]
    let hasGuard: [Bool]
    let tabRoot: [Int]  // the tab this screen roots, -1: none
    let identity: [[UInt16]]  // key indices, sorted
    let declared: [[Declared]]  // by key index
    let tabNames: [String]
    let tabBytes: Int
    private let slots: [Int32]

    init(_ map: RouteMap) {
        let names = map.screens.keys.sorted()
        self.names = names
        nameBytes = names.map { $0.utf8.count }
        var keySet = Set<String>()
        for spec in map.screens.values { keySet.formUnion(spec.info.keys) }
        let keys = keySet.sorted()
        self.keys = keys
        keyBytes = keys.map { $0.utf8.count }
        func key(_ name: String) -> UInt16 { UInt16(keys.firstIndex(of: name)!) }
        func place(_ name: String?) -> Int { name.flatMap { names.firstIndex(of: $0) } ?? -1 }
        tabNames = map.tabs.map(\.name)
        tabBytes = tabNames.reduce(0) { $0 + $1.utf8.count }
        var isPush: [Bool] = []
        var homeTab: [Int] = []
        var parent: [Int] = []
        var unique: [Bool] = []
        var hasGuard: [Bool] = []
        var tabRoot: [Int] = []
        var identity: [[UInt16]] = []
        var declared: [[Declared]] = []
        for name in names {
            let spec = map.screens[name]!
            if case .push = spec.transition { isPush.append(true) } else { isPush.append(false) }
            homeTab.append(spec.homeTab.flatMap { map.tabs.map(\.name).firstIndex(of: $0) } ?? -1)
            parent.append(place(spec.parent))
            unique.append(spec.uniqueInStack)
            hasGuard.append(spec.guardCondition != nil)
            tabRoot.append(map.tabs.firstIndex { $0.root == name } ?? -1)
            identity.append(spec.identity.map(key).sorted())
            declared.append(
                spec.info.keys.map {
                    Declared(key: key($0), type: spec.info[$0]!.type, required: spec.info[$0]!.required)
                }
                .sorted { $0.key < $1.key })
        }
        self.isPush = isPush
        self.homeTab = homeTab
        self.parent = parent
        self.unique = unique
        self.hasGuard = hasGuard
        self.tabRoot = tabRoot
        self.identity = identity
        self.declared = declared
        // Names found as NavigatorCore's `NameTable` finds them (FNV-1a into a table at most half
        // full; that type is internal to its module), without its second look for a name spelled
        // otherwise: the demo map's names are ASCII.
        var size = 8
        while size < names.count * 2 { size *= 2 }
        var slots = [Int32](repeating: -1, count: size)
        for (index, name) in names.enumerated() {
            var slot = Int(truncatingIfNeeded: PMap.hash(name)) & (size - 1)
            while slots[slot] >= 0 { slot = (slot + 1) & (size - 1) }
            slots[slot] = Int32(index)
        }
        self.slots = slots
    }

    static func hash(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var name = name
        name.withUTF8 { for byte in $0 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 } }
        return hash
    }

    func screen(named name: String) -> Int? {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: PMap.hash(name)) & mask
        while true {
            let index = Int(slots[slot])
            if index < 0 { return nil }
            if names[index] == name { return index }
            slot = (slot + 1) & mask
        }
    }

    func key(named name: String, of screen: Int) -> Int? {
        for (place, entry) in declared[screen].enumerated() where keys[Int(entry.key)] == name { return place }
        return nil
    }
}

// MARK: The tree as plain values

struct PScreen {
    var id: UInt64
    var name: UInt16
    var infoCount: UInt16
    var infoStart: UInt32
}

struct PInfo {
    var key: UInt16
    var length: UInt16
    var start: UInt32
}

/// A tab-bar tree: every screen in one array, tab by tab, bottom first; info entries and their
/// bytes in two more. Copying it is three references; reading it touches no counter.
struct PTree {
    var screens: [PScreen]
    var stackEnd: [Int]  // per tab
    var infos: [PInfo]
    var bytes: [UInt8]
    var selected: Int
    var version: UInt64
    var lastServiceID: UInt64
    var deadBytes = 0

    func stackRange(_ tab: Int) -> Range<Int> { (tab == 0 ? 0 : stackEnd[tab - 1])..<stackEnd[tab] }
}

/// The target as validated: a screen, and its info entries sorted by key, each value canonical.
struct PTarget {
    var screen: Int = 0
    var keys: [UInt16] = []
    var values: [String] = []

    mutating func reset() {
        keys.removeAll(keepingCapacity: true)
        values.removeAll(keepingCapacity: true)
    }
}

/// One element of a push's chain: a screen and which of the target's entries it carries.
struct PElement: Equatable {
    var screen: Int
    var mask: UInt32
}

enum PCommand {
    case selectTab(Int)
    case popTo(UInt64)
    case push(id: UInt64, screen: Int, mask: UInt32, tab: Int)
    case refresh(id: UInt64, mask: UInt32)
}

enum POutcome: Equatable {
    case resolved, refreshed, ignored, rejected
}

enum PStep {
    case validated
    case duplicate
    case alreadyOnTop(UInt64)
    case alreadyIn(UInt64, tab: Int)
    case pushing(Int, tab: Int, beneath: Int)
    case poppingTo(Int, tab: Int)
    case rejected(String)
}

struct PState {
    var tree: PTree
    var recent = RecentIntentIDs()
}

struct PResolver {
    let map: PMap
    let options = Resolver.Options()
    var target = PTarget()
    var commands: [PCommand] = []
    var steps: [PStep] = []
    var chain: [PElement] = []

    init(map: PMap) {
        self.map = map
        target.keys.reserveCapacity(8)
        target.values.reserveCapacity(8)
        commands.reserveCapacity(8)
        steps.reserveCapacity(8)
        chain.reserveCapacity(8)
    }

    // Validation: the screen, its required and declared keys, canonical values.
    mutating func validate(_ intent: Intent) -> Bool {
        guard !intent.id.isEmpty, intent.id.utf8.count <= 128, !intent.session.isEmpty,
            case .path(let path) = intent.target, path.count == 1,
            let screen = map.screen(named: path[0].screen)
        else { return false }
        target.reset()
        target.screen = screen
        let declared = map.declared[screen]
        for (key, value) in path[0].info {
            guard let place = map.key(named: key, of: screen), value.utf8.count <= options.limits.maxTextBytes,
                let canonical = declared[place].type.normalize(value)
            else { return false }
            // Sorted by key as they go in (a handful).
            var at = target.keys.count
            while at > 0, target.keys[at - 1] > declared[place].key { at -= 1 }
            target.keys.insert(declared[place].key, at: at)
            target.values.insert(canonical, at: at)
        }
        for entry in declared where entry.required {
            guard target.keys.contains(entry.key) else { return false }
        }
        return true
    }

    // The value of key `key` in the target's entries selected by `mask`.
    @inline(__always) func targetValue(_ key: UInt16, _ mask: UInt32) -> Int? {
        for index in target.keys.indices where target.keys[index] == key && mask & (1 << index) != 0 { return index }
        return nil
    }

    @inline(__always) func equal(_ tree: PTree, _ info: PInfo, _ value: String) -> Bool {
        var value = value
        return value.withUTF8 { utf8 in
            guard utf8.count == Int(info.length) else { return false }
            return tree.bytes.withUnsafeBufferPointer { bytes in
                memcmp(bytes.baseAddress! + Int(info.start), utf8.baseAddress!, utf8.count) == 0
            }
        }
    }

    /// Whether `screen` is an instance of the element: same screen, same identity values.
    func matches(_ tree: PTree, _ screen: PScreen, _ element: PElement) -> Bool {
        guard Int(screen.name) == element.screen else { return false }
        for key in map.identity[element.screen] {
            var found: PInfo? = nil
            for index in 0..<Int(screen.infoCount) where tree.infos[Int(screen.infoStart) + index].key == key {
                found = tree.infos[Int(screen.infoStart) + index]
            }
            let mine = targetValue(key, element.mask)
            switch (found, mine) {
            case (nil, nil): continue
            case (let info?, let index?): if !equal(tree, info, target.values[index]) { return false }
            default: return false
            }
        }
        return true
    }

    /// The target's entries (of `mask`) whose values the screen lacks or has otherwise.
    func changes(_ tree: PTree, _ screen: PScreen, _ mask: UInt32) -> UInt32 {
        var changed: UInt32 = 0
        for index in target.keys.indices where mask & (1 << index) != 0 {
            var same = false
            for place in 0..<Int(screen.infoCount)
            where tree.infos[Int(screen.infoStart) + place].key == target.keys[index] {
                same = equal(tree, tree.infos[Int(screen.infoStart) + place], target.values[index])
            }
            if !same { changed |= 1 << index }
        }
        return changed
    }

    func parentMask(_ parent: Int, _ mask: UInt32) -> UInt32 {
        var result: UInt32 = 0
        for index in target.keys.indices where mask & (1 << index) != 0 {
            if map.declared[parent].contains(where: { $0.key == target.keys[index] }) { result |= 1 << index }
        }
        return result
    }

    mutating func resolve(_ intent: Intent, into state: inout PState, now: Int64) -> POutcome {
        commands.removeAll(keepingCapacity: true)
        steps.removeAll(keepingCapacity: true)
        guard validate(intent) else {
            steps.append(.rejected("invalid"))
            return .rejected
        }
        steps.append(.validated)
        let idHash = options.dedupKey.intentIDHash(intent.id)
        if state.recent.seen(idHash, within: options.dedupWindow, now: now) != nil {
            steps.append(.duplicate)
            return .ignored
        }
        guard !map.hasGuard[target.screen], map.isPush[target.screen] else { fatalError("outside the model") }
        // Planned on the tree as it is (borrowed: nothing copied, so the change below is made in
        // place), then applied.
        switch plan(state.tree) {
        case .alreadyShown: return finishIgnored(&state, idHash, now)
        case .apply(let outcome, let nextID): return apply(&state, idHash, now, nextID: nextID) ? outcome : .rejected
        }
    }

    enum Decision {
        case alreadyShown
        case apply(POutcome, nextID: UInt64)
    }

    mutating func plan(_ tree: PTree) -> Decision {
        let all: UInt32 = (1 << UInt32(target.keys.count)) - 1
        let element = PElement(screen: target.screen, mask: all)
        var nextID = tree.lastServiceID + 1
        // Already on top.
        let selectedRange = tree.stackRange(tree.selected)
        let top = tree.screens[selectedRange.upperBound - 1]
        if matches(tree, top, element) {
            let changed = changes(tree, top, all)
            steps.append(.alreadyOnTop(top.id))
            if changed == 0 { return .alreadyShown }
            commands.append(.refresh(id: top.id, mask: changed))
            return .apply(.refreshed, nextID: nextID)
        }
        // The existing-screen switcher: the selected tab, then the others in order.
        var found: (tab: Int, index: Int)? = nil
        for index in selectedRange.reversed() where matches(tree, tree.screens[index], element) {
            found = (tree.selected, index)
            break
        }
        if found == nil {
            outer: for tab in tree.stackEnd.indices where tab != tree.selected {
                for index in tree.stackRange(tab).reversed() where matches(tree, tree.screens[index], element) {
                    found = (tab, index)
                    break outer
                }
            }
        }
        if let (tab, index) = found {
            let range = tree.stackRange(tab)
            if tree.selected != tab { commands.append(.selectTab(tab)) }
            if index < range.upperBound - 1 { commands.append(.popTo(tree.screens[index].id)) }
            let changed = changes(tree, tree.screens[index], all)
            if changed != 0 { commands.append(.refresh(id: tree.screens[index].id, mask: changed)) }
            steps.append(.alreadyIn(tree.screens[index].id, tab: tab))
            return .apply(.resolved, nextID: nextID)
        }
        // The push transition: the home tab, else the selected one.
        let home = map.homeTab[target.screen]
        let destination = home >= 0 ? home : tree.selected
        if destination != tree.selected { commands.append(.selectTab(destination)) }
        let stack = tree.stackRange(destination)
        chain.removeAll(keepingCapacity: true)
        chain.append(element)
        while true {
            let last = chain[chain.count - 1]
            let parent = map.parent[last.screen]
            guard parent >= 0 else { break }
            let candidate = PElement(screen: parent, mask: parentMask(parent, last.mask))
            if chain.contains(candidate) { break }
            chain.append(candidate)
        }
        chain.reverse()
        var keptCount = stack.count
        var anchor: (chain: Int, stack: Int)? = nil
        while true {
            anchor = nil
            search: for chainIndex in chain.indices.reversed() {
                for offset in (0..<keptCount).reversed()
                where matches(tree, tree.screens[stack.lowerBound + offset], chain[chainIndex]) {
                    anchor = (chainIndex, offset)
                    break search
                }
            }
            let limit = anchor?.stack ?? keptCount - 1
            var clash: Int? = nil
            for element in chain[((anchor?.chain ?? -1) + 1)...] where map.unique[element.screen] {
                for offset in (0...limit).reversed()
                where Int(tree.screens[stack.lowerBound + offset].name) == element.screen {
                    if offset >= 1 { clash = max(clash ?? offset, offset) }
                    break
                }
            }
            guard let clash else { break }
            keptCount = clash
        }
        let keepIndex = anchor?.stack ?? keptCount - 1
        if keepIndex < stack.count - 1 { commands.append(.popTo(tree.screens[stack.lowerBound + keepIndex].id)) }
        if let anchor, anchor.chain == chain.count - 1 {
            let changed = changes(tree, tree.screens[stack.lowerBound + anchor.stack], all)
            if changed != 0 {
                commands.append(.refresh(id: tree.screens[stack.lowerBound + anchor.stack].id, mask: changed))
            }
            steps.append(.poppingTo(target.screen, tab: destination))
            return .apply(.resolved, nextID: nextID)
        }
        let last = chain.count - 1
        var beneath = 0
        for index in ((anchor?.chain ?? -1) + 1)...last where index == last || map.tabRoot[chain[index].screen] < 0 {
            commands.append(.push(id: nextID, screen: chain[index].screen, mask: chain[index].mask, tab: destination))
            nextID += 1
            if index < last { beneath += 1 }
        }
        steps.append(.pushing(target.screen, tab: destination, beneath: beneath))
        return .apply(.resolved, nextID: nextID)
    }

    mutating func finishIgnored(_ state: inout PState, _ idHash: UInt64, _ now: Int64) -> POutcome {
        state.recent.insert(idHash, now: now, window: options.dedupWindow, capacity: options.dedupCapacity)
        return .ignored
    }

    /// The commands applied to the session's tree, all or nothing: the depth they lead to is
    /// checked first, then they change the tree in place and the invariant is walked.
    mutating func apply(_ state: inout PState, _ idHash: UInt64, _ now: Int64, nextID: UInt64) -> Bool {
        if commands.isEmpty { return true }
        // The depth of the stack pushed onto (pops first), before anything changes.
        var tab = state.tree.selected
        var depth = state.tree.stackRange(tab).count
        for command in commands {
            switch command {
            case .selectTab(let to):
                tab = to
                depth = state.tree.stackRange(to).count
            case .popTo(let id):
                let range = state.tree.stackRange(tab)
                if let index = range.firstIndex(where: { state.tree.screens[$0].id == id }) {
                    depth = index - range.lowerBound + 1
                }
            case .push:
                depth += 1
            case .refresh:
                break
            }
        }
        guard depth <= options.limits.maxStackDepth else {
            commands.removeAll(keepingCapacity: true)
            steps.append(.rejected("a stack of \(depth) screens; expected at most \(options.limits.maxStackDepth)"))
            return false
        }
        for command in commands {
            switch command {
            case .selectTab(let to):
                state.tree.selected = to
            case .popTo(let id):
                let range = state.tree.stackRange(state.tree.selected)
                let index = range.firstIndex { state.tree.screens[$0].id == id }!
                let gone = range.upperBound - index - 1
                for dead in (index + 1)..<range.upperBound {
                    state.tree.deadBytes += Int(state.tree.screens[dead].infoCount)
                }
                state.tree.screens.removeSubrange((index + 1)..<range.upperBound)
                for later in state.tree.selected..<state.tree.stackEnd.count { state.tree.stackEnd[later] -= gone }
            case .push(let id, let screen, let mask, let tab):
                let start = state.tree.infos.count
                var count = 0
                for index in target.keys.indices where mask & (1 << index) != 0 {
                    let offset = state.tree.bytes.count
                    state.tree.bytes.append(contentsOf: target.values[index].utf8)
                    state.tree.infos.append(
                        PInfo(
                            key: target.keys[index], length: UInt16(state.tree.bytes.count - offset),
                            start: UInt32(offset)))
                    count += 1
                }
                let at = state.tree.stackEnd[tab]
                state.tree.screens.insert(
                    PScreen(id: id, name: UInt16(screen), infoCount: UInt16(count), infoStart: UInt32(start)), at: at)
                for later in tab..<state.tree.stackEnd.count { state.tree.stackEnd[later] += 1 }
                state.tree.lastServiceID = max(state.tree.lastServiceID, id)
            case .refresh(let id, let mask):
                let index = state.tree.screens.firstIndex { $0.id == id }!
                let old = state.tree.screens[index]
                let start = state.tree.infos.count
                var count = 0
                // Merged, sorted by key: the old entries not replaced, then the new ones.
                var merged: [(key: UInt16, from: Int, isTarget: Bool)] = []
                for place in 0..<Int(old.infoCount) {
                    let info = state.tree.infos[Int(old.infoStart) + place]
                    if let index = targetValue(info.key, mask) {
                        merged.append((info.key, index, true))
                    } else {
                        merged.append((info.key, Int(old.infoStart) + place, false))
                    }
                }
                for index in target.keys.indices
                where mask & (1 << index) != 0 && !merged.contains(where: { $0.key == target.keys[index] }) {
                    merged.append((target.keys[index], index, true))
                }
                merged.sort { $0.key < $1.key }
                for entry in merged {
                    let offset = state.tree.bytes.count
                    if entry.isTarget {
                        state.tree.bytes.append(contentsOf: target.values[entry.from].utf8)
                    } else {
                        let info = state.tree.infos[entry.from]
                        state.tree.bytes.append(
                            contentsOf: state.tree.bytes[Int(info.start)..<Int(info.start) + Int(info.length)])
                    }
                    state.tree.infos.append(
                        PInfo(key: entry.key, length: UInt16(state.tree.bytes.count - offset), start: UInt32(offset)))
                    count += 1
                }
                state.tree.deadBytes += Int(old.infoCount)
                state.tree.screens[index].infoStart = UInt32(start)
                state.tree.screens[index].infoCount = UInt16(count)
            }
            state.tree.version += 1
        }
        if state.tree.deadBytes > 64 && state.tree.deadBytes * 2 > state.tree.infos.count { compact(&state.tree) }
        check(state.tree)
        state.recent.insert(idHash, now: now, window: options.dedupWindow, capacity: options.dedupCapacity)
        return true
    }

    /// Drops the info entries and bytes no screen holds.
    func compact(_ tree: inout PTree) {
        var infos: [PInfo] = []
        var bytes: [UInt8] = []
        infos.reserveCapacity(tree.infos.count)
        bytes.reserveCapacity(tree.bytes.count)
        for index in tree.screens.indices {
            let start = infos.count
            for place in 0..<Int(tree.screens[index].infoCount) {
                let info = tree.infos[Int(tree.screens[index].infoStart) + place]
                let offset = bytes.count
                bytes.append(contentsOf: tree.bytes[Int(info.start)..<Int(info.start) + Int(info.length)])
                infos.append(PInfo(key: info.key, length: info.length, start: UInt32(offset)))
            }
            tree.screens[index].infoStart = UInt32(start)
        }
        tree.infos = infos
        tree.bytes = bytes
        tree.deadBytes = 0
    }

    /// The invariant and limits, walked over the whole tree after every change.
    func check(_ tree: PTree) {
        var previous = 0
        var textBytes = map.tabBytes
        for tab in tree.stackEnd.indices {
            let end = tree.stackEnd[tab]
            precondition(end > previous && end - previous <= options.limits.maxStackDepth, "stack")
            previous = end
        }
        precondition(previous == tree.screens.count, "screens")
        for screen in tree.screens {
            precondition(screen.id != 0 && screen.id <= tree.lastServiceID, "id")
            textBytes += map.nameBytes[Int(screen.name)]
            precondition(Int(screen.infoCount) <= options.limits.maxInfoEntries, "entries")
            for place in 0..<Int(screen.infoCount) {
                let info = tree.infos[Int(screen.infoStart) + place]
                textBytes += map.keyBytes[Int(info.key)] + Int(info.length)
            }
        }
        // Unique ids, by pairs (a tree of a few dozen screens).
        let count = tree.screens.count
        tree.screens.withUnsafeBufferPointer { screens in
            for index in 0..<count {
                for other in (index + 1)..<max(count, index + 1) where screens[other].id == screens[index].id {
                    preconditionFailure("duplicate id")
                }
            }
        }
        precondition(textBytes <= options.limits.maxTreeBytes, "bytes")
    }
}

// MARK: Conversions, for the check

func plainTree(_ tree: ScreenTree, _ map: PMap) -> PTree {
    guard case .tabs(let bar) = tree.root, tree.modals.isEmpty else { fatalError("outside the model") }
    var result = PTree(
        screens: [], stackEnd: [], infos: [], bytes: [], selected: bar.tabs.firstIndex { $0.name == bar.selected }!,
        version: tree.version, lastServiceID: tree.lastServiceID)
    for tab in bar.tabs {
        for screen in tab.stack {
            let start = result.infos.count
            for (key, value) in screen.context.info.sorted(by: { $0.key < $1.key }) {
                let offset = result.bytes.count
                result.bytes.append(contentsOf: value.utf8)
                result.infos.append(
                    PInfo(
                        key: UInt16(map.keys.firstIndex(of: key)!), length: UInt16(value.utf8.count),
                        start: UInt32(offset)))
            }
            result.screens.append(
                PScreen(
                    id: screen.id.rawValue, name: UInt16(map.names.firstIndex(of: screen.context.screen)!),
                    infoCount: UInt16(screen.context.info.count), infoStart: UInt32(start)))
        }
        result.stackEnd.append(result.screens.count)
    }
    return result
}

func describe(_ tree: PTree, _ map: PMap) -> String {
    var text = "selected \(map.tabNames[tree.selected]);"
    for tab in tree.stackEnd.indices {
        text += " \(map.tabNames[tab]):"
        for index in tree.stackRange(tab) {
            let screen = tree.screens[index]
            var info: [String: String] = [:]
            for place in 0..<Int(screen.infoCount) {
                let entry = tree.infos[Int(screen.infoStart) + place]
                info[map.keys[Int(entry.key)]] = String(
                    decoding: tree.bytes[Int(entry.start)..<Int(entry.start) + Int(entry.length)], as: UTF8.self)
            }
            text += " \(ScreenContext(map.names[Int(screen.name)], info))#\(screen.id)"
        }
    }
    return text
}

func describe(_ tree: ScreenTree) -> String {
    guard case .tabs(let bar) = tree.root else { return "not a tab bar" }
    var text = "selected \(bar.selected);"
    for tab in bar.tabs {
        text += " \(tab.name):"
        for screen in tab.stack { text += " \(screen.context)#\(screen.id.rawValue)" }
    }
    return text
}

func realCommands(_ resolver: PResolver, _ tree: PTree) -> [Command] {
    let map = resolver.map
    func info(_ mask: UInt32) -> [String: String] {
        var result: [String: String] = [:]
        for index in resolver.target.keys.indices where mask & (1 << index) != 0 {
            result[map.keys[Int(resolver.target.keys[index])]] = resolver.target.values[index]
        }
        return result
    }
    return resolver.commands.map { command in
        switch command {
        case .selectTab(let tab): .selectTab(map.tabNames[tab])
        case .popTo(let id): .popTo(NodeID(rawValue: id))
        case .push(let id, let screen, let mask, let tab):
            .push(
                Screen(id: NodeID(rawValue: id), ScreenContext(map.names[screen], info(mask))),
                onto: .tab(map.tabNames[tab]))
        case .refresh(let id, let mask): .refresh(NodeID(rawValue: id), info: info(mask))
        }
    }
}

// MARK: The run

func fixed(_ value: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return digits == 0 ? String(Int(rounded)) : String(rounded)
}

/// The check: every outcome and command, and every tree at the end, as the resolver's.
func check(_ intents: [(session: Int, intent: Intent)], _ resolver: Resolver, _ plainMap: PMap, sessions: Int) {
    var states = [SessionState](repeating: resolver.initialState(), count: sessions)
    var plain = [PState](repeating: PState(tree: plainTree(resolver.initialState().tree, plainMap)), count: sessions)
    var model = PResolver(map: plainMap)
    var now: Int64 = 1_700_000_000_000_000_000
    var kinds = [String: Int]()
    for (session, intent) in intents {
        now += 5_000_000
        let resolution = resolver.resolve(intent, into: &states[session], now: now)
        let outcome = model.resolve(intent, into: &plain[session], now: now)
        let expected: POutcome
        var expectedCommands: [Command] = []
        switch resolution.outcome {
        case .resolved(let commands):
            expected = .resolved
            expectedCommands = commands
        case .refreshed(let commands):
            expected = .refreshed
            expectedCommands = commands
        case .ignored: expected = .ignored
        case .rejected: expected = .rejected
        case .parked: fatalError("parked: outside the model")
        }
        kinds["\(expected)", default: 0] += 1
        let got = outcome == .rejected || outcome == .ignored ? [] : realCommands(model, plain[session].tree)
        guard outcome == expected, got == expectedCommands else {
            print(
                "MISMATCH for \(intent.target) in session \(session): resolver \(resolution.outcome), model \(outcome) \(got)"
            )
            print("  resolver tree: \(describe(states[session].tree))")
            print("  model tree:    \(describe(plain[session].tree, plainMap))")
            exit(1)
        }
    }
    for session in 0..<sessions where describe(states[session].tree) != describe(plain[session].tree, plainMap) {
        print("MISMATCH of trees in session \(session):")
        print("  \(describe(states[session].tree))")
        print("  \(describe(plain[session].tree, plainMap))")
        exit(1)
    }
    let screens = states.reduce(0) { $0 + $1.tree.stacks.reduce(0) { $0 + $1.screens.count } }
    let outcomes = kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    let perSession = fixed(Double(screens) / Double(sessions), 1)
    print("check: \(intents.count) intents over \(sessions) sessions: the same outcomes, commands and trees")
    print("       (\(outcomes); \(perSession) screens a session at the end)")
}

/// Nanoseconds for two laps over the intents, each resolved by `resolve` (which says whether it
/// was resolved: a run that resolves nothing is a broken run).
@inline(__always)
func timed(_ intents: [(session: Int, intent: Intent)], _ resolve: (Int, Intent, Int64) -> Bool) -> Double {
    var now: Int64 = 1_700_000_000_000_000_000
    var resolved = 0
    let clock = ContinuousClock()
    let start = clock.now
    for _ in 0..<2 {
        for (session, intent) in intents {
            now += 5_000_000
            if resolve(session, intent, now) { resolved += 1 }
        }
    }
    let elapsed = clock.now - start
    precondition(resolved > 0)
    return Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9
}

/// The resolver as a worker calls it (its arrays handed back).
func timeResolver(_ intents: [(session: Int, intent: Intent)], _ resolver: Resolver, sessions: Int) -> Double {
    var states = [SessionState](repeating: resolver.initialState(), count: sessions)
    var buffers = ResolutionBuffers()
    return timed(intents) { session, intent, now in
        var resolution = resolver.resolve(intent, into: &states[session], now: now, buffers: &buffers)
        defer { buffers.recycle(&resolution) }
        if case .resolved = resolution.outcome { return true }
        return false
    }
}

/// The model over the same intents.
func timeModel(_ intents: [(session: Int, intent: Intent)], _ resolver: Resolver, _ plainMap: PMap, sessions: Int)
    -> Double
{
    var plain = [PState](repeating: PState(tree: plainTree(resolver.initialState().tree, plainMap)), count: sessions)
    var model = PResolver(map: plainMap)
    return timed(intents) { session, intent, now in model.resolve(intent, into: &plain[session], now: now) == .resolved
    }
}

func main() throws {
    let arguments = CommandLine.arguments
    guard arguments.count <= 3, let sessions = arguments.count > 1 ? Int(arguments[1]) : 1000,
        let rounds = arguments.count > 2 ? Int(arguments[2]) : 5, sessions > 0, rounds > 0
    else {
        print("usage: PlainTree [SESSIONS (1000)] [ROUNDS (5)]: positive whole numbers")
        exit(64)
    }
    let map = RouteMap.demo
    let plainMap = PMap(map)
    let resolver = try Resolver(map: map)
    var weights = IntentMix.Weights()
    (weights.path, weights.url, weights.invalid, weights.event, weights.blocking) = (0, 0, 0, 0, 0)
    var mix = IntentMix(map: map, weights: weights, seed: 1)
    var intents: [(session: Int, intent: Intent)] = []
    let poolSize = 200_000
    intents.reserveCapacity(poolSize)
    var random = SplitMix64(seed: 2)
    while intents.count < poolSize {
        let session = Int(random.next() % UInt64(sessions))
        guard case .intent(let intent) = mix.next(session: "s\(session)"), case .path(let path) = intent.target,
            let screen = plainMap.screen(named: path[0].screen), plainMap.isPush[screen], !plainMap.hasGuard[screen]
        else { continue }
        intents.append((session, intent))
    }
    check(intents, resolver, plainMap, sessions: sessions)
    let operations = Double(intents.count * 2)
    var ratios: [Double] = []
    var reals: [Double] = []
    var plains: [Double] = []
    for round in 1...rounds {
        // In turns, so that a noisy spell of the machine falls on both.
        let real = timeResolver(intents, resolver, sessions: sessions) / operations
        let plain = timeModel(intents, resolver, plainMap, sessions: sessions) / operations
        reals.append(real)
        plains.append(plain)
        ratios.append(real / plain)
        print(
            "round \(round): resolver \(fixed(real, 0)) ns an intent, plain model \(fixed(plain, 0)) ns: \(fixed(real / plain, 2))x"
        )
    }
    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
    print(
        "median of \(rounds): resolver \(fixed(median(reals), 0)) ns (\(fixed(reals.min()!, 0))–\(fixed(reals.max()!, 0))), plain model \(fixed(median(plains), 0)) ns (\(fixed(plains.min()!, 0))–\(fixed(plains.max()!, 0))); resolver ÷ model \(fixed(median(ratios), 2)) (\(fixed(ratios.min()!, 2))–\(fixed(ratios.max()!, 2)))"
    )
}

try main()
