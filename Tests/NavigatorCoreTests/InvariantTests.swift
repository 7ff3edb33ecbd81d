import NavigatorCore
import TestThreads
import Testing

/// Random valid trees whose ids come from a small pool, so two trees share ids in every
/// arrangement: the same place, another place in the same stack, another stack, a modal's id
/// reused by a screen.
struct TreeGenerator {
    var random: SeededRandom

    mutating func screen(_ id: NodeID) -> Screen {
        let name = ["home", "chat", "profile", "settings", "login"].randomElement(using: &random)!
        var info: [String: String] = [:]
        for key in ["a", "b", "c"] where Bool.random(using: &random) {
            info[key] = ["1", "2"].randomElement(using: &random)!
        }
        return Screen(id: id, ScreenContext(name, info))
    }

    mutating func tree() -> ScreenTree {
        var pool: [NodeID] = (1...14).map { NodeID(rawValue: $0) } + (1...6).map { NodeID.client($0) }
        pool.shuffle(using: &random)
        func take(_ count: Int) -> [NodeID] {
            let taken = Array(pool.prefix(count))
            pool.removeFirst(min(count, pool.count))
            return taken
        }
        func stack(_ count: Int) -> [Screen] { take(count).map { screen($0) } }
        let root: Root
        if Int.random(in: 0..<4, using: &random) == 0 {
            root = .stack(stack(Int.random(in: 1...3, using: &random)))
        } else {
            let names = Array(["home", "chats", "settings"].prefix(Int.random(in: 1...3, using: &random)))
            let tabs = names.map { Tab(name: $0, stack: stack(Int.random(in: 1...3, using: &random))) }
            root = .tabs(TabBar(tabs: tabs, selected: names.randomElement(using: &random)!))
        }
        var modals: [Modal] = []
        for _ in 0..<Int.random(in: 0...3, using: &random) where pool.count >= 3 {
            let id = take(1)[0]
            modals.append(
                Modal(
                    id: id, style: PresentationStyle.allCases.randomElement(using: &random)!,
                    stack: stack(Int.random(in: 1...2, using: &random))))
        }
        return try! ScreenTree(root: root, modals: modals, lastServiceID: 14)  // built valid
    }
}

@Suite("Tree invariant and diff")
struct InvariantTests {
    @Test(
        "for random pairs of trees, commands(to:) gives exactly the target, and applying it twice too",
        arguments: 0..<40)
    func diffIsExact(seed: UInt64) async throws {
        try await offPool {
            var generator = TreeGenerator(random: SeededRandom(seed: seed))
            for pair in 0..<250 {
                let from = generator.tree()
                let to = generator.tree()
                let commands = from.commands(to: to)
                let context =
                    "seed \(seed) pair \(pair)\nfrom:\n\(from.outline)\nto:\n\(to.outline)\ncommands: \(commands)"
                let once = try from.applying(commands)
                #expect(once.root == to.root && once.modals == to.modals, "\(context)\ngot:\n\(once.outline)")
                let twice = try once.applying(commands)
                #expect(twice.root == to.root && twice.modals == to.modals, "twice: \(context)")
            }
        }
    }

    @Test("the issue's sync: root [a], m1 [b], m2 [c] to root [a], m1 [c], m2 [d]")
    func syncThatEmptiedAModal() throws {
        let a = Screen(id: 1, ScreenContext("home"))
        let b = Screen(id: 3, ScreenContext("chat"))
        let c = Screen(id: 5, ScreenContext("profile"))
        let d = Screen(id: .client(1), ScreenContext("settings"))
        let from = try ScreenTree(
            root: .stack([a]),
            modals: [Modal(id: 2, style: .sheet, stack: [b]), Modal(id: 4, style: .sheet, stack: [c])])
        let to = try ScreenTree(
            root: .stack([a]),
            modals: [Modal(id: 2, style: .sheet, stack: [c]), Modal(id: 4, style: .sheet, stack: [d])])
        let result = try from.applying(from.commands(to: to))
        #expect(result.root == to.root && result.modals == to.modals)
        // The replace that used to empty m2's stack is refused by the invariant, tree untouched.
        var tree = from
        #expect(throws: TreeError.self) { try tree.apply(.replace(3, with: c)) }
        #expect(tree == from)
    }

    @Test("a replace that keeps the id changes the screen in place; a diff removes info keys with it")
    func replaceInPlace() throws {
        let tree = try ScreenTree(root: .stack([Screen(id: 1, ScreenContext("chat", ["a": "1", "b": "2"]))]))
        let target = try ScreenTree(root: .stack([Screen(id: 1, ScreenContext("chat", ["a": "1"]))]))
        let commands = tree.commands(to: target)
        #expect(commands == [.replace(1, with: Screen(id: 1, ScreenContext("chat", ["a": "1"])))])
        #expect(try tree.applying(commands).root == target.root)
        #expect(try target.applying(commands) == target)  // no effect when equal already
    }

    @Test(
        "ids at the edges have defined outcomes",
        arguments: [
            (UInt64(0), false), (NodeID.clientBit - 1, true), (NodeID.clientBit, false), (UInt64.max, true),
        ])
    func edgeIDs(raw: UInt64, valid: Bool) throws {
        let start = RouteMap.demo.initialTree()
        var tree = start
        let screen = Screen(id: NodeID(rawValue: raw), ScreenContext("chat"))
        if valid {
            try tree.apply(.push(screen, onto: .tab("home")))
            #expect(tree.top == screen)
            #expect(tree.lastServiceID < NodeID.clientBit)
        } else {
            #expect { try tree.apply(.push(screen, onto: .tab("home"))) } throws: {
                ($0 as? TreeError)?.code == .invalidID
            }
            #expect(tree == start)
        }
    }

    @Test("a tree whose highest service id is in the client namespace is not a tree")
    func lastServiceIDStaysBelowTheClientBit() {
        #expect(throws: TreeError.self) {
            try ScreenTree(root: .stack([Screen(id: 1, ScreenContext("home"))]), lastServiceID: NodeID.clientBit)
        }
    }

    @Test("limits refuse growth beyond them, and a tree over a lowered limit may still shrink")
    func limits() throws {
        let limits = TreeLimits(maxModals: 2, maxStackDepth: 3, maxTabs: 4, maxInfoEntries: 2, maxTextBytes: 8)
        var tree = try ScreenTree(root: .stack([Screen(id: 1, ScreenContext("home"))]))
        try tree.apply(
            [
                .push(Screen(id: 2, ScreenContext("a")), onto: .root),
                .push(Screen(id: 3, ScreenContext("b")), onto: .root),
            ], within: limits)
        let refused: [(Command, String)] = [
            (.push(Screen(id: 4, ScreenContext("c")), onto: .root), "maxStackDepth"),
            (.refresh(3, info: ["x": "1", "y": "2", "z": "3"]), "maxInfoEntries"),
            (.refresh(3, info: ["x": "123456789"]), "maxTextBytes"),
        ]
        for (command, limit) in refused {
            let before = tree
            #expect {
                try tree.apply(command, within: limits)
            } throws: { error in
                guard let error = error as? TreeError else { return false }
                return error.code == .limitExceeded && error.message.contains(limit)
            }
            #expect(tree == before)
        }
        try tree.apply(
            [.present(Modal(id: 5, style: .sheet, stack: [Screen(id: 6, ScreenContext("m"))]))], within: limits)
        try tree.apply(
            [.present(Modal(id: 7, style: .sheet, stack: [Screen(id: 8, ScreenContext("m"))]))], within: limits)
        #expect(throws: TreeError.self) {
            try tree.apply(
                [.present(Modal(id: 9, style: .sheet, stack: [Screen(id: 10, ScreenContext("m"))]))], within: limits)
        }
        // Lowered limits: pops and dismissals still go through.
        let lower = TreeLimits(maxModals: 1, maxStackDepth: 1, maxTabs: 4, maxInfoEntries: 2, maxTextBytes: 8)
        try tree.apply(.dismissTo(5), within: lower)
        try tree.apply(.popTo(2), within: lower)
        #expect(tree.modals.count == 1 && tree.stack(.root)?.count == 2)
    }

    @Test("maxTreeBytes bounds the names, keys and values of the whole tree; a tree over it may still shrink")
    func treeBytes() throws {
        let limits = TreeLimits(maxTreeBytes: 12)
        var tree = try ScreenTree(root: .stack([Screen(id: 1, ScreenContext("home"))]))
        try tree.apply(.push(Screen(id: 2, ScreenContext("eight888")), onto: .root), within: limits)
        #expect(try tree.checkInvariant().textBytes == 12)
        for command: Command in [
            .push(Screen(id: 3, ScreenContext("x")), onto: .root), .refresh(2, info: ["k": "v"]),
            .present(Modal(id: 4, style: .sheet, stack: [Screen(id: 5, ScreenContext("m"))])),
        ] {
            let before = tree
            #expect {
                try tree.apply(command, within: limits)
            } throws: { error in
                guard let error = error as? TreeError else { return false }
                return error.code == .limitExceeded
                    && error.message.contains("bytes of names, keys and values in the tree; expected at most 12")
            }
            #expect(tree == before)
        }
        // Lowered: what does not grow it goes through.
        let lower = TreeLimits(maxTreeBytes: 4)
        try tree.apply(.popTo(1), within: lower)
        #expect(try tree.checkInvariant().textBytes == 4)
    }
}

@Suite("Session limits and client events")
struct SessionLimitTests {
    @Test("a sync may not invent service ids; the allocator never leaves its namespace")
    func inventedServiceIDs() throws {
        var session = Harness()
        let before = session.state
        let invented = try ScreenTree(
            root: .stack([Screen(id: NodeID(rawValue: NodeID.clientBit - 1), ScreenContext("home"))]))
        let result = session.event(.sync(invented))
        #expect(result.error?.code == .invalidEvent)
        #expect(result.error?.message.contains("never issued") == true)
        #expect(session.state == before)
        // Client ids at the top of their namespace are the shell's to use.
        let own = try ScreenTree(root: .stack([Screen(id: NodeID(rawValue: .max), ScreenContext("home"))]))
        #expect(session.event(.sync(own)).error == nil)
        let resolution = session.show(ScreenContext("chat", ["conversationId": "42"]))
        guard case .resolved = resolution.outcome else {
            Issue.record("expected resolved, got \(resolution.outcome)")
            return
        }
        #expect(session.state.tree.top.id.rawValue < NodeID.clientBit)
    }

    @Test("parked intents beyond the limit are refused on arrival, not expired later")
    func parkedLimit() throws {
        var options = Resolver.Options()
        options.maxParked = 2
        var session = Harness()
        session = Harness(resolver: try Resolver(map: .demo, options: options))
        for index in 0..<2 {
            guard case .parked = session.show(ScreenContext("editProfile")).outcome else {
                Issue.record("intent \(index) should park")
                return
            }
        }
        let before = session.state
        let third = session.show(ScreenContext("editProfile"))
        guard case .rejected(let error) = third.outcome else {
            Issue.record("expected a rejection, got \(third.outcome)")
            return
        }
        #expect(error.code == .limitExceeded && error.message.contains("maxParkedPerSession"))
        #expect(session.state == before)
    }

    @Test("conditions: count and name size are limited, by intents and by events alike")
    func conditionLimits() throws {
        var options = Resolver.Options()
        options.maxConditions = 2
        options.maxConditionKeyBytes = 8
        var session = Harness(resolver: try Resolver(map: .demo, options: options))
        #expect(session.event(.conditions(["a": true, "b": true])).error == nil)
        let before = session.state
        #expect(session.event(.conditions(["c": true])).error?.code == .limitExceeded)
        #expect(session.event(.conditions([String(repeating: "k", count: 9): true])).error?.code == .limitExceeded)
        let resolution = session.show(ScreenContext("home"), conditions: ["d": true])
        guard case .rejected(let error) = resolution.outcome else {
            Issue.record("expected a rejection, got \(resolution.outcome)")
            return
        }
        #expect(error.code == .limitExceeded && error.message.contains("maxConditions"))
        #expect(session.state == before)
    }

    @Test("an info value beyond maxTextBytes is refused")
    func infoValueLimit() throws {
        var options = Resolver.Options()
        options.limits.maxTextBytes = 16
        var session = Harness(resolver: try Resolver(map: .demo, options: options))
        let resolution = session.show(ScreenContext("chat", ["conversationId": String(repeating: "9", count: 17)]))
        guard case .rejected(let error) = resolution.outcome else {
            Issue.record("expected a rejection, got \(resolution.outcome)")
            return
        }
        #expect(error.code == .limitExceeded)
    }

    @Test("modals beyond the limit: a client's presents are refused, the tree kept")
    func modalLimit() throws {
        var options = Resolver.Options()
        options.limits.maxModals = 2
        var session = Harness(resolver: try Resolver(map: .demo, options: options))
        for index in 1...2 {
            let modal = Modal(
                id: .client(UInt64(index * 2)), style: .sheet,
                stack: [Screen(id: .client(UInt64(index * 2 + 1)), ScreenContext("settings"))])
            #expect(session.event(.presented(modal)).error == nil)
        }
        let before = session.state
        let third = Modal(id: .client(10), style: .sheet, stack: [Screen(id: .client(11), ScreenContext("settings"))])
        #expect(session.event(.presented(third)).error?.code == .limitExceeded)
        #expect(session.state == before)
    }

    @Test(
        "stale client events: the rule",
        arguments: [
            // (event, lastSeq, epoch, stale?)
            (ClientEvent.poppedTo(1), UInt64(5), UInt64(0), false),  // current
            (.poppedTo(1), 4, 0, false),  // behind only by echoes of client events
            (.poppedTo(1), 2, 0, true),  // behind a batch of the service
            (.poppedTo(1), 9, 0, true),  // ahead: another epoch's seq
            (.poppedTo(1), 5, 8, true),  // another epoch
            (.poppedTo(1), 5, 7, false),  // this epoch
            (.ready(), 0, 0, false), (.ack(1), 0, 8, false), (.conditions(["a": true]), 0, 0, false),
            (.sync(RouteMap.demo.initialTree()), 0, 0, false),  // an app's authoritative tree
            (.sync(RouteMap.demo.initialTree()), 2, 0, true),
        ])
    func staleness(event: ClientEvent, lastSeq: UInt64, epoch: UInt64, stale: Bool) throws {
        let resolver = try Resolver(map: .demo)
        var state = resolver.initialState()
        state.lastServiceSeq = 3
        let error = resolver.staleness(
            of: event, lastSeq: lastSeq, epoch: epoch, session: state, seq: 5, currentEpoch: 7)
        #expect((error != nil) == stale)
        if let error {
            #expect(error.code == .staleEvent)
            #expect(error.message.contains("epoch 7, seq 5"))
        }
    }
}

@Suite("Ready: intents held until the shell is ready")
struct ReadyTests {
    func deepLink(_ id: String, ttl: UInt32 = 0) -> Intent {
        var intent = Intent.show(ScreenContext("chat", ["conversationId": "42"]), id: id)
        intent.waitForReady = true
        intent.ttlMilliseconds = ttl
        return intent
    }

    @Test("a deep link waits for Ready, is released by it, and later ones go at once")
    func heldUntilReady() throws {
        var session = Harness()
        let held = session.send(deepLink("d1"))
        #expect(held.outcome == .parked(.notReady, redirect: []))
        #expect(session.state.tree == RouteMap.demo.initialTree())
        let ready = session.event(.ready())
        #expect(ready.released.map(\.intent.id) == ["d1"])
        #expect(session.state.tree.top.context == ScreenContext("chat", ["conversationId": "42"]))
        // Ready already: nothing waits.
        var next = Intent.show(ScreenContext("settings"), id: "d2")
        next.waitForReady = true
        guard case .resolved = session.send(next).outcome else {
            Issue.record("expected resolved")
            return
        }
    }

    @Test("an app that starts over (authoritative sync) or suspends is not ready until its next Ready")
    func startingOver() throws {
        var session = Harness()
        _ = session.event(.ready())
        let result = session.resolver.apply(
            .sync(RouteMap.demo.initialTree()), to: &session.state, now: session.now, authoritative: true)
        #expect(result.error == nil)
        #expect(session.send(deepLink("s1")).outcome == .parked(.notReady, redirect: []))
        #expect(session.event(.ready()).released.map(\.intent.id) == ["s1"])
        _ = session.event(.suspended)
        #expect(session.send(deepLink("s2")).outcome == .parked(.notReady, redirect: []))
        #expect(session.event(.ready()).released.map(\.intent.id) == ["s2"])
    }

    @Test("a held intent expires after its time to live if no shell gets ready")
    func expires() throws {
        var session = Harness()
        _ = session.send(deepLink("e1", ttl: 5))
        let expired = session.resolver.expire(&session.state, now: session.now + 10_000_000)
        #expect(expired.map(\.intent.id) == ["e1"])
        #expect(expired.first?.reason == .notReady)
    }
}

@Suite("Reloads")
struct ReloadTests {
    /// The demo map with the profile tab renamed "me" and editProfile gone.
    static func reloaded() throws -> Resolver {
        var map = RouteMap.demo
        map.tabs[3] = RouteMap.TabSpec(name: "me", root: "myProfile")
        for (name, spec) in map.screens where spec.homeTab == "profile" {
            var changed = spec
            changed.homeTab = "me"
            map.screens[name] = changed
        }
        map.screens["editProfile"] = nil
        return try Resolver(map: map)
    }

    @Test("after a reload with other tabs, the next intent resets the root in the same batch, never INTERNAL")
    func tabsChanged() throws {
        var session = Harness()
        session.show(ScreenContext("settings"))
        let resolver = try Self.reloaded()
        let before = session.state.tree
        let resolution = resolver.resolve(
            .show(ScreenContext("settings"), id: "after"), into: &session.state, now: session.now)
        guard case .resolved(let commands) = resolution.outcome else {
            Issue.record("expected resolved, got \(resolution.outcome)")
            return
        }
        #expect(session.state.tree.tabNames == ["home", "search", "chats", "me"])
        #expect(session.state.tree.top.context.screen == "settings")
        // A shell applying the batch to its mirror gets the same tree.
        let mirror = try before.applying(commands)
        #expect(mirror.root == session.state.tree.root && mirror.modals == session.state.tree.modals)
    }

    @Test("after a reload, a parked intent whose screen is gone is refused on release, with its code")
    func parkedScreenGone() throws {
        var session = Harness()
        let parked = session.show(ScreenContext("editProfile"))
        guard case .parked = parked.outcome else {
            Issue.record("expected parked, got \(parked.outcome)")
            return
        }
        let resolver = try Self.reloaded()
        let result = resolver.apply(.conditions(["authenticated": true]), to: &session.state, now: session.now)
        #expect(result.released.count == 1)
        let released = try #require(result.released.first)
        #expect(released.rejection?.code == .unknownScreen, "\(released.outcome)")
        #expect(session.state.parked.isEmpty)
    }
}
