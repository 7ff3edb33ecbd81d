import NavigatorCore
import Testing

/// The demo map with the three changes of the route-map docs' example: a guard added to
/// `thread`, `mediaViewer` removed, the chat's URL pattern changed.
func demoCandidate() -> RouteMap {
    var map = RouteMap.demo
    map.screens["thread"]!.guardCondition = .init(condition: "verified", redirect: "login")
    map.screens["mediaViewer"] = nil
    map.screens["chat"]!.url = "app://c/{conversationId}"
    return map
}

@Suite("Route map diff")
struct RouteMapDiffTests {
    @Test("a map against itself: no changes")
    func same() {
        let diff = RouteMapDiff(from: .demo, to: .demo)
        #expect(diff.isEmpty)
        #expect(diff.description == "no changes")
    }

    @Test("a guard added, a screen removed, a URL pattern changed: each listed once, in order")
    func docsExample() {
        let diff = RouteMapDiff(from: .demo, to: demoCandidate())
        #expect(
            diff.changes.map(\.description) == [
                "~ url chat: app://chat/{conversationId} -> app://c/{conversationId}",
                "- screen mediaViewer (was: modal (overCurrent); info mediaId (string, required))",
                "- url mediaViewer (was: app://media/{mediaId})",
                "+ guard thread: verified, else login",
            ])
        #expect(diff.summary == "4 changes: 1 added, 2 removed, 1 changed")
        // Backwards, the same four the other way round.
        let back = RouteMapDiff(from: demoCandidate(), to: .demo)
        #expect(back.changes.map(\.kind) == [.changed, .added, .added, .removed])
        #expect(back.changes.map(\.subject) == [.url, .screen, .url, .guard])
    }

    @Test("tabs, info keys, flags and every field of a screen")
    func everyKind() {
        var new = baseMap()
        new.tabs = [
            .init(name: "chats", root: "chatList"), .init(name: "home", root: "home2"),
            .init(name: "more", root: "home"),
        ]
        new.initialTab = "chats"
        new.screens["home2"] = ScreenSpec(blocking: true, url: "app://home2")
        new.screens["chat"]!.info["id"] = InfoSpec(.string)
        new.screens["chat"]!.info["draft"] = InfoSpec(.string, required: false)
        new.screens["chat"]!.uniqueInStack = true
        new.screens["chat"]!.parent = nil
        new.screens["login"]!.transition = .modal(.sheet)
        new.screens["chatList"]!.guardCondition = .init(condition: "authenticated", redirect: "login")
        let diff = RouteMapDiff(from: baseMap(), to: new)
        #expect(
            diff.changes.map(\.description) == [
                "~ tab home: root home -> root home2",
                "+ tab more: root home",
                "~ tab order: home, chats -> chats, home",
                "~ initial tab: home -> chats",
                "- parent chat (was: chatList)",
                "+ info key chat.draft: string, optional",
                "~ info key chat.id: int, required -> string, required",
                "+ unique in stack chat",
                "+ guard chatList: authenticated, else login",
                "+ screen home2: push",
                "+ blocking home2",
                "+ url home2: app://home2",
                "~ transition login: modal (fullScreen) -> modal (sheet)",
            ])
    }

    @Test("tabs against a single stack")
    func rootKind() {
        var single = baseMap()
        single.tabs = []
        single.rootScreen = "home"
        #expect(
            RouteMapDiff(from: baseMap(), to: single).changes.map(\.description) == [
                "~ root: tabs home, chats -> single stack of home", "- tab home (was: root home)",
                "- tab chats (was: root chatList)",
            ])
    }
}
