// A model of the resolver's commonest work on a tree of plain values (issue 31's "tree of plain
// values"), to measure what such a tree would cost against the resolver as it is, on the same
// intents in the same run. Not part of the service: see docs/plain-tree.md.
//
// What it covers: single-screen intents for every screen of the demo map but the set-root and the
// blocking one (navload's mix without paths, deep links, events, invalid intents, parking or unmet
// guards: every session is signed in) on sessions whose root is the demo map's tab bar:
// validation, dedup, already shown, the existing-screen switcher, the push transition with
// back-stack synthesis and unique-in-stack, modals with their parents shown first, replace, the
// commands applied, the tree's limits and invariant checked, and the explanation kept as data. A
// check pass compares every outcome and command, and the trees, with the resolver's.
import NavigatorCore
import NavigatorMix

#if canImport(Glibc)
    import Glibc
#endif

// MARK: The route map as tables

final class PMap {
    enum Transition {
        case push
        case modal(PresentationStyle)
        case setRoot
        case replace
    }
    struct Declared {
        var key: UInt16
        var type: InfoType
        var required: Bool
    }
    let names: [String]
    let nameBytes: [Int]
    let keys: [String]
    let keyBytes: [Int]
    let transition: [Transition]
    let blocking: [Bool]
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
        var transition: [Transition] = []
        var blocking: [Bool] = []
        var homeTab: [Int] = []
        var parent: [Int] = []
        var unique: [Bool] = []
        var hasGuard: [Bool] = []
        var tabRoot: [Int] = []
        var identity: [[UInt16]] = []
        var declared: [[Declared]] = []
        for name in names {
            let spec = map.screens[name]!
            switch spec.transition {
            case .push: transition.append(.push)
            case .modal(let style): transition.append(.modal(style))
            case .setRoot: transition.append(.setRoot)
            case .replace: transition.append(.replace)
            }
            blocking.append(spec.blocking)
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
        self.transition = transition
        self.blocking = blocking
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

struct PModal {
    var id: UInt64
    var style: PresentationStyle
}

/// A tab-bar tree: every screen in one array, stack by stack (the tabs', then the modals' in
/// presentation order), bottom first; info entries and their bytes in two more; a few small
/// arrays say where each stack ends and what each modal is. Copying it is a handful of
/// references; reading it touches no counter.
struct PTree {
    var screens: [PScreen]
    /// Where each stack ends in `screens`: the tabs', then the modals'.
    var stackEnd: [Int]
    var modals: [PModal]
    var infos: [PInfo]
    var bytes: [UInt8]
    let tabCount: Int
    var selected: Int
    var version: UInt64
    var lastServiceID: UInt64
    /// Info entries no screen holds any more.
    var deadEntries = 0

    func stackRange(_ stack: Int) -> Range<Int> { (stack == 0 ? 0 : stackEnd[stack - 1])..<stackEnd[stack] }
    /// The stack on top: the last modal's, else the selected tab's.
    var topStack: Int { modals.isEmpty ? selected : stackEnd.count - 1 }
    func stack(of ref: PStackRef) -> Int {
        switch ref {
        case .tab(let tab): tab
        case .modal(let id): tabCount + modals.firstIndex { $0.id == id }!
        }
    }
    func stack(holding index: Int) -> Int { stackEnd.firstIndex { index < $0 }! }
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

/// A screen to show: a screen of the map and which of the target's entries it carries (the
/// target itself, or a parent built beneath it).
struct PElement: Equatable {
    var screen: Int
    var mask: UInt32
}

enum PStackRef: Equatable {
    case tab(Int)
    case modal(UInt64)
}

enum PCommand {
    case selectTab(Int)
    /// The modals above this one go; nil: all of them.
    case dismissTo(UInt64?)
    case popTo(UInt64)
    case push(id: UInt64, PElement, onto: PStackRef)
    case present(modal: UInt64, PresentationStyle, screen: UInt64, PElement)
    case replace(UInt64, id: UInt64, PElement)
    case refresh(id: UInt64, mask: UInt32)
}

enum POutcome: Equatable {
    case resolved, refreshed, ignored, rejected
}

/// The explanation, as data: rendered only when someone reads it (the model never does).
enum PStep {
    case validated
    case duplicate
    case alreadyOnTop(UInt64)
    case alreadyIn(UInt64, PStackRef)
    case pushing(Int, onto: PStackRef, beneath: Int)
    case poppingTo(Int, PStackRef)
    case presenting(Int, PresentationStyle)
    case replacing(UInt64, with: Int)
    case rejected(String)
}

/// The ids a session saw within the dedup window: the resolver's `RecentIntentIDs` (a list
/// scanned), or ``IndexedIDs`` (the same list in a ring, with an index of its places).
protocol PDedup {
    init()
    func seen(_ hash: UInt64, within window: Int64, now: Int64) -> Int64?
    mutating func insert(_ hash: UInt64, now: Int64, window: Int64, capacity: Int)
}

extension RecentIntentIDs: PDedup {}

/// ``RecentIntentIDs`` with a filter before it: 1,024 bits (128 bytes), two set for each id
/// remembered, never cleared when an id goes but made again from the list every 64 ids. An id
/// whose two bits are not both set was never remembered, so the list is read only for the rest
/// (an id seen, or a false alarm: by the bits' arithmetic, not measured, about one new id in fifteen
/// with 120 remembered, one in five with 256).
struct FilteredIDs: PDedup {
    private var list = RecentIntentIDs()
    private var bits = (
        UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
        UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0)
    )
    private var sinceRebuild = 0

    init() {}

    @inline(__always) private static func positions(_ hash: UInt64) -> (Int, Int) {
        (Int(truncatingIfNeeded: hash) & 1023, Int(truncatingIfNeeded: hash >> 10) & 1023)
    }

    @inline(__always) private func isSet(_ bit: Int) -> Bool {
        withUnsafeBytes(of: bits) { $0.load(fromByteOffset: (bit >> 6) * 8, as: UInt64.self) } & (1 << (bit & 63)) != 0
    }

    @inline(__always) private mutating func set(_ bit: Int) {
        withUnsafeMutableBytes(of: &bits) { raw in
            let word = raw.load(fromByteOffset: (bit >> 6) * 8, as: UInt64.self) | (1 << (bit & 63))
            raw.storeBytes(of: word, toByteOffset: (bit >> 6) * 8, as: UInt64.self)
        }
    }

    func seen(_ hash: UInt64, within window: Int64, now: Int64) -> Int64? {
        let (first, second) = Self.positions(hash)
        guard isSet(first), isSet(second) else { return nil }
        return list.seen(hash, within: window, now: now)
    }

    mutating func insert(_ hash: UInt64, now: Int64, window: Int64, capacity: Int) {
        list.insert(hash, now: now, window: window, capacity: capacity)
        sinceRebuild += 1
        if sinceRebuild >= 64 {
            // Made again from the ids still remembered: the bits of those gone are dropped.
            sinceRebuild = 0
            bits = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            for entry in list.entries {
                let (first, second) = Self.positions(entry >> 16)
                set(first)
                set(second)
            }
        } else {
            let (first, second) = Self.positions(hash)
            set(first)
            set(second)
        }
    }
}

/// ``RecentIntentIDs``'s ids and times (48 bits of the id's hash, 16 of ticks of 2 s since
/// `base`), oldest first in a ring, found through an open-addressing table of their places
/// (linear probing; an id that goes is taken out of the table by moving the run after it back).
/// Decides as ``RecentIntentIDs`` does, ids and window alike; the model's capacity is at most
/// 32,768 ids.
struct IndexedIDs: PDedup {
    static let tick = RecentIntentIDs.tick
    private var base: Int64 = 0
    private var ring: [UInt64] = []
    private var head = 0
    private var count = 0
    /// Ring place + 1 per slot, 0 where empty; twice the ring's size.
    private var slots: [UInt16] = []

    init() {}

    private func home(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash) & (slots.count - 1) }

    func seen(_ hash: UInt64, within window: Int64, now: Int64) -> Int64? {
        guard count > 0 else { return nil }
        let window = min(window, RecentIntentIDs.longestWindow)
        let mask = slots.count - 1
        var slot = home(hash)
        while slots[slot] != 0 {
            let entry = ring[Int(slots[slot]) - 1]
            if entry >> 16 == hash {
                let at = base + Int64(entry & 0xFFFF) * Self.tick
                if now - at < window { return at }
            }
            slot = (slot + 1) & mask
        }
        return nil
    }

    mutating func insert(_ hash: UInt64, now: Int64, window: Int64, capacity: Int) {
        let window = min(window, RecentIntentIDs.longestWindow)
        if ring.isEmpty {
            var size = 1
            while size < capacity { size *= 2 }
            precondition(size <= 32_768, "the model keeps at most 32,768 ids")
            ring = [UInt64](repeating: 0, count: size)
            slots = [UInt16](repeating: 0, count: size * 2)
        }
        if count == 0 { base = now }
        let cutoff = now - window
        if count > 0, base + Int64(ring[head] & 0xFFFF) * Self.tick <= cutoff {
            while count > 0, base + Int64(ring[head] & 0xFFFF) * Self.tick <= cutoff { removeOldest() }
            if count == 0 { base = now }
        }
        while count >= capacity, count > 0 { removeOldest() }
        guard capacity > 0 else { return }
        var ticks = (now - base + Self.tick - 1) / Self.tick
        precondition(ticks <= Int64(UInt16.max), "the model's runs stay within 36 hours of a base")
        if count > 0 { ticks = max(ticks, Int64(ring[(head + count - 1) & (ring.count - 1)] & 0xFFFF)) }
        let place = (head + count) & (ring.count - 1)
        ring[place] = hash << 16 | UInt64(ticks)
        count += 1
        let mask = slots.count - 1
        var slot = home(hash)
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = UInt16(place + 1)
    }

    private mutating func removeOldest() {
        let mask = slots.count - 1
        var slot = home(ring[head] >> 16)
        while Int(slots[slot]) != head + 1 { slot = (slot + 1) & mask }
        // Backward-shift deletion: each later entry of the run moves into the hole unless its
        // home lies (cyclically) after the hole.
        var hole = slot
        var next = (slot + 1) & mask
        while slots[next] != 0 {
            let wanted = home(ring[Int(slots[next]) - 1] >> 16)
            let between = hole <= next ? (wanted > hole && wanted <= next) : (wanted > hole || wanted <= next)
            if !between {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = 0
        head = (head + 1) & (ring.count - 1)
        count -= 1
    }
}

struct PState<Recent: PDedup> {
    var tree: PTree
    var recent = Recent()
    /// The session's `authenticated` condition (every session of the model is signed in).
    var authenticated = true
}

struct PResolver<Recent: PDedup> {
    let map: PMap
    let options = Resolver.Options()
    var target = PTarget()
    var commands: [PCommand] = []
    var steps: [PStep] = []
    var chain: [PElement] = []
    /// Stack depths while a batch's limits are worked out.
    var depths: [Int] = []

    init(map: PMap) {
        self.map = map
        target.keys.reserveCapacity(8)
        target.values.reserveCapacity(8)
        commands.reserveCapacity(8)
        steps.reserveCapacity(8)
        chain.reserveCapacity(8)
        depths.reserveCapacity(32)
    }

    // MARK: Validating

    /// The screen, its required and declared keys, canonical values.
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

    // MARK: Reading the tree

    /// The place among the target's entries of key `key`, if `mask` carries it.
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

    /// The entries of `mask` a parent declares: what it carries.
    func parentMask(_ parent: Int, _ mask: UInt32) -> UInt32 {
        var result: UInt32 = 0
        for index in target.keys.indices where mask & (1 << index) != 0 {
            if map.declared[parent].contains(where: { $0.key == target.keys[index] }) { result |= 1 << index }
        }
        return result
    }

    /// The refresh a found screen needs, if any.
    mutating func appendRefresh(_ tree: PTree, _ screen: PScreen, _ element: PElement) {
        let changed = changes(tree, screen, element.mask)
        if changed != 0 { commands.append(.refresh(id: screen.id, mask: changed)) }
    }

    // MARK: Resolving

    mutating func resolve(_ intent: Intent, into state: inout PState<Recent>, now: Int64) -> POutcome {
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
        guard !map.hasGuard[target.screen] || state.authenticated, !map.blocking[target.screen] else {
            fatalError("outside the model: guards unmet and blocking screens")
        }
        // Planned on the tree as it is (borrowed: nothing copied, so the change below is made in
        // place), then applied.
        var nextID = state.tree.lastServiceID + 1
        let all: UInt32 = (1 << UInt32(target.keys.count)) - 1
        planStep(state.tree, PElement(screen: target.screen, mask: all), &nextID)
        if commands.isEmpty {
            state.recent.insert(idHash, now: now, window: options.dedupWindow, capacity: options.dedupCapacity)
            return .ignored
        }
        let onlyRefresh = commands.allSatisfy { if case .refresh = $0 { true } else { false } }
        guard apply(&state.tree) else { return .rejected }
        state.recent.insert(idHash, now: now, window: options.dedupWindow, capacity: options.dedupCapacity)
        return onlyRefresh ? .refreshed : .resolved
    }

    /// One target: already on top, else the existing-screen switcher, else the route map's
    /// transition. Its commands are appended to ``commands``.
    mutating func planStep(_ tree: PTree, _ element: PElement, _ nextID: inout UInt64) {
        let topRange = tree.stackRange(tree.topStack)
        let top = tree.screens[topRange.upperBound - 1]
        if matches(tree, top, element) {
            appendRefresh(tree, top, element)
            steps.append(.alreadyOnTop(top.id))
            return
        }
        if existingScreen(tree, element) { return }
        precondition(map.tabRoot[element.screen] < 0, "a tab's root is always in its tab")
        switch map.transition[element.screen] {
        case .push:
            push(tree, element, &nextID)
        case .modal(let style):
            let parent = map.parent[element.screen]
            if parent >= 0 { planStep(tree, PElement(screen: parent, mask: parentMask(parent, element.mask)), &nextID) }
            commands.append(.present(modal: nextID, style, screen: nextID + 1, element))
            nextID += 2
            steps.append(.presenting(element.screen, style))
        case .replace:
            let stack = tree.topStack
            let range = tree.stackRange(stack)
            if stack < tree.tabCount && range.count == 1 {
                commands.append(.push(id: nextID, element, onto: .tab(stack)))
            } else {
                commands.append(.replace(top.id, id: nextID, element))
            }
            nextID += 1
            steps.append(.replacing(top.id, with: element.screen))
        case .setRoot:
            fatalError("outside the model: set-root screens")
        }
    }

    /// The existing-screen switcher: the frontmost instance — modals from the top down, the
    /// selected tab, the other tabs in order — brought to the top.
    mutating func existingScreen(_ tree: PTree, _ element: PElement) -> Bool {
        for modal in tree.modals.indices.reversed() {
            let range = tree.stackRange(tree.tabCount + modal)
            for index in range.reversed() where matches(tree, tree.screens[index], element) {
                if modal != tree.modals.count - 1 { commands.append(.dismissTo(tree.modals[modal].id)) }
                if index < range.upperBound - 1 { commands.append(.popTo(tree.screens[index].id)) }
                appendRefresh(tree, tree.screens[index], element)
                steps.append(.alreadyIn(tree.screens[index].id, .modal(tree.modals[modal].id)))
                return true
            }
        }
        for turn in 0..<tree.tabCount {
            // The selected tab first, then the others in order.
            let tab = turn == 0 ? tree.selected : (turn <= tree.selected ? turn - 1 : turn)
            let range = tree.stackRange(tab)
            for index in range.reversed() where matches(tree, tree.screens[index], element) {
                if !tree.modals.isEmpty { commands.append(.dismissTo(nil)) }
                if tree.selected != tab { commands.append(.selectTab(tab)) }
                if index < range.upperBound - 1 { commands.append(.popTo(tree.screens[index].id)) }
                appendRefresh(tree, tree.screens[index], element)
                steps.append(.alreadyIn(tree.screens[index].id, .tab(tab)))
                return true
            }
        }
        return false
    }

    /// The push transition: onto the top modal if one is up, else the home tab, else the
    /// selected one; missing parents built beneath, a unique-in-stack screen's other instance cut.
    mutating func push(_ tree: PTree, _ element: PElement, _ nextID: inout UInt64) {
        let destination: PStackRef
        let stackIndex: Int
        let home = map.homeTab[element.screen]
        if let modal = tree.modals.last {
            destination = .modal(modal.id)
            stackIndex = tree.stackEnd.count - 1
        } else {
            destination = .tab(home >= 0 ? home : tree.selected)
            stackIndex = home >= 0 ? home : tree.selected
            if home >= 0, tree.selected != home { commands.append(.selectTab(home)) }
        }
        let stack = tree.stackRange(stackIndex)
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
            appendRefresh(tree, tree.screens[stack.lowerBound + anchor.stack], element)
            steps.append(.poppingTo(element.screen, destination))
            return
        }
        let last = chain.count - 1
        var beneath = 0
        for index in ((anchor?.chain ?? -1) + 1)...last where index == last || map.tabRoot[chain[index].screen] < 0 {
            commands.append(.push(id: nextID, chain[index], onto: destination))
            nextID += 1
            if index < last { beneath += 1 }
        }
        steps.append(.pushing(element.screen, onto: destination, beneath: beneath))
    }

    // MARK: Applying

    /// The commands applied to the tree, all or nothing. The depths and the modals they lead to
    /// are worked out first, so a batch that would break a limit is refused with the tree as it
    /// was; then the tree changes in place and the invariant is walked.
    mutating func apply(_ tree: inout PTree) -> Bool {
        if let problem = excess(tree) {
            commands.removeAll(keepingCapacity: true)
            steps.append(.rejected(problem))
            return false
        }
        for command in commands {
            switch command {
            case .selectTab(let tab):
                tree.selected = tab
            case .dismissTo(let id):
                let kept = id.map { id in tree.modals.firstIndex { $0.id == id }! + 1 } ?? 0
                guard kept < tree.modals.count else { break }
                let from = tree.stackEnd[tree.tabCount + kept - 1]
                for gone in from..<tree.screens.count { tree.deadEntries += Int(tree.screens[gone].infoCount) }
                tree.screens.removeSubrange(from...)
                tree.stackEnd.removeLast(tree.modals.count - kept)
                tree.modals.removeLast(tree.modals.count - kept)
            case .popTo(let id):
                let index = tree.screens.firstIndex { $0.id == id }!
                let stack = tree.stack(holding: index)
                let end = tree.stackEnd[stack]
                for gone in (index + 1)..<end { tree.deadEntries += Int(tree.screens[gone].infoCount) }
                tree.screens.removeSubrange((index + 1)..<end)
                for later in stack..<tree.stackEnd.count { tree.stackEnd[later] -= end - index - 1 }
            case .push(let id, let element, let ref):
                let stack = tree.stack(of: ref)
                let screen = newScreen(&tree, id, element)
                tree.screens.insert(screen, at: tree.stackEnd[stack])
                for later in stack..<tree.stackEnd.count { tree.stackEnd[later] += 1 }
            case .present(let modal, let style, let id, let element):
                tree.screens.append(newScreen(&tree, id, element))
                tree.stackEnd.append(tree.screens.count)
                tree.modals.append(PModal(id: modal, style: style))
                tree.lastServiceID = max(tree.lastServiceID, modal)
            case .replace(let old, let id, let element):
                let index = tree.screens.firstIndex { $0.id == old }!
                tree.deadEntries += Int(tree.screens[index].infoCount)
                tree.screens[index] = newScreen(&tree, id, element)
            case .refresh(let id, let mask):
                refresh(&tree, id, mask)
            }
            tree.version += 1
        }
        if tree.deadEntries > 64 && tree.deadEntries * 2 > tree.infos.count { compact(&tree) }
        check(tree)
        return true
    }

    /// What the batch would take over a limit (modals, a stack's depth), if anything: the
    /// commands walked over the stacks' depths, nothing changed.
    mutating func excess(_ tree: PTree) -> String? {
        depths.removeAll(keepingCapacity: true)
        for stack in tree.stackEnd.indices { depths.append(tree.stackRange(stack).count) }
        var keptModals = tree.modals.count
        for command in commands {
            switch command {
            case .selectTab:
                break
            case .dismissTo(let id):
                let kept = id.map { id in tree.modals.firstIndex { $0.id == id }! + 1 } ?? 0
                keptModals = min(keptModals, kept)
                depths.removeLast(depths.count - tree.tabCount - keptModals)
            case .popTo(let id):
                let index = tree.screens.firstIndex { $0.id == id }!
                let stack = tree.stack(holding: index)
                depths[stack] = index - tree.stackRange(stack).lowerBound + 1
            case .push(_, _, let ref):
                let stack: Int
                switch ref {
                case .tab(let tab): stack = tab
                case .modal(let id):
                    // A modal presented earlier in the batch is beyond the tree's own.
                    if let place = tree.modals.firstIndex(where: { $0.id == id }) {
                        stack = tree.tabCount + place
                    } else {
                        stack = depths.count - 1
                    }
                }
                depths[stack] += 1
            case .present:
                depths.append(1)
            case .replace, .refresh:
                break
            }
        }
        let modals = depths.count - tree.tabCount
        if modals > options.limits.maxModals {
            return "\(modals) modals; expected at most \(options.limits.maxModals) (maxModals)"
        }
        if let deepest = depths.max(), deepest > options.limits.maxStackDepth {
            return "a stack of \(deepest) screens; expected at most \(options.limits.maxStackDepth) (maxStackDepth)"
        }
        return nil
    }

    /// A screen with the element's entries, its info written at the end of the tree's.
    func newScreen(_ tree: inout PTree, _ id: UInt64, _ element: PElement) -> PScreen {
        let start = tree.infos.count
        var count = 0
        for index in target.keys.indices where element.mask & (1 << index) != 0 {
            let offset = tree.bytes.count
            tree.bytes.append(contentsOf: target.values[index].utf8)
            tree.infos.append(
                PInfo(key: target.keys[index], length: UInt16(tree.bytes.count - offset), start: UInt32(offset)))
            count += 1
        }
        tree.lastServiceID = max(tree.lastServiceID, id)
        return PScreen(id: id, name: UInt16(element.screen), infoCount: UInt16(count), infoStart: UInt32(start))
    }

    /// The target's entries of `mask` merged into a screen's info: written anew at the end, sorted.
    func refresh(_ tree: inout PTree, _ id: UInt64, _ mask: UInt32) {
        let index = tree.screens.firstIndex { $0.id == id }!
        let old = tree.screens[index]
        let start = tree.infos.count
        var count = 0
        var next = 0  // the next of the target's entries to place, in key order
        func appendTarget(_ entry: Int) {
            let offset = tree.bytes.count
            tree.bytes.append(contentsOf: target.values[entry].utf8)
            tree.infos.append(
                PInfo(key: target.keys[entry], length: UInt16(tree.bytes.count - offset), start: UInt32(offset)))
            count += 1
        }
        func placeTargets(below key: UInt16?) {
            while next < target.keys.count, key.map({ target.keys[next] < $0 }) ?? true {
                if mask & (1 << next) != 0 { appendTarget(next) }
                next += 1
            }
        }
        for place in 0..<Int(old.infoCount) {
            let info = tree.infos[Int(old.infoStart) + place]
            placeTargets(below: info.key)
            if let replaced = targetValue(info.key, mask) {
                appendTarget(replaced)
                next = max(next, replaced + 1)
            } else {
                let offset = tree.bytes.count
                tree.bytes.append(contentsOf: tree.bytes[Int(info.start)..<Int(info.start) + Int(info.length)])
                tree.infos.append(PInfo(key: info.key, length: info.length, start: UInt32(offset)))
                count += 1
            }
        }
        placeTargets(below: nil)
        tree.deadEntries += Int(old.infoCount)
        tree.screens[index].infoStart = UInt32(start)
        tree.screens[index].infoCount = UInt16(count)
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
        tree.deadEntries = 0
    }

    /// The invariant and limits, walked over the whole tree after every change.
    func check(_ tree: PTree) {
        precondition(tree.stackEnd.count == tree.tabCount + tree.modals.count, "stacks")
        var previous = 0
        for end in tree.stackEnd {
            precondition(end > previous && end - previous <= options.limits.maxStackDepth, "stack")
            previous = end
        }
        precondition(previous == tree.screens.count && tree.modals.count <= options.limits.maxModals, "screens")
        var textBytes = map.tabBytes
        for screen in tree.screens {
            precondition(screen.id != 0 && screen.id <= tree.lastServiceID, "id")
            textBytes += map.nameBytes[Int(screen.name)]
            precondition(Int(screen.infoCount) <= options.limits.maxInfoEntries, "entries")
            for place in 0..<Int(screen.infoCount) {
                let info = tree.infos[Int(screen.infoStart) + place]
                textBytes += map.keyBytes[Int(info.key)] + Int(info.length)
            }
        }
        // Unique ids, screens' and modals', by pairs (a tree of a few dozen).
        tree.screens.withUnsafeBufferPointer { screens in
            for index in screens.indices {
                for other in (index + 1)..<screens.count where screens[other].id == screens[index].id {
                    preconditionFailure("duplicate id")
                }
                for modal in tree.modals where modal.id == screens[index].id { preconditionFailure("duplicate id") }
            }
        }
        precondition(textBytes <= options.limits.maxTreeBytes, "outside the model: a tree near maxTreeBytes")
    }
}

// MARK: Conversions, for the check

func plainTree(_ tree: ScreenTree, _ map: PMap) -> PTree {
    guard case .tabs(let bar) = tree.root, tree.modals.isEmpty else { fatalError("outside the model") }
    var result = PTree(
        screens: [], stackEnd: [], modals: [], infos: [], bytes: [], tabCount: bar.tabs.count,
        selected: bar.tabs.firstIndex { $0.name == bar.selected }!, version: tree.version,
        lastServiceID: tree.lastServiceID)
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
    for stack in tree.stackEnd.indices {
        if stack < tree.tabCount {
            text += " \(map.tabNames[stack]):"
        } else {
            let modal = tree.modals[stack - tree.tabCount]
            text += " modal #\(modal.id) \(modal.style):"
        }
        for index in tree.stackRange(stack) {
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
    for modal in tree.modals {
        text += " modal #\(modal.id.rawValue) \(modal.style):"
        for screen in modal.stack { text += " \(screen.context)#\(screen.id.rawValue)" }
    }
    return text
}

func realCommands<Recent>(_ resolver: PResolver<Recent>) -> [Command] {
    let map = resolver.map
    func info(_ mask: UInt32) -> [String: String] {
        var result: [String: String] = [:]
        for index in resolver.target.keys.indices where mask & (1 << index) != 0 {
            result[map.keys[Int(resolver.target.keys[index])]] = resolver.target.values[index]
        }
        return result
    }
    func screen(_ id: UInt64, _ element: PElement) -> Screen {
        Screen(id: NodeID(rawValue: id), ScreenContext(map.names[element.screen], info(element.mask)))
    }
    return resolver.commands.map { command in
        switch command {
        case .selectTab(let tab): .selectTab(map.tabNames[tab])
        case .dismissTo(let id): .dismissTo(id.map { NodeID(rawValue: $0) })
        case .popTo(let id): .popTo(NodeID(rawValue: id))
        case .push(let id, let element, .tab(let tab)): .push(screen(id, element), onto: .tab(map.tabNames[tab]))
        case .push(let id, let element, .modal(let modal)):
            .push(screen(id, element), onto: .modal(NodeID(rawValue: modal)))
        case .present(let modal, let style, let id, let element):
            .present(Modal(id: NodeID(rawValue: modal), style: style, stack: [screen(id, element)]))
        case .replace(let old, let id, let element): .replace(NodeID(rawValue: old), with: screen(id, element))
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

/// A session of a signed-in user, as most are (the resolver benchmark's too): guards met.
func signedIn(_ resolver: Resolver) -> SessionState {
    var state = resolver.initialState()
    _ = resolver.apply(.conditions(["authenticated": true]), to: &state, now: 0)
    return state
}

/// The check: every outcome and command, and every tree at the end, as the resolver's.
func check<Recent: PDedup>(
    _ intents: [(session: Int, intent: Intent)], _ resolver: Resolver, _ plainMap: PMap, sessions: Int,
    _ dedup: Recent.Type, _ name: String
) {
    var states = [SessionState](repeating: signedIn(resolver), count: sessions)
    let initial = PState<Recent>(tree: plainTree(signedIn(resolver).tree, plainMap))
    var plain = [PState<Recent>](repeating: initial, count: sessions)
    var model = PResolver<Recent>(map: plainMap)
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
        let got = outcome == .rejected || outcome == .ignored ? [] : realCommands(model)
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
    print("check (\(name)): \(intents.count) intents over \(sessions) sessions: the same outcomes, commands and trees")
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
    var states = [SessionState](repeating: signedIn(resolver), count: sessions)
    var buffers = ResolutionBuffers()
    return timed(intents) { session, intent, now in
        var resolution = resolver.resolve(intent, into: &states[session], now: now, buffers: &buffers)
        defer { buffers.recycle(&resolution) }
        if case .resolved = resolution.outcome { return true }
        return false
    }
}

/// The model over the same intents.
func timeModel<Recent: PDedup>(
    _ intents: [(session: Int, intent: Intent)], _ resolver: Resolver, _ plainMap: PMap, sessions: Int,
    _ dedup: Recent.Type
) -> Double {
    let initial = PState<Recent>(tree: plainTree(signedIn(resolver).tree, plainMap))
    var plain = [PState<Recent>](repeating: initial, count: sessions)
    var model = PResolver<Recent>(map: plainMap)
    return timed(intents) { session, intent, now in model.resolve(intent, into: &plain[session], now: now) == .resolved
    }
}

func main() throws {
    let arguments = CommandLine.arguments
    let variants = ["scanned", "indexed", "filtered"]
    guard arguments.count <= 4, let sessions = arguments.count > 1 ? Int(arguments[1]) : 1000,
        let rounds = arguments.count > 2 ? Int(arguments[2]) : 5, sessions > 0, rounds > 0,
        arguments.count < 4 || variants.contains(arguments[3])
    else {
        print(
            "usage: PlainTree [SESSIONS (1000)] [ROUNDS (5)] [scanned|indexed|filtered]: positive whole numbers; a variant: that model alone (for a profile)"
        )
        exit(64)
    }
    // For a profile of the model: the check, then one variant alone.
    let alone = arguments.count == 4 ? arguments[3] : nil
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
            let screen = plainMap.screen(named: path[0].screen), !plainMap.blocking[screen]
        else { continue }
        if case .setRoot = plainMap.transition[screen] { continue }
        intents.append((session, intent))
    }
    check(intents, resolver, plainMap, sessions: sessions, RecentIntentIDs.self, "ids scanned")
    check(intents, resolver, plainMap, sessions: sessions, IndexedIDs.self, "ids indexed")
    check(intents, resolver, plainMap, sessions: sessions, FilteredIDs.self, "ids filtered")
    let operations = Double(intents.count * 2)
    if let alone {
        for round in 1...rounds {
            let nanoseconds =
                switch alone {
                case "indexed": timeModel(intents, resolver, plainMap, sessions: sessions, IndexedIDs.self)
                case "filtered": timeModel(intents, resolver, plainMap, sessions: sessions, FilteredIDs.self)
                default: timeModel(intents, resolver, plainMap, sessions: sessions, RecentIntentIDs.self)
                }
            print("round \(round): plain model, ids \(alone), \(fixed(nanoseconds / operations, 0)) ns an intent")
        }
        return
    }
    var reals: [Double] = []
    var plains: [Double] = []
    var indexed: [Double] = []
    var filtered: [Double] = []
    for round in 1...rounds {
        // In turns, so that a noisy spell of the machine falls on each.
        let real = timeResolver(intents, resolver, sessions: sessions) / operations
        let plain = timeModel(intents, resolver, plainMap, sessions: sessions, RecentIntentIDs.self) / operations
        let index = timeModel(intents, resolver, plainMap, sessions: sessions, IndexedIDs.self) / operations
        let filter = timeModel(intents, resolver, plainMap, sessions: sessions, FilteredIDs.self) / operations
        reals.append(real)
        plains.append(plain)
        indexed.append(index)
        filtered.append(filter)
        print(
            "round \(round): resolver \(fixed(real, 0)) ns an intent; plain model \(fixed(plain, 0)) ns (\(fixed(real / plain, 2))x); its ids indexed \(fixed(index, 0)) ns, filtered \(fixed(filter, 0)) ns"
        )
    }
    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
    func summary(_ values: [Double], digits: Int) -> String {
        "\(fixed(median(values), digits)) (\(fixed(values.min()!, digits))–\(fixed(values.max()!, digits)))"
    }
    func ratios(_ left: [Double], _ right: [Double]) -> String { summary(zip(left, right).map { $0 / $1 }, digits: 2) }
    print("median of \(rounds) rounds, ns an intent (lowest–highest):")
    print(
        "  resolver \(summary(reals, digits: 0)), plain model \(summary(plains, digits: 0)); its ids indexed \(summary(indexed, digits: 0)), filtered \(summary(filtered, digits: 0))"
    )
    print(
        "  resolver ÷ plain model \(ratios(reals, plains)); plain model ÷ its ids indexed \(ratios(plains, indexed)), ÷ filtered \(ratios(plains, filtered))"
    )
}

try main()
