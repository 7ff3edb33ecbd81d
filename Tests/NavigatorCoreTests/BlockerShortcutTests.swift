import TestThreads
import Testing

@testable import NavigatorCore

/// ``Resolver/blocker(of:in:)`` decides on the batch's result whether it dismisses, covers or
/// changes what lies beneath a blocking modal, applying the batch to a copy of the tree — except
/// for a batch that dismisses every modal, or modals below the first blocking one, or sets the
/// root, which it refuses at once (the copy's first change copied the tab array and a stack).
/// Over random trees and random batches whose new screens and modals take fresh ids (as every
/// plan's do), it answers what the result-based decision alone answers.
@Suite("A blocking modal's verdict without a copy")
struct BlockerShortcutTests {
    static let map = RouteMap(
        tabs: [
            RouteMap.TabSpec(name: "home", root: "home"), RouteMap.TabSpec(name: "chats", root: "chat"),
            RouteMap.TabSpec(name: "settings", root: "settings"),
        ],
        initialTab: "home",
        screens: [
            "home": ScreenSpec(), "chat": ScreenSpec(), "profile": ScreenSpec(), "settings": ScreenSpec(),
            "login": ScreenSpec(transition: .modal(.sheet), blocking: true),
        ])

    /// The ids a command brings into the tree.
    static func introduced(by command: Command) -> [NodeID] {
        switch command {
        case .push(let screen, _): [screen.id]
        case .present(let modal): [modal.id] + modal.stack.map(\.id)
        case .replace(_, let screen): [screen.id]
        case .setRoot(.stack(let screens)): screens.map(\.id)
        case .setRoot(.tabs(let bar)): bar.tabs.flatMap(\.stack).map(\.id)
        default: []
        }
    }

    @Test("the shortcut answers what the batch's result answers", arguments: 0..<8)
    func sameVerdict(seed: UInt64) async throws {
        try await offPool {
            let resolver = try Resolver(map: Self.map)
            let context = PlanningContext(resolver: resolver)
            var generator = ApplyInPlaceTests.CommandGenerator(
                random: SeededRandom(seed: seed), trees: TreeGenerator(random: SeededRandom(seed: seed &+ 3000)))
            var compared = 0
            var blocked = 0
            var allowed = 0
            for round in 0..<5000 {
                let tree = generator.trees.tree()
                guard tree.modals.contains(where: context.isBlocking) else { continue }
                var commands: [Command] = []
                for _ in 0..<Int.random(in: 1...4, using: &generator.random) {
                    commands.append(generator.command(in: tree))
                }
                // Plans give new screens and modals ids the tree has never held.
                let fresh = commands.flatMap(Self.introduced).allSatisfy {
                    !$0.isClientAssigned && $0.rawValue > tree.lastServiceID
                }
                guard fresh else { continue }
                // The decision as it was made before the shortcut: on the batch applied to a copy.
                let first = tree.modals.firstIndex(where: context.isBlocking)!
                let expected = resolver.blocksOnTheResult(commands, in: tree, first: first) ? first : nil
                let verdict = resolver.blocker(of: commands, in: tree)
                #expect(
                    verdict?.index == expected,
                    "seed \(seed) round \(round)\ntree:\n\(tree.outline)\ncommands: \(commands)")
                compared += 1
                if expected == nil { allowed += 1 } else { blocked += 1 }
            }
            // Both answers come up, so the comparison means something.
            #expect(
                compared > 100 && blocked > 50 && allowed > 5,
                "\(compared) compared, \(blocked) blocked, \(allowed) allowed")
        }
    }
}
