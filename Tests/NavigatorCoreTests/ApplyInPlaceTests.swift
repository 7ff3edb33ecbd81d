import TestThreads
import Testing

@testable import NavigatorCore

/// ``ScreenTree/apply(_:within:)`` changes the tree in place for a batch of up to four commands,
/// and puts back what they changed if one fails or the result is refused;
/// ``ScreenTree/applyOnCopy(_:within:keepingIf:)`` is the way every batch was applied before (and longer
/// batches still are), on a copy kept only on success. Over random trees and random commands —
/// that apply, that do nothing, that fail, that break the invariant or a limit (lowered below the
/// tree, too), batches applied twice, which may undo themselves — the two leave the same tree
/// (root, modals, version, highest service id) and throw the same error.
@Suite("Applying a batch in place")
struct ApplyInPlaceTests {
    /// Random commands over the ids of a small pool, so that they hit screens and modals of the
    /// tree, miss them, or reuse their ids.
    struct CommandGenerator {
        var random: SeededRandom
        var trees: TreeGenerator

        mutating func id() -> NodeID {
            Int.random(in: 0..<5, using: &random) == 0
                ? NodeID.client(UInt64.random(in: 1...6, using: &random))
                : NodeID(rawValue: UInt64.random(in: 1...24, using: &random))
        }

        mutating func ref(in tree: ScreenTree) -> StackRef {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: return .root
            case 1: return .modal(tree.modals.randomElement(using: &random)?.id ?? id())
            case 2: return .modal(id())
            case 3: return .tab(["home", "chats", "settings", "nope"].randomElement(using: &random)!)
            default: return tree.topStack
            }
        }

        mutating func command(in tree: ScreenTree) -> Command {
            switch Int.random(in: 0..<11, using: &random) {
            case 0: return .selectTab(["home", "chats", "settings", "nope"].randomElement(using: &random)!)
            case 1, 2: return .push(trees.screen(id()), onto: ref(in: tree))
            case 3:
                let count = Int.random(in: 0...2, using: &random)
                let stack = (0..<count).map { _ in trees.screen(id()) }
                return .present(
                    Modal(id: id(), style: PresentationStyle.allCases.randomElement(using: &random)!, stack: stack))
            case 4: return .popTo(id())
            case 5: return .popToRoot(ref(in: tree))
            case 6: return .dismissTo(Bool.random(using: &random) ? nil : id())
            case 7:
                let other = trees.tree()
                return .setRoot(Bool.random(using: &random) ? other.root : .stack([]))
            case 8:
                let old = id()
                return .replace(
                    old,
                    with: Bool.random(using: &random) ? Screen(id: old, trees.screen(old).context) : trees.screen(id()))
            default:
                var info: [String: String] = [:]
                for key in ["a", "b", "c"] where Bool.random(using: &random) {
                    info[key] = ["1", "2", "3"].randomElement(using: &random)!
                }
                return .refresh(id(), info: info)
            }
        }
    }

    static func outcome(
        _ tree: ScreenTree, _ commands: [Command], _ limits: TreeLimits, inPlace: Bool,
        keepingIf keep: (ScreenTree) -> Bool = { _ in true }
    ) -> (tree: ScreenTree, error: TreeError?, kept: Bool) {
        var tree = tree
        do {
            let kept =
                inPlace
                ? try tree.apply(commands, within: limits, keepingIf: keep)
                : try tree.applyOnCopy(commands, within: limits, keepingIf: keep)
            return (tree, nil, kept)
        } catch {
            return (tree, error, false)
        }
    }

    static func expectSame(
        _ inPlace: (tree: ScreenTree, error: TreeError?, kept: Bool),
        _ copy: (tree: ScreenTree, error: TreeError?, kept: Bool), _ context: String
    ) {
        #expect(
            inPlace.tree == copy.tree,
            "\(context)\nin place:\n\(inPlace.tree.outline)\non a copy:\n\(copy.tree.outline)")
        #expect(inPlace.tree.version == copy.tree.version, "\(context)")
        #expect(inPlace.tree.lastServiceID == copy.tree.lastServiceID, "\(context)")
        #expect(inPlace.error?.code == copy.error?.code, "\(context)")
        #expect(inPlace.error?.message == copy.error?.message, "\(context)")
        #expect(inPlace.kept == copy.kept, "\(context)")
    }

    @Test("in place or on a copy, a batch leaves the same tree and throws the same error", arguments: 0..<24)
    func sameAsOnACopy(seed: UInt64) async throws {
        try await offPool {
            var generator = CommandGenerator(
                random: SeededRandom(seed: seed), trees: TreeGenerator(random: SeededRandom(seed: seed &+ 1000)))
            var outcomes: [String: Int] = [:]
            for round in 0..<400 {
                var tree = generator.trees.tree()
                // Tight limits now and then: growth beyond them is refused, shrinking allowed.
                let limits =
                    Int.random(in: 0..<3, using: &generator.random) == 0
                    ? TreeLimits(maxModals: 1, maxStackDepth: 2, maxTabs: 3, maxInfoEntries: 2, maxTextBytes: 64)
                    : .none
                for _ in 0..<4 {
                    // Mostly one command, some several (up to four in place, five on a copy).
                    let count =
                        Int.random(in: 0..<4, using: &generator.random) == 0
                        ? Int.random(in: 2...5, using: &generator.random) : 1
                    var commands: [Command] = []
                    var planned = tree
                    for _ in 0..<count {
                        let command = generator.command(in: planned)
                        commands.append(command)
                        _ = try? planned.applyOnCopy([command], within: .none, keepingIf: { _ in true })
                    }
                    // Once, and again on the result (a batch applied twice may undo itself).
                    for pass in 0..<2 {
                        let copy = Self.outcome(tree, commands, limits, inPlace: false)
                        let inPlace = Self.outcome(tree, commands, limits, inPlace: true)
                        let context =
                            "seed \(seed) round \(round) pass \(pass)\ntree:\n\(tree.outline)\ncommands: \(commands)"
                        Self.expectSame(inPlace, copy, context)
                        // Kept only if the result has an even number of modals: refused, the tree is
                        // as it was, version and highest id included.
                        let even: (ScreenTree) -> Bool = { $0.modals.count % 2 == 0 }
                        let keptInPlace = Self.outcome(tree, commands, limits, inPlace: true, keepingIf: even)
                        let keptOnCopy = Self.outcome(tree, commands, limits, inPlace: false, keepingIf: even)
                        Self.expectSame(keptInPlace, keptOnCopy, "\(context)\nkept if even")
                        if keptInPlace.error == nil {
                            #expect(keptInPlace.kept == even(copy.tree), "\(context)")
                            if !keptInPlace.kept {
                                #expect(keptInPlace.tree == tree && keptInPlace.tree.version == tree.version)
                                #expect(keptInPlace.tree.lastServiceID == tree.lastServiceID)
                                outcomes["not kept", default: 0] += 1
                            }
                        }
                        let kind =
                            copy.error.map { "refused \($0.code)" }
                            ?? (copy.tree.version == tree.version ? "no change" : "changed")
                        outcomes["\(kind)\(pass == 1 ? " again" : "")", default: 0] += 1
                        tree = copy.tree
                    }
                }
            }
            // The batches reach every kind of outcome, so the comparison means something.
            #expect((outcomes["changed"] ?? 0) > 100, "\(outcomes)")
            #expect((outcomes["no change again"] ?? 0) > 50, "\(outcomes)")
            #expect(outcomes.keys.filter { $0.hasPrefix("refused") }.count >= 6, "\(outcomes)")
            #expect(outcomes.keys.contains { $0.hasPrefix("refused limitExceeded") }, "\(outcomes)")
            #expect((outcomes["not kept"] ?? 0) > 50, "\(outcomes)")
        }
    }

    /// ``ScreenTree/change(to:within:)`` tries the step-by-step batch on the tree itself; it
    /// must give what ``ScreenTree/commands(to:)`` and then ``ScreenTree/apply(_:within:)`` give:
    /// the same batch, tree, version and error, between random trees and random changes of them.
    @Test("changing a tree into another gives the batch and the tree the diff and apply give", arguments: 0..<8)
    func changeIsDiffThenApply(seed: UInt64) async throws {
        try await offPool {
            var generator = CommandGenerator(
                random: SeededRandom(seed: seed), trees: TreeGenerator(random: SeededRandom(seed: seed &+ 2000)))
            var rebuilt = 0
            for round in 0..<300 {
                let tree = generator.trees.tree()
                var target = Int.random(in: 0..<8, using: &generator.random) == 0 ? generator.trees.tree() : tree
                for _ in 0..<Int.random(in: 1...4, using: &generator.random) {
                    _ = try? target.applyOnCopy(
                        [generator.command(in: target)], within: .none, keepingIf: { _ in true })
                }
                let limits =
                    Int.random(in: 0..<3, using: &generator.random) == 0
                    ? TreeLimits(maxModals: 1, maxStackDepth: 2, maxTabs: 3, maxInfoEntries: 2, maxTextBytes: 64)
                    : .none
                var changed = tree
                let changedResult = Result { () throws(TreeError) in try changed.change(to: target, within: limits) }
                var applied = tree
                let commands = applied.commands(to: target)
                let appliedResult = Result { () throws(TreeError) in try applied.apply(commands, within: limits) }
                let context = "seed \(seed) round \(round)\ntree:\n\(tree.outline)\ntarget:\n\(target.outline)"
                if case .success(let batch) = changedResult { #expect(batch == commands, "\(context)") }
                #expect(changed == applied && changed.version == applied.version, "\(context)")
                #expect(changed.lastServiceID == applied.lastServiceID, "\(context)")
                switch (changedResult, appliedResult) {
                case (.success, .success): break
                case (.failure(let a), .failure(let b)): #expect(a.message == b.message, "\(context)")
                default: Issue.record("one failed, the other did not: \(context)")
                }
                if commands.contains(where: { if case .setRoot = $0 { true } else { false } }) { rebuilt += 1 }
            }
            #expect(rebuilt > 10, "the batches include rebuilds (\(rebuilt))")
        }
    }
}
