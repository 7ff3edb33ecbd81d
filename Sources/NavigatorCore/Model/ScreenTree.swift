/// The active-screen tree of one session: a root (tab bar or single stack) and modals above it.
///
/// A value type whose only mutation path is ``apply(_:)-([Command])``: the service and every
/// client shell mirroring it change a tree the same way, so equal batches give equal trees.
public struct ScreenTree: Hashable, Sendable, Codable {
    public private(set) var root: Root
    /// Presentation order: the last is frontmost.
    public private(set) var modals: [Modal]
    /// Incremented by each command that changed the tree.
    public private(set) var version: UInt64
    /// The highest service-namespace id the tree has seen, so new ids are never reused.
    public private(set) var lastServiceID: UInt64

    /// A tree, checked against the invariant (``checkInvariant()``): non-empty stacks, unique tab
    /// names, a selected tab that exists, valid and unique ids. `lastServiceID` is raised to the
    /// highest service id in the tree.
    public init(root: Root, modals: [Modal] = [], version: UInt64 = 0, lastServiceID: UInt64 = 0) throws(TreeError) {
        self.root = root
        self.modals = modals
        self.version = version
        self.lastServiceID = lastServiceID
        self.lastServiceID = max(lastServiceID, highestServiceID)
        try checkInvariant()
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        root = try container.decode(Root.self, forKey: .root)
        modals = try container.decode([Modal].self, forKey: .modals)
        version = try container.decode(UInt64.self, forKey: .version)
        lastServiceID = try container.decode(UInt64.self, forKey: .lastServiceID)
        lastServiceID = max(lastServiceID, highestServiceID)
        do {
            try checkInvariant()
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    private var highestServiceID: UInt64 {
        var highest: UInt64 = 0
        forEachID { if !$0.isClientAssigned { highest = max(highest, $0.rawValue) } }
        return highest
    }

    /// Every id of the tree, screens and modals, without gathering them into an array.
    func forEachID(_ body: (NodeID) -> Void) {
        switch root {
        case .tabs(let bar): for tab in bar.tabs { for screen in tab.stack { body(screen.id) } }
        case .stack(let screens): for screen in screens { body(screen.id) }
        }
        for modal in modals {
            body(modal.id)
            for screen in modal.stack { body(screen.id) }
        }
    }

    // MARK: Queries

    /// The screen the user sees: the top of the last modal's stack, else of the selected tab's
    /// (or the root) stack.
    public var top: Screen {
        // Read in place: no stack reference made, no stack array copied out (every plan asks).
        if let modal = modals.last { return modal.stack[modal.stack.count - 1] }
        switch root {
        case .tabs(let bar):
            let tab = bar.index(of: bar.selected)!
            return bar.tabs[tab].stack[bar.tabs[tab].stack.count - 1]
        case .stack(let screens):
            return screens[screens.count - 1]
        }
    }

    /// The stack holding the top screen.
    public var topStack: StackRef {
        if let modal = modals.last { return .modal(modal.id) }
        switch root {
        case .tabs(let bar): return .tab(bar.selected)
        case .stack: return .root
        }
    }

    /// The selected tab's name, if the root is a tab bar.
    public var selectedTab: String? {
        if case .tabs(let bar) = root { return bar.selected }
        return nil
    }

    public var tabNames: [String] {
        if case .tabs(let bar) = root { return bar.tabs.map(\.name) }
        return []
    }

    /// The screens of a stack, bottom first; `nil` if the tree has no such stack.
    public func stack(_ ref: StackRef) -> [Screen]? {
        switch (ref, root) {
        case (.tab(let name), .tabs(let bar)): return bar.index(of: name).map { bar.tabs[$0].stack }
        case (.root, .stack(let screens)): return screens
        case (.modal(let id), _): return modals.first { $0.id == id }?.stack
        default: return nil
        }
    }

    /// Every stack, bottom of the tree first: the tabs (or the root stack), then the modals.
    public var stacks: [(ref: StackRef, screens: [Screen])] {
        var result: [(StackRef, [Screen])] = []
        switch root {
        case .tabs(let bar): result = bar.tabs.map { (.tab($0.name), $0.stack) }
        case .stack(let screens): result = [(.root, screens)]
        }
        return result + modals.map { (.modal($0.id), $0.stack) }
    }

    /// Where a screen is: its stack and its index there.
    public func locate(_ id: NodeID) -> (stack: StackRef, index: Int, screen: Screen)? {
        // No intermediate arrays: this runs several times per resolution.
        switch root {
        case .tabs(let bar):
            for tab in bar.tabs {
                if let index = tab.stack.firstIndex(where: { $0.id == id }) {
                    return (.tab(tab.name), index, tab.stack[index])
                }
            }
        case .stack(let screens):
            if let index = screens.firstIndex(where: { $0.id == id }) { return (.root, index, screens[index]) }
        }
        for modal in modals {
            if let index = modal.stack.firstIndex(where: { $0.id == id }) {
                return (.modal(modal.id), index, modal.stack[index])
            }
        }
        return nil
    }

    public func modalIndex(_ id: NodeID) -> Int? { modals.firstIndex { $0.id == id } }

    /// Whether a screen or a modal has this id (asked before each new id goes in: nothing is
    /// copied out of the tree to answer).
    public func contains(_ id: NodeID) -> Bool {
        if modals.contains(where: { $0.id == id || $0.stack.contains { $0.id == id } }) { return true }
        switch root {
        case .tabs(let bar): return bar.tabs.contains { $0.stack.contains { $0.id == id } }
        case .stack(let screens): return screens.contains { $0.id == id }
        }
    }

    // MARK: The invariant

    /// The tree's invariant, checked here and nowhere else: every stack non-empty; a tab bar
    /// with at least one tab, unique tab names and a selected tab among them; every id valid
    /// (never 0 or 2^63), unique, and a service id no higher than ``lastServiceID`` (which stays
    /// below 2^63). Returns the tree's size for ``TreeLimits``.
    @discardableResult
    public func checkInvariant() throws(TreeError) -> TreeSize {
        guard lastServiceID < NodeID.clientBit else {
            throw TreeError(
                .invalidID, "the highest service id \(lastServiceID) is in the client namespace; expected below 2^63")
        }
        var count = modals.count
        switch root {
        case .tabs(let bar): for tab in bar.tabs { count += tab.stack.count }
        case .stack(let screens): count += screens.count
        }
        for modal in modals { count += modal.stack.count }
        // The ids on the stack, not the heap: this runs after every change.
        return try withUnsafeTemporaryAllocation(of: NodeID.self, capacity: count) { (ids) throws(TreeError) in
            var walk = InvariantWalk(ids: ids)
            switch root {
            case .tabs(let bar):
                guard !bar.tabs.isEmpty else {
                    throw TreeError(.invalidTree, "tab bar has no tabs; expected at least one")
                }
                walk.size.tabs = bar.tabs.count
                for (index, tab) in bar.tabs.enumerated() {
                    guard !bar.tabs[..<index].contains(where: { $0.name == tab.name }) else {
                        throw TreeError(.invalidTree, "tab \(tab.name) appears twice; expected unique tab names")
                    }
                    walk.size.longestText = max(walk.size.longestText, tab.name.utf8.count)
                    walk.size.textBytes += tab.name.utf8.count
                    try walk.check(tab.stack, "tab \(tab.name)")
                }
                guard bar.index(of: bar.selected) != nil else {
                    throw TreeError(
                        .unknownTab,
                        "selected tab \(bar.selected) is not one of \(bar.tabs.map(\.name).joined(separator: ", "))")
                }
            case .stack(let screens):
                try walk.check(screens, "the root")
            }
            walk.size.modals = modals.count
            for modal in modals {
                walk.ids[walk.filled] = modal.id
                walk.filled += 1
                try walk.check(modal.stack, "modal \(modal.id)")
            }
            let all = UnsafeBufferPointer(rebasing: ids[..<walk.filled])
            for id in all {
                guard id.isValid else {
                    throw TreeError(.invalidID, "id \(id.rawValue) is not valid; 0 and 2^63 are never ids")
                }
                guard id.isClientAssigned || id.rawValue <= lastServiceID else {
                    throw TreeError(
                        .invalidID, "service id \(id) is above the highest the service issued (#\(lastServiceID))")
                }
            }
            if all.count <= 32 {
                // Small trees (nearly all): comparing pairs beats hashing.
                for index in all.indices where all[(index + 1)...].contains(all[index]) {
                    throw TreeError(.duplicateID, "id \(all[index]) appears twice in the tree")
                }
            } else {
                var seen = Set<NodeID>(minimumCapacity: all.count)
                for id in all where !seen.insert(id).inserted {
                    throw TreeError(.duplicateID, "id \(id) appears twice in the tree")
                }
            }
            return walk.size
        }
    }
}

/// What ``ScreenTree/checkInvariant()`` gathers while it walks the stacks.
private struct InvariantWalk {
    let ids: UnsafeMutableBufferPointer<NodeID>
    var filled = 0
    var size = TreeSize()

    init(ids: UnsafeMutableBufferPointer<NodeID>) { self.ids = ids }

    mutating func check(_ stack: [Screen], _ name: @autoclosure () -> String) throws(TreeError) {
        guard !stack.isEmpty else { throw TreeError(.emptyStack, "\(name()) has an empty stack") }
        size.deepestStack = max(size.deepestStack, stack.count)
        // By index: each screen read where it is, not copied out (a retain and a release of its
        // name and its info each, for every screen after every change).
        for index in stack.indices {
            ids[filled] = stack[index].id
            filled += 1
            let name = stack[index].context.screen.utf8.count
            size.longestText = max(size.longestText, name)
            size.textBytes += name
            let entries = stack[index].context.info.count
            guard entries > 0 else { continue }
            size.mostInfoEntries = max(size.mostInfoEntries, entries)
            for (key, value) in stack[index].context.info {
                let (keyBytes, valueBytes) = (key.utf8.count, value.utf8.count)
                size.longestText = max(size.longestText, keyBytes, valueBytes)
                size.textBytes += keyBytes + valueBytes
            }
        }
    }
}

// MARK: - The one mutation path

extension ScreenTree {
    /// Applies a batch of commands in order, all or nothing: if one cannot be applied, or the
    /// result breaks the invariant (``checkInvariant()``) or grows beyond `limits`, the tree is
    /// left as it was and the error names the command (or the limit) and the reason.
    ///
    /// Commands whose effect is already there change nothing, and so does a batch whose net
    /// effect is nothing (re-applying `[popTo(a), push(b)]` must not pop and push `b` again):
    /// ``version`` counts the commands of batches that changed the tree.
    ///
    /// A tree already beyond `limits` (the limits were lowered) accepts changes that do not
    /// grow the measures over their limit.
    public mutating func apply(_ commands: [Command], within limits: TreeLimits = .none) throws(TreeError) {
        _ = try apply(commands, within: limits) { _ in true }
    }

    /// ``apply(_:within:)``, the result kept only if `keep` holds for it: else the tree is left
    /// as it was and the answer is false. For a batch that may not reach what it
    /// aims at (``change(to:within:)``), tried on the tree itself rather than on a copy.
    mutating func apply(
        _ commands: [Command], within limits: TreeLimits, keepingIf keep: (ScreenTree) -> Bool
    ) throws(TreeError) -> Bool {
        // `keep` is not optional: an optional closure escapes, and its context would be
        // allocated for every batch.
        guard commands.count <= UndoLog.capacity else {
            return try applyOnCopy(commands, within: limits, keepingIf: keep)
        }
        // Up to four commands (nearly every batch: one, or a tab selected or modals dismissed or
        // a pop before a push): changed in place, each command's change recorded, and all of
        // them put back if one fails or the result is refused. A copy would copy every stack the
        // batch touches, since the copy and the tree share them.
        //
        // As on a copy, a batch of several whose net effect is nothing (re-applying
        // `[popTo(a), push(b)]`) leaves the version as it was: told apart from a change by what
        // the batch surely changed (a new service id still in the tree, another count of modals
        // or screens, another selected tab), and only when none of these holds by comparing
        // with the tree put back on a copy.
        let highestBefore = lastServiceID
        let before = commands.count > 1 ? (modals: modals.count, screens: screenCount, selected: selectedTab) : nil
        var log = UndoLog()
        for (index, command) in commands.enumerated() {
            do {
                if let change = try applyOne(command, keepingWhatGoes: true) { log.append(change) }
            } catch {
                putBack(log, highestServiceID: highestBefore)
                let position = commands.count > 1 ? "command \(index + 1) of \(commands.count), " : ""
                throw TreeError(error.code, "\(position)\(command): \(error.message)")
            }
        }
        guard log.count > 0 else { return keep(self) }
        if log.count > 1, let before {
            let surelyChanged =
                modals.count != before.modals || screenCount != before.screens || selectedTab != before.selected
                || (lastServiceID > highestBefore && contains(NodeID(rawValue: lastServiceID)))
            if !surelyChanged {
                var previous = self
                previous.putBack(log, highestServiceID: highestBefore)
                // Nothing changed in all: the version stays, the highest id seen is kept.
                if previous.root == root && previous.modals == modals {
                    if keep(self) { return true }
                    putBack(log, highestServiceID: highestBefore)
                    return false
                }
            }
        }
        let size: TreeSize
        do {
            size = try checkInvariant()
        } catch {
            putBack(log, highestServiceID: highestBefore)
            throw error
        }
        if !size.excess(limits).isEmpty {
            // Over a limit: allowed only if the tree was over it already (rare): decided on a
            // copy, beside the tree as it was.
            putBack(log, highestServiceID: highestBefore)
            return try applyOnCopy(commands, within: limits, keepingIf: keep)
        }
        if !keep(self) {
            putBack(log, highestServiceID: highestBefore)
            return false
        }
        version &+= UInt64(log.count)
        return true
    }

    /// Screens in every stack of the tree.
    private var screenCount: Int {
        var count = 0
        switch root {
        case .tabs(let bar): for tab in bar.tabs { count += tab.stack.count }
        case .stack(let screens): count = screens.count
        }
        for modal in modals { count += modal.stack.count }
        return count
    }

    /// ``apply(_:within:)`` on a copy, kept when the batch succeeds: for batches of more commands
    /// than ``UndoLog`` holds (which may undo each other: re-applying `[popTo(a), push(b)]`
    /// changes nothing) and for a tree over a limit, whose outcome needs the tree as it was
    /// beside the result.
    mutating func applyOnCopy(
        _ commands: [Command], within limits: TreeLimits, keepingIf keep: (ScreenTree) -> Bool
    ) throws(TreeError) -> Bool {
        var copy = self
        var changes = 0
        for (index, command) in commands.enumerated() {
            do {
                if try copy.applyOne(command, keepingWhatGoes: false) != nil {
                    copy.version &+= 1
                    changes += 1
                }
            } catch {
                let position = commands.count > 1 ? "command \(index + 1) of \(commands.count), " : ""
                throw TreeError(error.code, "\(position)\(command): \(error.message)")
            }
        }
        if changes == 0 || (changes > 1 && copy.root == root && copy.modals == modals) {
            guard keep(copy) else { return false }
            lastServiceID = copy.lastServiceID
            return true
        }
        let size = try copy.checkInvariant()
        let over = size.excess(limits)
        if !over.isEmpty {
            let before = (try? checkInvariant()) ?? TreeSize()
            if let (measure, message) = over.first(where: { size[keyPath: $0.0] > before[keyPath: $0.0] }) {
                _ = measure
                throw TreeError(.limitExceeded, "the change would leave \(message)")
            }
        }
        guard keep(copy) else { return false }
        self = copy
        return true
    }

    public mutating func apply(_ command: Command, within limits: TreeLimits = .none) throws(TreeError) {
        try apply([command], within: limits)
    }

    /// Returns a copy with the commands applied.
    public func applying(_ commands: [Command], within limits: TreeLimits = .none) throws(TreeError) -> ScreenTree {
        var copy = self
        try copy.apply(commands, within: limits)
        return copy
    }

    /// Applies one command; returns how to put back what it changed (nil: it changed nothing).
    /// The screens a pop removes and the modals a dismiss to a modal removes are copied out for
    /// that only if `keepingWhatGoes` (else that change cannot be put back: a copy is being
    /// changed); what other changes replace is kept in any case, at no cost.
    private mutating func applyOne(_ command: Command, keepingWhatGoes: Bool) throws(TreeError) -> Undo? {
        switch command {
        case .selectTab(let name):
            guard case .tabs(var bar) = root else {
                throw TreeError(.notTabBar, "the root is a single stack; expected a tab bar")
            }
            guard bar.index(of: name) != nil else {
                throw TreeError(
                    .unknownTab, "no tab named \(name); expected one of \(bar.tabs.map(\.name).joined(separator: ", "))"
                )
            }
            guard bar.selected != name else { return nil }
            let previous = bar.selected
            bar.selected = name
            root = .tabs(bar)
            return .selected(previous)

        case .push(let screen, let ref):
            guard !contains(screen.id) else { return nil }
            try checkNew(screen.id)
            try mutateStack(ref) { $0.append(screen) }
            note(screen.id)
            return .pushed(ref)

        case .present(let modal):
            if modalIndex(modal.id) != nil { return nil }
            guard !modal.stack.isEmpty else { throw TreeError(.emptyStack, "a modal needs at least one screen") }
            try checkNew(modal.id)
            // A modal's stack is nearly always short: its pairs are compared, no set is built
            // (a long one, from a client, is checked with a set).
            var ids = modal.stack.count > 32 ? Set<NodeID>(minimumCapacity: modal.stack.count) : nil
            for (index, screen) in modal.stack.enumerated() {
                try checkNew(screen.id)
                let repeated: Bool
                if ids != nil {
                    repeated = !ids!.insert(screen.id).inserted
                } else {
                    repeated = modal.stack[..<index].contains { $0.id == screen.id }
                }
                guard screen.id != modal.id, !repeated else {
                    throw TreeError(.duplicateID, "id \(screen.id) appears twice in the modal")
                }
            }
            modals.append(modal)
            note(modal.id)
            for screen in modal.stack { note(screen.id) }
            return .presented

        case .popTo(let id):
            guard let (ref, index, _) = locate(id) else {
                throw TreeError(.unknownScreen, "no screen \(id) in the tree")
            }
            return try pop(ref, above: index, keepingWhatGoes: keepingWhatGoes)

        case .popToRoot(let ref):
            return try pop(ref, above: 0, keepingWhatGoes: keepingWhatGoes)

        case .dismissTo(let id):
            let index: Int
            if let id {
                guard let found = modalIndex(id) else {
                    throw TreeError(.unknownModal, "no modal \(id) is presented")
                }
                index = found
            } else {
                index = -1
            }
            guard index < modals.count - 1 else { return nil }
            // The modals array keeps its room, so the next present makes none; one dismissed
            // modal (nearly always) is kept for putting back in the value, not in an array.
            let undo: Undo
            if !keepingWhatGoes {
                undo = .dismissed([])
            } else if index == modals.count - 2 {
                undo = .dismissedOne(modals[index + 1])
            } else if index == -1 {
                let removed = modals  // all of them: the array itself, not a copy
                modals = []
                return .dismissed(removed)
            } else {
                undo = .dismissed(Array(modals[(index + 1)...]))
            }
            modals.removeSubrange((index + 1)...)
            return undo

        case .setRoot(let newRoot):
            guard newRoot != root || !modals.isEmpty else { return nil }
            let previous = Undo.root(root, modals)
            root = newRoot
            modals = []
            lastServiceID = max(lastServiceID, highestServiceID)
            return previous

        case .replace(let id, let screen) where id == screen.id:
            // The same screen with another context: it changes in place.
            guard let (ref, index, old) = locate(id) else {
                throw TreeError(.unknownScreen, "no screen \(id) in the tree")
            }
            guard old.context != screen.context else { return nil }
            try mutateStack(ref) { $0[index].context = screen.context }
            return .context(ref, index, old.context)

        case .replace(let id, let screen):
            if contains(screen.id) {
                // The new screen is in place already; an old one that lingers (a batch re-applied
                // after it pushed the old one again) goes.
                guard let (ref, index, old) = locate(id) else { return nil }
                try mutateStack(ref) { $0.remove(at: index) }
                return .removed(ref, index, old)
            }
            try checkNew(screen.id)
            guard let (ref, index, old) = locate(id) else {
                throw TreeError(.unknownScreen, "no screen \(id) in the tree")
            }
            try mutateStack(ref) { $0[index] = screen }
            note(screen.id)
            return .replaced(ref, index, old)

        case .refresh(let id, let info):
            guard let (ref, index, screen) = locate(id) else {
                throw TreeError(.unknownScreen, "no screen \(id) in the tree")
            }
            let merged = screen.context.info.merging(info) { _, new in new }
            guard merged != screen.context.info else { return nil }
            try mutateStack(ref) { $0[index].context.info = merged }
            return .context(ref, index, screen.context)
        }
    }

    private func checkNew(_ id: NodeID) throws(TreeError) {
        guard id.isValid else { throw TreeError(.invalidID, "id \(id.rawValue) is not valid; 0 is never an id") }
        guard !contains(id) else { throw TreeError(.duplicateID, "id \(id) is already in the tree") }
    }

    private mutating func note(_ id: NodeID) {
        if !id.isClientAssigned { lastServiceID = max(lastServiceID, id.rawValue) }
    }

    /// The screens above `index` popped off a stack; how to put them back (nil: none were
    /// there). One or two screens (nearly always) are kept in the value, not in an array.
    private mutating func pop(_ ref: StackRef, above index: Int, keepingWhatGoes: Bool) throws(TreeError) -> Undo? {
        var undo: Undo? = nil
        try mutateStack(ref) { stack in
            let count = stack.count - index - 1
            guard count > 0 else { return }
            if !keepingWhatGoes {
                undo = .popped(ref, [])
            } else if count <= 2 {
                undo = .poppedFew(ref, stack[index + 1], count == 2 ? stack[index + 2] : nil)
            } else {
                undo = .popped(ref, Array(stack[(index + 1)...]))
            }
            stack.removeSubrange((index + 1)...)
        }
        return undo
    }

    private mutating func mutateStack(_ ref: StackRef, _ body: (inout [Screen]) -> Void) throws(TreeError) {
        // The root's payload is taken out and the root let go of it while the stack changes, so
        // the change copies nothing the tree alone holds. (Not by switching over `(ref, root)`:
        // that tuple holds the payload too, and every change copied the tab array.)
        switch ref {
        case .tab(let name):
            guard case .tabs(var bar) = root else {
                throw TreeError(.unknownStack, "\(ref): the root is a single stack; expected a tab bar")
            }
            guard let index = bar.index(of: name) else {
                throw TreeError(
                    .unknownStack,
                    "no tab named \(name); expected one of \(bar.tabs.map(\.name).joined(separator: ", "))")
            }
            root = .stack([])
            body(&bar.tabs[index].stack)
            root = .tabs(bar)
        case .root:
            guard case .stack(var screens) = root else {
                throw TreeError(.unknownStack, "root stack: the root is a tab bar; name a tab")
            }
            root = .stack([])
            body(&screens)
            root = .stack(screens)
        case .modal(let id):
            guard let index = modalIndex(id) else { throw TreeError(.unknownStack, "no modal \(id) is presented") }
            body(&modals[index].stack)
        }
    }

    /// Puts back what one command changed, and the highest service id.
    private mutating func putBack(_ change: Undo, highestServiceID: UInt64) {
        switch change {
        case .selected(let name):
            guard case .tabs(var bar) = root else { preconditionFailure("putting back a tab: the root changed") }
            bar.selected = name
            root = .tabs(bar)
        case .pushed(let ref): putBack(ref) { $0.removeLast() }
        case .presented: modals.removeLast()
        case .popped(let ref, let removed): putBack(ref) { $0.append(contentsOf: removed) }
        case .poppedFew(let ref, let first, let second):
            putBack(ref) { stack in
                stack.append(first)
                if let second { stack.append(second) }
            }
        case .dismissed(let removed): modals.append(contentsOf: removed)
        case .dismissedOne(let modal): modals.append(modal)
        case .root(let previous, let previousModals):
            root = previous
            modals = previousModals
        case .context(let ref, let index, let context): putBack(ref) { $0[index].context = context }
        case .replaced(let ref, let index, let screen): putBack(ref) { $0[index] = screen }
        case .removed(let ref, let index, let screen): putBack(ref) { $0.insert(screen, at: index) }
        }
        lastServiceID = highestServiceID
    }

    /// Every change of a batch put back, the last first, and the highest service id as it was.
    private mutating func putBack(_ log: UndoLog, highestServiceID: UInt64) {
        var index = log.count
        while index > 0 {
            index -= 1
            putBack(log[index], highestServiceID: highestServiceID)
        }
        lastServiceID = highestServiceID
    }

    /// A stack changed back: it exists, as it did before the change.
    private mutating func putBack(_ ref: StackRef, _ body: (inout [Screen]) -> Void) {
        do {
            try mutateStack(ref, body)
        } catch {
            preconditionFailure("putting back \(ref): \(error.message)")
        }
    }
}

/// The changes of a batch of up to four commands, in order, held in the value (no array): as
/// many as an ``InlineList`` keeps there.
private typealias UndoLog = InlineList<Undo>

extension InlineList where Element == Undo {
    /// The most commands a batch changed in place may have (more are applied on a copy).
    fileprivate static var capacity: Int { 4 }
}

/// What one command changed in a tree, to put back (``ScreenTree/apply(_:within:)``).
private enum Undo {
    case selected(String)
    case pushed(StackRef)
    case presented
    /// These screens were popped off the top of the stack.
    case popped(StackRef, [Screen])
    /// One screen, or two, were popped off the top of the stack (bottom first).
    case poppedFew(StackRef, Screen, Screen?)
    /// These modals were dismissed off the top.
    case dismissed([Modal])
    /// This modal, the top one, was dismissed.
    case dismissedOne(Modal)
    case root(Root, [Modal])
    case context(StackRef, Int, ScreenContext)
    case replaced(StackRef, Int, Screen)
    case removed(StackRef, Int, Screen)
}
