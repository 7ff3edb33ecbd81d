import Foundation
import NavigatorCore
import Testing

@Suite("Screen tree")
struct TreeTests {
    let start = RouteMap.demo.initialTree()
    let chat42 = Screen(id: 5, chat(42))

    @Test("commands whose effect is there already change nothing")
    func noOps() throws {
        var tree = try start.applying([.selectTab("chats"), .push(chat42, onto: .tab("chats"))])
        let version = tree.version
        for command: Command in [
            .selectTab("chats"), .push(chat42, onto: .tab("chats")), .popTo(5), .popToRoot(.tab("home")),
            .dismissTo(nil), .refresh(5, info: ["conversationId": "42"]),
        ] {
            try tree.apply(command)
        }
        #expect(tree.version == version)
        #expect(tree.top == chat42)
    }

    @Test("a batch is all or nothing, and the error names the failing command")
    func atomic() {
        var tree = start
        #expect {
            try tree.apply([.selectTab("chats"), .push(chat42, onto: .tab("chats")), .popTo(99)])
        } throws: { error in
            guard let error = error as? TreeError else { return false }
            return error.code == .unknownScreen && error.message.hasPrefix("command 3 of 3, popTo(#99): no screen #99")
        }
        #expect(tree == start)
    }

    @Test(
        "every inapplicable command throws a precise error",
        arguments: [
            (Command.selectTab("nope"), TreeError.Code.unknownTab),
            (.push(Screen(id: 9, chat(1)), onto: .tab("nope")), .unknownStack),
            (.push(Screen(id: 9, chat(1)), onto: .modal(50)), .unknownStack),
            (.push(Screen(id: 9, chat(1)), onto: .root), .unknownStack),
            (.push(Screen(id: 0, chat(1)), onto: .tab("home")), .invalidID),
            (.popTo(99), .unknownScreen),
            (.popToRoot(.modal(9)), .unknownStack),
            (.dismissTo(9), .unknownModal),
            (.replace(99, with: Screen(id: 9, chat(1))), .unknownScreen),
            (.refresh(99, info: [:]), .unknownScreen),
            (.present(Modal(id: 9, style: .sheet, stack: [])), .emptyStack),
            (.present(Modal(id: 9, style: .sheet, stack: [Screen(id: 1, chat(1))])), .duplicateID),
            // An id twice in the modal itself: a short stack (pairs compared), a long one (a set),
            // and the modal's own id again.
            (
                .present(Modal(id: 9, style: .sheet, stack: [Screen(id: 10, chat(1)), Screen(id: 10, chat(2))])),
                .duplicateID
            ),
            (
                .present(
                    Modal(
                        id: 9, style: .sheet,
                        stack: (100..<140).map { Screen(id: NodeID(rawValue: $0), chat(Int($0))) } + [
                            Screen(id: 120, chat(0))
                        ])), .duplicateID
            ),
            (.present(Modal(id: 9, style: .sheet, stack: [Screen(id: 9, chat(1))])), .duplicateID),
            (.setRoot(.stack([])), .emptyStack),
            (.setRoot(.tabs(TabBar(tabs: [], selected: "x"))), .invalidTree),
        ])
    func errors(command: Command, code: TreeError.Code) {
        var tree = start
        #expect {
            try tree.apply(command)
        } throws: { ($0 as? TreeError)?.code == code }
        #expect(tree == start)
    }

    @Test("a modal of many screens, every id its own, is presented")
    func longModal() throws {
        var tree = start
        let screens = (100..<140).map { Screen(id: NodeID(rawValue: $0), chat(Int($0))) }
        try tree.apply(.present(Modal(id: 99, style: .sheet, stack: screens)))
        #expect(tree.modals.last?.stack.count == 40)
        #expect(tree.top.id == 139)
    }

    @Test("re-applying a batch changes nothing, not even the version")
    func idempotentBatches() throws {
        let batches: [[Command]] = [
            [.selectTab("chats"), .push(chat42, onto: .tab("chats"))],
            [.popTo(3), .push(Screen(id: 6, chat(43)), onto: .tab("chats"))],
            [.setRoot(.stack([Screen(id: 7, ScreenContext("welcome"))]))],
            [
                .dismissTo(nil),
                .present(Modal(id: 8, style: .fullScreen, stack: [Screen(id: 9, ScreenContext("login"))])),
            ],
        ]
        var tree = start
        for batch in batches {
            try tree.apply(batch)
            let once = tree
            try tree.apply(batch)
            #expect(tree == once, "\(batch)")
        }
    }

    @Test("ids: service ids are never reused, client ids are a separate namespace")
    func ids() throws {
        var tree = try start.applying([.push(Screen(id: 20, chat(1)), onto: .tab("home"))])
        try tree.apply(.popToRoot(.tab("home")))
        #expect(tree.lastServiceID == 20)
        try tree.apply(.push(Screen(id: .client(30), chat(2)), onto: .tab("home")))
        #expect(tree.lastServiceID == 20)
        #expect(NodeID.client(30).isClientAssigned)
        #expect(NodeID.client(30).description == "#c30")
        #expect(!NodeID(rawValue: 30).isClientAssigned)
    }

    @Test("the top is the last modal's top, else the selected tab's")
    func top() throws {
        var tree = start
        #expect(tree.top.context.screen == "home")
        try tree.apply([.selectTab("chats"), .push(chat42, onto: .tab("chats"))])
        #expect(tree.top == chat42)
        try tree.apply(.present(Modal(id: 6, style: .sheet, stack: [Screen(id: 7, ScreenContext("login"))])))
        #expect(tree.top.id == 7)
        #expect(tree.topStack == .modal(6))
    }

    @Test(
        "invalid trees are refused",
        arguments: [
            (
                Root.tabs(TabBar(tabs: [Tab(name: "a", stack: [Screen(id: 1, chat(1))])], selected: "b")),
                TreeError.Code.unknownTab
            ),
            (.tabs(TabBar(tabs: [Tab(name: "a", stack: [])], selected: "a")), .emptyStack),
            (
                .tabs(
                    TabBar(
                        tabs: [
                            Tab(name: "a", stack: [Screen(id: 1, chat(1))]),
                            Tab(name: "a", stack: [Screen(id: 2, chat(1))]),
                        ], selected: "a")), .invalidTree
            ),
            (.stack([Screen(id: 1, chat(1)), Screen(id: 1, chat(2))]), .duplicateID),
            (.stack([Screen(id: 0, chat(1))]), .invalidID),
        ])
    func invalid(root: Root, code: TreeError.Code) {
        #expect { _ = try ScreenTree(root: root) } throws: { ($0 as? TreeError)?.code == code }
    }

    @Test("trees round-trip through JSON, and a decoded tree is validated")
    func codable() throws {
        let tree = try start.applying([
            .selectTab("chats"), .push(chat42, onto: .tab("chats")),
            .present(Modal(id: 6, style: .popover, stack: [Screen(id: .client(1), ScreenContext("x"))])),
        ])
        let data = try JSONEncoder().encode(tree)
        #expect(try JSONDecoder().decode(ScreenTree.self, from: data) == tree)
        let broken = String(decoding: data, as: UTF8.self).replacingOccurrences(
            of: "\"selected\":\"chats\"", with: "\"selected\":\"zzz\"")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ScreenTree.self, from: Data(broken.utf8)) }
    }
}
