import NavigatorCore
import TestThreads
import Testing

/// A small deterministic generator, so a failing seed can be replayed.
typealias SeededRandom = SplitMix64

/// Random intents and client events over the demo map, mostly valid, sometimes not.
struct Generator {
    var random: SeededRandom
    let map = RouteMap.demo
    var counter = 0

    mutating func value(for type: InfoType) -> String {
        switch type {
        case .int: String(Int.random(in: 1...4, using: &random))
        case .string: ["r1", "r2", "m1"].randomElement(using: &random)!
        case .uuid:
            ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"].randomElement(
                using: &random)!
        case .bool: Bool.random(using: &random) ? "true" : "false"
        case .oneOf(let values): values.randomElement(using: &random)!
        }
    }

    mutating func context() -> ScreenContext {
        let name = map.screens.keys.sorted().randomElement(using: &random)!
        var info: [String: String] = [:]
        for (key, spec) in map.screens[name]!.info.sorted(by: { $0.key < $1.key })
        where spec.required || Int.random(in: 0..<3, using: &random) == 0 {
            info[key] = value(for: spec.type)
        }
        if Int.random(in: 0..<25, using: &random) == 0 { info["bogus"] = "1" }  // an invalid intent now and then
        return ScreenContext(name, info)
    }

    mutating func intent() -> Intent {
        counter += 1
        let length = [1, 1, 1, 2, 3].randomElement(using: &random)!
        let path = (0..<length).map { _ in context() }
        var intent = Intent(
            id: Int.random(in: 0..<20, using: &random) == 0 ? "dup-\(counter % 3)" : "i\(counter)", session: "s",
            target: .path(path), priority: Intent.Priority.allCases.randomElement(using: &random)!)
        if Int.random(in: 0..<8, using: &random) == 0 {
            intent.setConditions = ["authenticated": Bool.random(using: &random)]
        }
        return intent
    }

    mutating func event(for tree: ScreenTree) -> ClientEvent {
        let screens = tree.stacks.flatMap(\.screens)
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return .poppedTo(screens.randomElement(using: &random)!.id)
        case 1: return .dismissedTo(tree.modals.randomElement(using: &random)?.id)
        case 2: return .tabSelected(tree.tabNames.randomElement(using: &random) ?? "home")
        case 3: return .conditions(["authenticated": Bool.random(using: &random)])
        case 4:
            counter += 1
            return .pushed(Screen(id: .client(UInt64(counter)), context()), onto: tree.topStack)
        default: return .ready()
        }
    }
}

@Suite("Resolver properties")
struct PropertyTests {
    @Test(
        "over random sessions: the batch reproduces the tree, shows the target, and is idempotent", arguments: 0..<100)
    func randomSessions(seed: UInt64) async throws {
        try await offPool {
            var generator = Generator(random: SeededRandom(seed: seed))
            var session = Harness()
            for step in 0..<60 {
                if Int.random(in: 0..<4, using: &generator.random) == 0 {
                    let before = session.state
                    let result = session.event(generator.event(for: session.state.tree))
                    if result.error != nil {
                        #expect(session.state == before, "seed \(seed) step \(step): a refused event changed the state")
                    }
                    continue
                }
                let intent = generator.intent()
                let before = session.state
                let resolution = session.send(intent)
                let context =
                    "seed \(seed) step \(step) \(intent.target) -> \(resolution.outcome)\n"
                    + resolution.explanation.map(\.description).joined(separator: "\n") + "\nfrom:\n"
                    + before.tree.outline

                // Exactly one step decided, and the outcome is explained.
                #expect(resolution.explanation.filter(\.decisive).count == 1, "\(context)")

                // Applying the published batches to the old tree gives the resolver's new tree.
                var mirror = before.tree
                try mirror.apply(resolution.commands)
                let afterIntent = mirror
                for released in resolution.released {
                    do {
                        try mirror.apply(released.commands)
                    } catch {
                        let steps = released.explanation.map(\.description).joined(separator: "\n")
                        Issue.record(
                            "\(context)\nreleased \(released.intent.target): \(error)\n\(steps)\nonto:\n\(mirror.outline)"
                        )
                        return
                    }
                }
                #expect(mirror == session.state.tree, "\(context)")

                // Applying a batch twice equals applying it once.
                do {
                    #expect(try afterIntent.applying(resolution.commands) == afterIntent, "\(context)")
                } catch {
                    Issue.record("re-applying: \(error)\n\(context)")
                    return
                }

                switch resolution.outcome {
                case .resolved, .refreshed:
                    // The top shows the target, with the info asked for.
                    let target = try session.resolver.validate(intent).last!
                    let top = afterIntent.top
                    #expect(top.context.screen == target.screen, "\(context)")
                    let identity = session.resolver.map.screens[target.screen]!.identity
                    #expect(identity.allSatisfy { top.context.info[$0] == target.info[$0] }, "\(context)")
                    #expect(target.info.allSatisfy { top.context.info[$0.key] == $0.value }, "\(context)")
                case .rejected:
                    #expect(session.state == before, "\(context)")
                case .ignored(let reason):
                    if !reason.hasPrefix("duplicate") {
                        let target = try session.resolver.validate(intent).last!
                        #expect(before.tree.top.context.screen == target.screen, "\(context)")
                    }
                case .parked:
                    #expect(session.state.parked.contains { $0.intent.id == intent.id }, "\(context)")
                }
            }
        }
    }
}
