import NavigatorCore
import Testing

@Suite("Client events, release and expiry")
struct EventTests {
    @Test("dismissing a blocking call releases the intents it parked")
    func blockerDismissed() throws {
        var session = Harness()
        session.show(incomingCall)
        let parked = session.send(intent(chat(42), id: "chat-42"))
        guard case .parked(.blocked(_, let screen), _) = parked.outcome else {
            Issue.record("expected a blocked park, got \(parked.outcome)")
            return
        }
        #expect(screen == "incomingCall")
        #expect(session.state.parked.map(\.intent.id) == ["chat-42"])

        let result = session.event(.dismissedTo(nil))
        #expect(result.error == nil)
        #expect(result.echo.map(\.description) == ["dismissAll"])
        #expect(result.released.map(\.intent.id) == ["chat-42"])
        #expect(
            result.released.first?.commands.map(\.description) == [
                "selectTab(chats)", "push(chat(conversationId=42)#7 onto tab chats)",
            ])
        #expect(result.released.first?.explanation.first?.step == .release)
        // The explanation keeps its parts (the reason, the screens) and writes them when read.
        let note = result.released.first?.explanation.first?.detail ?? ""
        #expect(note.hasPrefix("parked ") && note.contains(" ms ago (blocked by incomingCall (modal #"), "\(note)")
        #expect(note.hasSuffix(")); trying again"), "\(note)")
        #expect(session.state.parked.isEmpty)
        #expect(session.state.tree.top.context == chat(42))

        // A path's steps are labelled with their place in it.
        let path = session.send(intent(chat(7), ScreenContext("settings"), id: "path"))
        #expect(
            path.explanation.map(\.description).contains { $0.contains("transition: step 2 of 2, settings: ") },
            "\(path.explanation.map(\.description))")
        #expect(
            path.explanation.map(\.description).contains { $0.contains("step 1 of 2, chat(conversationId=7): ") },
            "\(path.explanation.map(\.description))")
    }

    @Test("login guard: redirect, then resume the original intent once authenticated")
    func loginThenResume() {
        var session = Harness()
        let first = session.send(intent(ScreenContext("editProfile"), id: "edit"))
        #expect(first.commands.map(\.description) == ["present(fullScreen #5: login#6)"])
        // The shell reports the login succeeded; the login modal is still up.
        let result = session.event(.conditions(["authenticated": true]))
        #expect(result.echo.isEmpty)
        #expect(result.released.map(\.intent.id) == ["edit"])
        #expect(
            result.released.first?.commands.map(\.description) == ["dismissAll", "present(sheet #7: editProfile#8)"])
        #expect(session.outline == initialOutline + "\nmodal #7 sheet: editProfile#8")
    }

    @Test("conditions set by an intent release guarded intents too")
    func conditionsFromIntent() {
        var session = Harness()
        session.send(intent(ScreenContext("editProfile"), id: "edit"))
        var login = intent(ScreenContext("home"), id: "logged-in")
        login.setConditions = ["authenticated": true]
        let result = session.send(login)
        #expect(result.released.map(\.intent.id) == ["edit"])
        #expect(session.state.tree.top.context.screen == "editProfile")
        #expect(session.state.conditions == ["authenticated": true])
    }

    @Test("released intents go highest priority first, then oldest first")
    func releaseOrder() {
        var session = Harness()
        session.show(incomingCall)
        session.send(intent(chat(1), id: "normal-old"))
        session.send(intent(chat(2), id: "high", priority: .high))
        session.send(intent(chat(3), id: "normal-new"))
        let result = session.event(.dismissedTo(nil))
        #expect(result.released.map(\.intent.id) == ["high", "normal-old", "normal-new"])
        #expect(session.state.tree.top.context == chat(3))
    }

    @Test("an id parked twice (its time to live longer than the dedup window) is released once, by its higher entry")
    func releaseOfAnIdParkedTwice() {
        var session = Harness()
        session.show(incomingCall)
        var first = intent(chat(1), id: "again")
        first.ttlMilliseconds = 60 * 60 * 1000
        session.send(first)
        session.now += session.resolver.options.dedupWindow + RecentIntentIDs.tick
        var second = intent(chat(2), id: "again", priority: .high)
        second.ttlMilliseconds = 60 * 60 * 1000
        let waits = session.send(second).outcome
        guard case .parked = waits else {
            Issue.record("expected the id to wait a second time once the dedup window had passed, got \(waits)")
            return
        }
        #expect(session.state.parked.map(\.intent.priority) == [.normal, .high])
        let result = session.event(.dismissedTo(nil))
        #expect(result.released.map(\.intent.target) == [.path([chat(2)])])
        #expect(session.state.parked.isEmpty)
        #expect(session.state.tree.top.context == chat(2))
    }

    @Test("a parked intent expires after its time to live and is not released")
    func expiry() {
        var session = Harness()
        session.show(incomingCall)
        var short = intent(chat(1), id: "short")
        short.ttlMilliseconds = 500
        session.send(short)
        session.send(intent(chat(2), id: "default"))
        let later = session.now + 600_000_000
        var state = session.state
        let expired = session.resolver.expire(&state, now: later)
        #expect(expired.map(\.intent.id) == ["short"])
        #expect(state.parked.map(\.intent.id) == ["default"])
        #expect(expired.first?.expiresAt == expired.first!.parkedAt + 500_000_000)
    }

    @Test("intents expiring in one pass are reported and remembered oldest first; the others keep their order")
    func expiryOrder() {
        var session = Harness()
        session.show(incomingCall)
        for (index, ttl) in [500, 0, 400, 0, 300].enumerated() {  // 0: the resolver's default (minutes)
            var parked = intent(chat(index + 1), id: "p\(index)")
            parked.ttlMilliseconds = UInt32(ttl)
            session.send(parked)
        }
        #expect(session.state.parked.map(\.intent.id) == ["p0", "p1", "p2", "p3", "p4"])
        var state = session.state
        let expired = session.resolver.expire(&state, now: session.now + 600_000_000)
        #expect(expired.map(\.intent.id) == ["p0", "p2", "p4"])
        #expect(state.parked.map(\.intent.id) == ["p1", "p3"])
        #expect(state.recentlyExpired.map(\.intentID) == ["p0", "p2", "p4"])
    }

    @Test(
        "expired intents are remembered for the dedup window after they expired, at most 8; at rest they are forgotten")
    func expiredRemembered() throws {
        var options = Resolver.Options()
        options.dedupWindow = 60_000_000_000
        let resolver = try Resolver(map: .demo, options: options)
        var state = resolver.initialState()
        _ = resolver.resolve(intent(incomingCall, id: "call"), into: &state, now: 1)
        func expireOne(_ id: String, at now: Int64) {
            var short = intent(chat(1), id: id)
            short.ttlMilliseconds = 1
            _ = resolver.resolve(short, into: &state, now: now)
            #expect(resolver.expire(&state, now: now + 2_000_000).map(\.intent.id) == [id])
        }
        for index in 0..<10 { expireOne("e\(index)", at: Int64(index + 1) * 1_000_000_000) }
        #expect(state.recentlyExpired.map(\.intentID) == (2..<10).map { "e\($0)" })  // the last 8
        // Past the window of the older ones: they go when the next one expires.
        expireOne("late", at: 65_000_000_000)
        #expect(state.recentlyExpired.map(\.intentID) == ["e5", "e6", "e7", "e8", "e9", "late"])
        // At rest: forgotten once the window is past, with the intent ids.
        let forgot = state.forget(before: 200_000_000_000, window: options.dedupWindow)
        #expect(forgot)
        #expect(state.recentlyExpired.isEmpty && state.recentIntentIDs.isEmpty && !state.remembersForAWhile)
        #expect(state.parked.isEmpty && state.tree.top.context == incomingCall)
    }

    @Test("at the parked capacity one more is refused; over a lowered capacity the oldest expire, reported")
    func parkedCapacity() throws {
        var options = Resolver.Options()
        options.maxParked = 3
        let resolver = try Resolver(map: .demo, options: options)
        var state = resolver.initialState()
        _ = resolver.resolve(intent(incomingCall, id: "call"), into: &state, now: 1)
        for index in 1...3 {
            _ = resolver.resolve(intent(chat(index), id: "c\(index)"), into: &state, now: Int64(index) + 1)
        }
        let refused = resolver.resolve(intent(chat(4), id: "c4"), into: &state, now: 5)
        #expect(refused.outcome == .rejected(refused.rejection!))
        #expect(refused.rejection?.code == .limitExceeded)
        #expect(state.parked.map(\.intent.id) == ["c1", "c2", "c3"])

        options.maxParked = 2  // a restart with a lower limit
        let lowered = try Resolver(map: .demo, options: options)
        let evicted = lowered.expire(&state, now: 10)
        #expect(evicted.map(\.intent.id) == ["c1"])
        #expect(state.parked.map(\.intent.id) == ["c2", "c3"])
    }

    @Test(
        "events the tree cannot take are refused and change nothing",
        arguments: [
            ClientEvent.poppedTo(99),
            .dismissedTo(99),
            .tabSelected("nope"),
            .pushed(Screen(id: 50, ScreenContext("chat", ["conversationId": "1"])), onto: .tab("chats")),
            .pushed(Screen(id: .client(1), ScreenContext("x")), onto: .modal(77)),
            .presented(Modal(id: 60, style: .sheet, stack: [Screen(id: 61, ScreenContext("x"))])),
        ])
    func refused(event: ClientEvent) {
        var session = Harness()
        session.show(chat(1))
        let before = session.state
        let result = session.event(event)
        #expect(result.error?.code == .invalidEvent)
        #expect(result.error?.message.isEmpty == false)
        #expect(session.state == before)
        #expect(result.echo.isEmpty)
    }

    @Test("a shell's own screens live in the client namespace and are found by switchers")
    func clientScreens() {
        var session = Harness()
        session.show(chat(7))
        let pushed = Screen(id: .client(1), ScreenContext("thread", ["conversationId": "7", "threadId": "3"]))
        let result = session.event(.pushed(pushed, onto: .tab("chats")))
        #expect(result.error == nil)
        #expect(result.echo == [.push(pushed, onto: .tab("chats"))])
        session.show(ScreenContext("home"))
        let back = session.send(intent(thread(7, 3), id: "t"))
        #expect(back.commands.map(\.description) == ["selectTab(chats)"])
        // New service ids continue after the service's own, unaffected by client ids.
        let next = session.send(intent(chat(8), id: "c8"))
        #expect(next.commands.map(\.description).last == "push(chat(conversationId=8)#6 onto tab chats)")
    }

    @Test("echoes are idempotent: the shell that made the change applies its echo harmlessly")
    func echoIdempotent() throws {
        var session = Harness()
        session.show(thread(1, 2))
        var shell = session.state.tree
        try shell.apply(.popTo(5))  // the user goes back to the chat
        let result = session.event(.poppedTo(5))
        try shell.apply(result.echo)
        #expect(shell == session.state.tree)
    }

    @Test("a full sync replaces the tree")
    func sync() throws {
        var session = Harness()
        let tree = try ScreenTree(root: .stack([Screen(id: .client(1), ScreenContext("welcome"))]))
        let result = session.event(.sync(tree))
        #expect(result.error == nil)
        #expect(session.outline == "root: welcome#c1")
    }
}
