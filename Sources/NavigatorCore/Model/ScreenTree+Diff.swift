extension ScreenTree {
    /// The commands that turn this tree into `target`, in the order a shell animates well:
    /// dismiss the modals that go, select the tab, change the stacks (pop, replace, refresh,
    /// push), present the new modals. A different kind of root, or other tabs, is a set-root.
    ///
    /// Screens are matched by id, so applying the batch twice changes nothing. The batch is
    /// exact: applied to this tree it gives `target`'s root and modals. When the step-by-step way
    /// does not (a screen moved to another stack or place), the batch rebuilds the tree: set the
    /// root, present the modals.
    public func commands(to target: ScreenTree) -> [Command] {
        let steps = stepCommands(to: target, into: [])
        if let result = try? applying(steps), result.root == target.root, result.modals == target.modals {
            return steps
        }
        var rebuild: [Command] = []
        if root != target.root || !modals.isEmpty { rebuild.append(.setRoot(target.root)) }
        return rebuild + target.modals.map { .present($0) }
    }

    /// Changes this tree into `target` (its root and modals) and returns the batch that does it:
    /// what ``commands(to:)`` and then ``apply(_:within:)`` do, without first trying the batch
    /// on a copy (which copies every array the batch changes). Nearly always the step-by-step
    /// batch reaches the target; when it does not, or breaks a limit, the tree is as it was
    /// and the batch is found the usual way. `room`: an empty array to write the batch into.
    mutating func change(to target: ScreenTree, within limits: TreeLimits, into room: consuming [Command] = [])
        throws(TreeError) -> [Command]
    {
        let steps = stepCommands(to: target, into: consume room)
        let reached = try? apply(steps, within: limits) { $0.root == target.root && $0.modals == target.modals }
        if reached == true { return steps }
        let commands = commands(to: target)
        try apply(commands, within: limits)
        return commands
    }

    /// Every command goes into one array, `room` when it has room (this runs for every batch of
    /// several plans).
    private func stepCommands(to target: ScreenTree, into room: consuming [Command]) -> [Command] {
        var commands = consume room
        if commands.capacity < 4 { commands.reserveCapacity(4) }
        switch (root, target.root) {
        case (.tabs(let from), .tabs(let to))
        where from.tabs.count == to.tabs.count
            && zip(from.tabs, to.tabs).allSatisfy({ $0.name == $1.name && $0.stack[0].id == $1.stack[0].id }):
            dismissals(to: target, into: &commands)
            if from.selected != to.selected { commands.append(.selectTab(to.selected)) }
            for (old, new) in zip(from.tabs, to.tabs) {
                Self.stackCommands(.tab(new.name), from: old.stack, to: new.stack, into: &commands)
            }
        case (.stack(let from), .stack(let to)) where from.first?.id == to.first?.id:
            dismissals(to: target, into: &commands)
            Self.stackCommands(.root, from: from, to: to, into: &commands)
        default:
            if root != target.root || !modals.isEmpty { commands.append(.setRoot(target.root)) }
            for modal in target.modals { commands.append(.present(modal)) }
            return commands
        }
        let kept = keptModals(in: target)
        for index in 0..<kept {
            Self.stackCommands(
                .modal(modals[index].id), from: modals[index].stack, to: target.modals[index].stack, into: &commands)
        }
        for modal in target.modals[kept...] { commands.append(.present(modal)) }
        return commands
    }

    /// How many leading modals the target keeps (same ids, same order).
    private func keptModals(in target: ScreenTree) -> Int {
        Self.commonPrefix(modals, target.modals) { $0.id == $1.id && $0.style == $1.style }
    }

    /// How many leading elements of `a` and `b` pair up, counted without an array.
    private static func commonPrefix<Element>(
        _ a: [Element], _ b: [Element], _ same: (Element, Element) -> Bool
    ) -> Int {
        var count = 0
        while count < a.count, count < b.count, same(a[count], b[count]) { count += 1 }
        return count
    }

    private func dismissals(to target: ScreenTree, into commands: inout [Command]) {
        let kept = keptModals(in: target)
        guard modals.count > kept else { return }
        commands.append(.dismissTo(kept == 0 ? nil : modals[kept - 1].id))
    }

    private static func stackCommands(
        _ ref: StackRef, from old: [Screen], to new: [Screen], into commands: inout [Command]
    ) {
        let common = commonPrefix(old, new) { $0.id == $1.id }
        for index in 0..<common where old[index].context != new[index].context {
            let (was, now) = (old[index].context, new[index].context)
            if was.screen != now.screen || was.info.keys.contains(where: { now.info[$0] == nil }) {
                // Another screen name, or info keys gone: refresh only adds and overwrites.
                commands.append(.replace(new[index].id, with: new[index]))
            } else {
                commands.append(.refresh(new[index].id, info: now.info.filter { was.info[$0.key] != $0.value }))
            }
        }
        var nextNew = common
        if common == 0 || (old.count == common + 1 && new.count == common + 1) {
            // The bottom screen changed, or exactly the top one: a replace keeps the place.
            // (popToRoot, not popTo the replaced screen: a re-applied batch must only name
            // what it keeps.)
            if common < old.count, common < new.count {
                if old.count > common + 1 { commands.append(.popToRoot(ref)) }
                commands.append(.replace(old[common].id, with: new[common]))
                nextNew = common + 1
            }
        } else if old.count > common {
            commands.append(.popTo(old[common - 1].id))
        }
        for screen in new[nextNew...] { commands.append(.push(screen, onto: ref)) }
    }
}
