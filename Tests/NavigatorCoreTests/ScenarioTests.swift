import NavigatorCore
import Testing

/// Given this session, this intent -> exactly these commands and this tree.
struct Scenario: Sendable, CustomTestStringConvertible {
    var name: String
    var given: @Sendable (inout Harness) -> Void = { _ in }
    var intent: Intent
    var outcome: Expected
    var commands: [String]
    /// The tree afterwards; `nil` means "unchanged".
    var tree: String?

    var testDescription: String { name }
}

func intent(_ path: ScreenContext..., id: String = "i", priority: Intent.Priority = .normal) -> Intent {
    Intent(id: id, session: "s", target: .path(path), priority: priority)
}

func link(_ url: String) -> Intent { Intent(id: "i", session: "s", target: .url(url)) }

let scenarios: [Scenario] = [
    Scenario(
        name: "a chat is pushed onto its home tab, which is selected first",
        intent: intent(chat(42)), outcome: .resolved,
        commands: ["selectTab(chats)", "push(chat(conversationId=42)#5 onto tab chats)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a path tab > chat > thread resolves into one batch",
        intent: intent(ScreenContext("chatList"), chat(42), thread(42, 7)), outcome: .resolved,
        commands: [
            "selectTab(chats)", "push(chat(conversationId=42)#5 onto tab chats)",
            "push(thread(conversationId=42, threadId=7)#6 onto tab chats)",
        ],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5 > thread(conversationId=42, threadId=7)#6
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a thread alone gets its chat built beneath it (back-stack synthesis)",
        intent: intent(thread(42, 7)), outcome: .resolved,
        commands: [
            "selectTab(chats)", "push(chat(conversationId=42)#5 onto tab chats)",
            "push(thread(conversationId=42, threadId=7)#6 onto tab chats)",
        ],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5 > thread(conversationId=42, threadId=7)#6
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a deep link while a sheet is up pushes into the sheet's stack",
        given: { session in
            session.show(ScreenContext("editProfile"), conditions: ["authenticated": true])
        },
        intent: link("app://chat/42/thread/7"), outcome: .resolved,
        commands: [
            "push(chat(conversationId=42)#7 onto modal #5)",
            "push(thread(conversationId=42, threadId=7)#8 onto modal #5)",
        ],
        tree: initialOutline + """

            modal #5 sheet: editProfile#6 > chat(conversationId=42)#7 > thread(conversationId=42, threadId=7)#8
            """),
    Scenario(
        name: "a chat that exists deeper in another tab's stack is switched to",
        given: { session in
            session.show(thread(42, 7))
            session.show(ScreenContext("home"))
        },
        intent: intent(chat(42)), outcome: .resolved,
        commands: ["selectTab(chats)", "popTo(#5)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a chat behind a sheet is reached by dismissing the sheet",
        given: { session in
            session.show(chat(42))
            session.show(ScreenContext("editProfile"), conditions: ["authenticated": true])
        },
        intent: intent(chat(42)), outcome: .resolved,
        commands: ["dismissAll"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5
            tab profile: myProfile#4
            """),
    Scenario(
        name: "the same chat with other info is refreshed, not pushed",
        given: { $0.show(chat(42)) },
        intent: intent(chat(42, ["draft": "hi"])), outcome: .refreshed,
        commands: ["refresh(#5, draft=hi)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42, draft=hi)#5
            tab profile: myProfile#4
            """),
    Scenario(
        name: "the same chat with the same info is ignored",
        given: { $0.show(chat(42)) },
        intent: intent(chat(42)), outcome: .ignored, commands: [], tree: nil),
    Scenario(
        name: "identity compares canonical values: 042 is 42",
        given: { $0.show(chat(42)) },
        intent: intent(ScreenContext("chat", ["conversationId": "042"])), outcome: .ignored, commands: [], tree: nil),
    Scenario(
        name: "a unique-in-stack chat replaces the other chat in the stack",
        given: { $0.show(chat(17)) },
        intent: intent(chat(42)), outcome: .resolved,
        commands: ["popTo(#3)", "push(chat(conversationId=42)#6 onto tab chats)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#6
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a tab root selects its tab and pops to the root",
        given: { session in
            session.show(thread(42, 7))
            session.show(ScreenContext("home"))
        },
        intent: intent(ScreenContext("chatList")), outcome: .resolved,
        commands: ["selectTab(chats)", "popTo(#3)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a blocking incoming call parks a chat",
        given: { $0.show(incomingCall) },
        intent: intent(chat(42)), outcome: .parked, commands: [], tree: nil),
    Scenario(
        name: "a critical intent dismisses the blocking call",
        given: { $0.show(incomingCall) },
        intent: intent(chat(42), priority: .critical), outcome: .resolved,
        commands: ["dismissAll", "selectTab(chats)", "push(chat(conversationId=42)#7 onto tab chats)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#7
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a guarded screen redirects to login and parks",
        intent: intent(ScreenContext("editProfile")), outcome: .parked,
        commands: ["present(fullScreen #5: login#6)"],
        tree: initialOutline + "\nmodal #5 fullScreen: login#6"),
    Scenario(
        name: "a set-root screen replaces the root",
        intent: intent(ScreenContext("welcome")), outcome: .resolved,
        commands: ["setRoot(stack[welcome#5])"], tree: "root: welcome#5"),
    Scenario(
        name: "a tab screen after a set-root restores the tab bar",
        given: { $0.show(ScreenContext("welcome")) },
        intent: intent(chat(42)), outcome: .resolved,
        commands: [
            "setRoot(tabs[home,search,chats,profile] selected chats)",
            "push(chat(conversationId=42)#10 onto tab chats)",
        ],
        tree: """
            tab home: home#6
            tab search: search#7
            *tab chats: chatList#8 > chat(conversationId=42)#10
            tab profile: myProfile#9
            """),
    Scenario(
        name: "a modal with a parent shows the parent first",
        given: { $0.event(.conditions(["authenticated": true])) },
        intent: intent(ScreenContext("payment", ["conversationId": "42", "amount": "10", "currency": "EUR"])),
        outcome: .resolved,
        commands: [
            "selectTab(chats)", "push(chat(conversationId=42)#5 onto tab chats)",
            "present(sheet #6: payment(amount=10, conversationId=42, currency=EUR)#7)",
        ],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5
            tab profile: myProfile#4
            modal #6 sheet: payment(amount=10, conversationId=42, currency=EUR)#7
            """),
    Scenario(
        name: "a replace screen takes the top screen's place",
        given: { session in
            session.event(.conditions(["authenticated": true]))
            session.show(ScreenContext("payment", ["conversationId": "42", "amount": "10", "currency": "EUR"]))
        },
        intent: intent(ScreenContext("paymentReceipt", ["receiptId": "r-1"])), outcome: .resolved,
        commands: ["replace(#7 with paymentReceipt(receiptId=r-1)#8)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42)#5
            tab profile: myProfile#4
            modal #6 sheet: paymentReceipt(receiptId=r-1)#8
            """),
    Scenario(
        name: "an over-current modal is presented",
        intent: intent(ScreenContext("mediaViewer", ["mediaId": "m1"])), outcome: .resolved,
        commands: ["present(overCurrent #5: mediaViewer(mediaId=m1)#6)"],
        tree: initialOutline + "\nmodal #5 overCurrent: mediaViewer(mediaId=m1)#6"),
    Scenario(
        name: "a URL's query parameters become info",
        intent: link("app://chat/42?draft=see%20you"), outcome: .resolved,
        commands: ["selectTab(chats)", "push(chat(conversationId=42, draft=see you)#5 onto tab chats)"],
        tree: """
            tab home: home#1
            tab search: search#2
            *tab chats: chatList#3 > chat(conversationId=42, draft=see you)#5
            tab profile: myProfile#4
            """),
    Scenario(
        name: "a uuid is compared in lower case",
        given: { $0.show(ScreenContext("userProfile", ["userId": "ABCDEF00-0000-4000-8000-000000000001"])) },
        intent: intent(ScreenContext("userProfile", ["userId": "abcdef00-0000-4000-8000-000000000001"])),
        outcome: .ignored, commands: [], tree: nil),
    Scenario(
        name: "a second intent with the same id is ignored",
        given: { $0.send(Intent(id: "dup", session: "s", target: .path([chat(17)]))) },
        intent: intent(chat(42), id: "dup"), outcome: .ignored, commands: [], tree: nil),
]

let rejections: [Scenario] = [
    Scenario(
        name: "unknown screen", intent: intent(ScreenContext("chatt")), outcome: .rejected(.unknownScreen), commands: []
    ),
    Scenario(
        name: "missing required info", intent: intent(ScreenContext("chat")), outcome: .rejected(.missingInfo),
        commands: []),
    Scenario(
        name: "int info that is not a number", intent: intent(ScreenContext("chat", ["conversationId": "abc"])),
        outcome: .rejected(.invalidInfo), commands: []),
    Scenario(
        name: "undeclared info key", intent: intent(chat(1, ["mood": "happy"])), outcome: .rejected(.invalidInfo),
        commands: []),
    Scenario(
        name: "enum value not allowed",
        intent: intent(ScreenContext("payment", ["conversationId": "1", "amount": "5", "currency": "JPY"])),
        outcome: .rejected(.invalidInfo), commands: []),
    Scenario(
        name: "malformed uuid", intent: intent(ScreenContext("incomingCall", ["callId": "not-a-uuid"])),
        outcome: .rejected(.invalidInfo), commands: []),
    Scenario(
        name: "url no route matches", intent: link("app://nowhere/1"), outcome: .rejected(.unknownURL), commands: []),
    Scenario(
        name: "url with another scheme", intent: link("https://chat/1"), outcome: .rejected(.unknownURL), commands: []),
    Scenario(
        name: "empty path", intent: Intent(id: "i", session: "s", target: .path([])), outcome: .rejected(.emptyPath),
        commands: []),
    Scenario(
        name: "path longer than allowed",
        intent: Intent(id: "i", session: "s", target: .path(Array(repeating: chat(1), count: 17))),
        outcome: .rejected(.pathTooLong), commands: []),
    Scenario(name: "empty intent id", intent: intent(chat(1), id: ""), outcome: .rejected(.invalidID), commands: []),
    Scenario(
        name: "intent id over 128 bytes", intent: intent(chat(1), id: String(repeating: "x", count: 129)),
        outcome: .rejected(.invalidID), commands: []),
    Scenario(
        name: "empty session", intent: Intent(id: "i", session: "", target: .path([chat(1)])),
        outcome: .rejected(.invalidSession), commands: []),
]

@Suite("Resolver scenarios")
struct ScenarioTests {
    @Test(arguments: scenarios + rejections)
    func scenario(_ scenario: Scenario) throws {
        var session = Harness()
        scenario.given(&session)
        let before = session.state
        let resolution = session.send(scenario.intent)
        let explanation = resolution.explanation.map(\.description).joined(separator: "\n")
        #expect(Expected(resolution.outcome) == scenario.outcome, "\(explanation)")
        #expect(resolution.commands.map(\.description) == scenario.commands, "\(explanation)")
        #expect(session.outline == (scenario.tree ?? before.tree.outline), "\(explanation)")
        // Every outcome explains itself, and exactly one step decided it.
        #expect(resolution.explanation.filter(\.decisive).count == 1, "\(explanation)")
        if case .rejected = scenario.outcome {
            #expect(session.state.tree == before.tree)
            #expect(session.state.parked == before.parked)
        }
        // What the service publishes is what a shell applies: the batch turns the old tree
        // into the new one.
        var mirror = before.tree
        try mirror.apply(resolution.commands)
        #expect(mirror == session.state.tree)
    }

    @Test("rejections say what was wrong and what was expected")
    func rejectionMessages() {
        var session = Harness()
        let cases: [(Intent, String)] = [
            (intent(ScreenContext("chatt")), "screen chatt is not in the route map; expected one of"),
            (intent(ScreenContext("chat")), "chat needs info conversationId (int); it is missing"),
            (intent(ScreenContext("chat", ["conversationId": "abc"])), "chat.conversationId is \"abc\"; expected int"),
            (
                intent(chat(1, ["mood": "x"])),
                "chat has no info key mood; expected one of conversationId, draft, highlight"
            ),
            (link("app://nowhere"), "no route matches app://nowhere; expected one of"),
            (intent(ScreenContext("chatList"), ScreenContext("nope")), "path[1] screen nope is not in the route map"),
        ]
        for (intent, message) in cases {
            guard case .rejected(let error) = session.send(intent).outcome else {
                Issue.record("\(intent) was not rejected")
                continue
            }
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    @Test("explanations name the step that decided and the switcher that matched")
    func explanations() {
        var session = Harness()
        session.show(thread(42, 7))
        session.show(ScreenContext("home"))
        let switched = session.send(intent(chat(42), id: "e1"))
        let decisive = switched.explanation.first(where: \.decisive)
        #expect(decisive?.step == .switcher)
        #expect(decisive?.detail.hasPrefix("existing screen: ") == true)
        #expect(switched.summary.hasPrefix("switcher: existing screen: "))

        let synthesized = session.send(intent(thread(9, 1), id: "e2"))
        #expect(
            synthesized.explanation.contains { $0.step == .backStack && $0.detail.contains("chat(conversationId=9)") })

        var blocked = Harness()
        blocked.show(incomingCall)
        let parked = blocked.send(intent(chat(1), id: "e3"))
        #expect(parked.explanation.last?.step == .blocking)
        #expect(parked.summary.contains("blocking incomingCall"))
    }
}
