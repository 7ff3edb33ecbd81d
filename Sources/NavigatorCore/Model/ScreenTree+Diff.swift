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
        let steps = stepCommands(to: target)
        if let result = try? applying(steps), result.root == target.root, result.modals == target.modals {
            return steps
        }
        var rebuild: [Command] = []
        if root != target.root || !modals.isEmpty { rebuild.append(.setRoot(target.root)) }
        return rebuild + target.modals.map { .present($0) }
    }

    private func stepCommands(to target: ScreenTree) -> [Command] {
        var commands: [Command] = []
        switch (root, target.root) {
        case (.tabs(let from), .tabs(let to))
        where from.tabs.map(\.name) == to.tabs.map(\.name)
            && zip(from.tabs, to.tabs).allSatisfy({ $0.stack[0].id == $1.stack[0].id }):
            commands += dismissals(to: target)
            if from.selected != to.selected { commands.append(.selectTab(to.selected)) }
            for (old, new) in zip(from.tabs, to.tabs) {
                commands += Self.stackCommands(.tab(new.name), from: old.stack, to: new.stack)
            }
        case (.stack(let from), .stack(let to)) where from.first?.id == to.first?.id:
            commands += dismissals(to: target)
            commands += Self.stackCommands(.root, from: from, to: to)
        default:
            if root != target.root || !modals.isEmpty { commands.append(.setRoot(target.root)) }
            return commands + target.modals.map { .present($0) }
        }
        let kept = keptModals(in: target)
        for index in 0..<kept {
            commands += Self.stackCommands(
                .modal(modals[index].id), from: modals[index].stack, to: target.modals[index].stack)
        }
        return commands + target.modals[kept...].map { .present($0) }
    }

    /// How many leading modals the target keeps (same ids, same order).
    private func keptModals(in target: ScreenTree) -> Int {
        zip(modals, target.modals).prefix { $0.id == $1.id && $0.style == $1.style }.count
    }

    private func dismissals(to target: ScreenTree) -> [Command] {
        let kept = keptModals(in: target)
        guard modals.count > kept else { return [] }
        return [.dismissTo(kept == 0 ? nil : modals[kept - 1].id)]
    }

    private static func stackCommands(_ ref: StackRef, from old: [Screen], to new: [Screen]) -> [Command] {
        var commands: [Command] = []
        let common = zip(old, new).prefix { $0.id == $1.id }.count
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
        return commands
    }
}
