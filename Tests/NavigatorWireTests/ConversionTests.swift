import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import Testing

@Suite("Core <-> wire conversions")
struct ConversionTests {
    /// A tree with every kind of node: tabs, pushed screens with info, client ids, modals of
    /// each style, and a last service id above every id present.
    static func richTree() throws -> ScreenTree {
        var tree = RouteMap.demo.initialTree()
        try tree.apply([
            .selectTab("chats"),
            .push(Screen(id: 5, ScreenContext("chat", ["conversationId": "42", "draft": "hi"])), onto: .tab("chats")),
            .push(
                Screen(id: .client(1), ScreenContext("thread", ["conversationId": "42", "threadId": "7"])),
                onto: .tab("chats")),
            .push(Screen(id: 9, ScreenContext("settings")), onto: .tab("profile")),
            .popToRoot(.tab("profile")),
        ])
        for (offset, style) in PresentationStyle.allCases.enumerated() {
            let base = UInt64(20 + offset * 2)
            try tree.apply(
                .present(
                    Modal(
                        id: NodeID(rawValue: base), style: style,
                        stack: [Screen(id: NodeID(rawValue: base + 1), ScreenContext("login"))])))
        }
        return tree
    }

    @Test("a tree survives the wire exactly, last service id included")
    func tree() throws {
        let tree = try Self.richTree()
        let bytes: [UInt8] = try Navigator_V1_ScreenTree(tree).serializedBytes()
        let back = try Navigator_V1_ScreenTree(serializedBytes: bytes).core()
        #expect(back == tree)
        #expect(back.lastServiceID == 27)
        let single = try ScreenTree(root: .stack([Screen(id: 3, ScreenContext("welcome"))]), version: 4)
        #expect(try Navigator_V1_ScreenTree(single).core() == single)
    }

    @Test("every command survives the wire")
    func commands() throws {
        let screen = Screen(id: 7, ScreenContext("chat", ["conversationId": "1"]))
        let commands: [Command] = [
            .selectTab("chats"), .push(screen, onto: .tab("chats")), .push(screen, onto: .modal(3)),
            .push(screen, onto: .root),
            .present(Modal(id: 8, style: .popover, stack: [screen])), .popTo(7), .popToRoot(.modal(8)),
            .dismissTo(nil), .dismissTo(8), .setRoot(.stack([screen])), .setRoot(try Self.richTree().root),
            .replace(7, with: Screen(id: 9, ScreenContext("welcome"))), .refresh(7, info: ["draft": "x"]),
        ]
        let batch = Navigator_V1_CommandBatch(
            session: "s", seq: 3, intentID: "i", animated: true, commands: commands, treeVersion: 9, summary: "why",
            cause: .intent)
        let decoded = try Navigator_V1_CommandBatch(serializedBytes: try batch.serializedBytes() as [UInt8])
        #expect(try decoded.coreCommands() == commands)
        #expect(decoded.seq == 3 && decoded.summary == "why" && decoded.cause == .intent)
    }

    @Test("intents survive the wire; animated defaults to true")
    func intents() throws {
        let intents = [
            Intent(id: "a", session: "s", target: .path([ScreenContext("chat", ["conversationId": "1"])])),
            Intent(
                id: "b", session: "s", target: .url("app://chat/1"), animated: false, source: "push",
                priority: .critical,
                ttlMilliseconds: 500, sentAt: 123, setConditions: ["authenticated": true]),
        ]
        for intent in intents {
            let wire = Navigator_V1_Intent(intent)
            let decoded = try Navigator_V1_Intent(serializedBytes: try wire.serializedBytes() as [UInt8])
            #expect(try decoded.core() == intent)
        }
        var traced = intents[0]
        traced.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(
            try Navigator_V1_Intent(serializedBytes: try Navigator_V1_Intent(traced).serializedBytes() as [UInt8])
                .core() == traced)
        // One not of W3C's form is dropped, not refused (the worker counts it).
        var wrong = Navigator_V1_Intent(traced)
        wrong.traceparent = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
        #expect(wrong.hasInvalidTraceparent && !Navigator_V1_Intent(traced).hasInvalidTraceparent)
        #expect(try wrong.core().traceparent == "")
        var bare = Navigator_V1_Intent()
        bare.id = "x"
        #expect(!bare.hasInvalidTraceparent)
        #expect(try bare.core(session: "frame").animated)
        #expect(try bare.core(session: "frame").session == "frame")
    }

    @Test("wire errors name the field and what was expected")
    func errors() {
        func message(_ body: () throws -> Void) -> String {
            do {
                try body()
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        var both = Navigator_V1_Intent()
        both.url = "app://x"
        both.path = [.init(ScreenContext("home"))]
        #expect(message { _ = try both.core() }.contains("both a path and a url"))

        var mismatch = Navigator_V1_Intent()
        mismatch.session = "a"
        #expect(
            message { _ = try mismatch.core(session: "b") }.hasPrefix("session_mismatch: intent session \"a\" differs"))

        var tree = Navigator_V1_ScreenTree()
        #expect(message { _ = try tree.core() } == "malformed: tree.root is missing")
        tree.root = .init(.stack([]))
        #expect(message { _ = try tree.core() }.contains("tree is not a valid tree: the root has an empty stack"))
        tree.root = .init(.stack([Screen(id: 1, ScreenContext("a"))]))
        tree.root.stack.stack[0].id = 0
        #expect(
            message { _ = try tree.core() } == "malformed: tree.root.stack.stack[0].id is 0; expected a non-zero id")

        #expect(
            message { _ = try Navigator_V1_Command().core("commands[2]") }
                == "malformed: commands[2] has no command set")
        #expect(message { _ = try Navigator_V1_ClientEvent().core() }.contains("client event has no kind set"))
    }

    @Test(
        "client events survive the wire",
        arguments: [
            ClientEvent.ready(), .ready(appVersion: AppVersion("1.10.2")), .poppedTo(5), .dismissedTo(nil),
            .dismissedTo(8), .tabSelected("chats"),
            .pushed(Screen(id: .client(2), ScreenContext("x")), onto: .tab("home")),
            .presented(Modal(id: .client(3), style: .fullScreen, stack: [Screen(id: .client(4), ScreenContext("y"))])),
            .ack(12), .conditions(["authenticated": false]),
        ])
    func events(event: ClientEvent) throws {
        let wire = Navigator_V1_ClientEvent(event, session: "s", lastSeq: 4)
        let decoded = try Navigator_V1_ClientEvent(serializedBytes: try wire.serializedBytes() as [UInt8])
        #expect(try decoded.core() == event)
        #expect(decoded.lastSeq == 4)
    }

    @Test("every resolver error code has its own reject code")
    func rejectCodes() {
        let codes = Set(ResolveError.Code.allCases.map { Navigator_V1_RejectCode($0) })
        #expect(codes.count == ResolveError.Code.allCases.count)
        #expect(!codes.contains(.unspecified))
        #expect(Navigator_V1_RejectCode(.unknownScreen).label == "unknown_screen")
    }
}

@Suite("State file records")
struct StoredSessionTests {
    @Test("a session's whole state survives the state file's encoding")
    func roundTrip() throws {
        let intent = Intent(
            id: "p1", session: "s", target: .path([ScreenContext("chat", ["conversationId": "4"])]), priority: .high,
            ttlMilliseconds: 900, sentAt: 5, setConditions: ["authenticated": false])
        let state = SessionState(
            tree: try ConversionTests.richTree(), conditions: ["authenticated": true, "beta": false],
            parked: [
                ParkedIntent(
                    intent: intent, reason: .blocked(by: 20, screen: "incomingCall"), parkedAt: 10, expiresAt: 20),
                ParkedIntent(
                    intent: intent, reason: .guardUnmet(condition: "authenticated", redirect: "login"), parkedAt: 11,
                    expiresAt: 21),
            ],
            recentIntentIDs: Self.recent(["a", "b"]))
        let bytes: [UInt8] = try Navigator_V1_StoredSession(state, seq: 42).serializedBytes()
        let (back, seq) = try Navigator_V1_StoredSession(serializedBytes: bytes).core()
        #expect(back == state)
        #expect(seq == 42)
    }

    static func recent(_ ids: [String]) -> RecentIntentIDs {
        var recent = RecentIntentIDs()
        let key = DedupKey(k0: 1, k1: 2)
        for (index, id) in ids.enumerated() {
            recent.insert(
                key.intentIDHash(id), now: 1_000_000_000_000 + Int64(index) * 3_000_000_000, window: 600_000_000_000,
                capacity: 256)
        }
        return recent
    }

    @Test("remembered ids take 8 bytes each in the record")
    func compactIDs() throws {
        let tree = try ConversionTests.richTree()
        let without: [UInt8] = try Navigator_V1_StoredSession(SessionState(tree: tree), seq: 1).serializedBytes()
        let ids = (0..<100).map { "intent-\($0)-with-a-long-uuid-like-name-0123456789abcdef" }
        let with: [UInt8] = try Navigator_V1_StoredSession(
            SessionState(tree: tree, recentIntentIDs: Self.recent(ids)), seq: 1
        ).serializedBytes()
        // 800 bytes of ids, a tag and a length, and the base time.
        #expect(with.count - without.count <= 800 + 3 + 11)
    }

    @Test("a record still holding ids as strings (before the migration) is refused, saying so")
    func stringIDsRefused() throws {
        var stored = Navigator_V1_StoredSession(SessionState(tree: try ConversionTests.richTree()), seq: 1)
        stored.recentIntentIds = ["a": 1]
        #expect(throws: WireError.self) { try stored.core() }
    }
}
