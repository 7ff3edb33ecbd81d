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

@Suite("Route impact")
struct RouteImpactTests {
    /// Signed-in sessions, each intent resolved for real first (as the recorder saw it).
    static func recorded(_ intents: [Intent]) throws -> [RecordedIntent] {
        let resolver = try Resolver(map: .demo)
        var states: [String: SessionState] = [:]
        var now: Int64 = 1_700_000_000_000_000_000
        return intents.map { intent in
            var state =
                states[intent.session]
                ?? {
                    var state = resolver.initialState()
                    _ = resolver.apply(.conditions(["authenticated": true]), to: &state, now: 0)
                    return state
                }()
            now += 1_000_000
            let entry = RecordedIntent(intent: intent, before: state, at: now)
            _ = resolver.resolve(intent, into: &state, now: now)
            states[intent.session] = state
            return entry
        }
    }

    static func intent(_ id: String, _ session: String, _ target: Intent.Target) -> Intent {
        Intent(id: id, session: session, target: target)
    }

    @Test("a guard added, a screen removed, a URL pattern changed: exact counts by route, an example each")
    func docsExample() throws {
        var intents: [Intent] = []
        for n in 1...5 {
            intents.append(
                Self.intent(
                    "t\(n)", "u\(n)", .path([ScreenContext("thread", ["conversationId": "\(n)", "threadId": "7"])])))
        }
        for n in 1...3 {
            intents.append(Self.intent("m\(n)", "u\(n)", .path([ScreenContext("mediaViewer", ["mediaId": "x\(n)"])])))
        }
        for n in 1...4 { intents.append(Self.intent("c\(n)", "v\(n)", .url("app://chat/4\(n)"))) }
        for n in 1...6 { intents.append(Self.intent("s\(n)", "w\(n)", .path([ScreenContext("settings")]))) }
        intents.append(Self.intent("bad", "w1", .path([ScreenContext("nowhere")])))
        let recorded = try Self.recorded(intents)
        let impact = RouteImpact(
            replaying: recorded, current: try Resolver(map: .demo), candidate: try Resolver(map: demoCandidate()))
        #expect(impact.intents == 19 && impact.changed == 12)
        #expect(impact.routes.map(\.route) == ["thread", "chat", "mediaViewer", "nowhere", "settings"])
        let byRoute = Dictionary(uniqueKeysWithValues: impact.routes.map { ($0.route, $0) })
        #expect(byRoute["thread"]?.changes.map(\.change) == [.parkedDifferently])
        #expect(byRoute["thread"]?.changes.first?.count == 5)
        #expect(byRoute["thread"]?.changes.first?.example.intentID == "t1")
        #expect(
            byRoute["thread"]?.changes.first?.example.after.hasPrefix("parked: guard: thread needs verified") == true)
        #expect(byRoute["chat"]?.changes.map(\.change) == [.nowRejected(.unknownURL)])
        #expect(byRoute["chat"]?.changes.first?.count == 4)
        #expect(byRoute["mediaViewer"]?.changes.map(\.change) == [.nowRejected(.unknownScreen)])
        #expect(byRoute["mediaViewer"]?.changes.first?.count == 3)
        #expect(byRoute["settings"]?.same == 6 && byRoute["settings"]?.changes.isEmpty == true)
        #expect(byRoute["nowhere"]?.same == 1, "rejected both ways, with the same code")
        #expect(impact.summary == "12 of 19 recorded intents would change, on 3 of 5 routes")

        // The map against itself: nothing changes.
        let none = RouteImpact(
            replaying: recorded, current: try Resolver(map: .demo), candidate: try Resolver(map: .demo))
        #expect(none.changed == 0 && none.routes.allSatisfy { $0.changes.isEmpty })
    }

    @Test(
        "a screen moved to another tab lands elsewhere; a screen added accepts what was refused; ignored both ways is the same"
    )
    func kinds() throws {
        // chat moves to the profile tab (without its parent); a screen `nowhere` appears.
        var candidate = RouteMap.demo
        candidate.screens["chat"]!.homeTab = "profile"
        candidate.screens["chat"]!.parent = nil
        candidate.screens["nowhere"] = ScreenSpec()
        let recorded = try Self.recorded([
            Self.intent("a", "s1", .path([ScreenContext("chat", ["conversationId": "1"])])),
            Self.intent("b", "s2", .path([ScreenContext("nowhere")])),
            Self.intent("c", "s3", .path([ScreenContext("home")])),
        ])
        let impact = RouteImpact(
            replaying: recorded, current: try Resolver(map: .demo), candidate: try Resolver(map: candidate))
        let changes = Dictionary(uniqueKeysWithValues: impact.routes.map { ($0.route, $0.changes.map(\.change)) })
        #expect(changes["chat"] == [.otherCommands])
        #expect(changes["nowhere"] == [.nowAccepted])
        #expect(changes["home"] == [])
    }

    @Test("a screen made newer than some shells: their sessions' intents would get the fallback, the others' not")
    func versions() throws {
        let resolver = try Resolver(map: .demo)
        var old = resolver.initialState()
        _ = resolver.apply(.ready(appVersion: AppVersion("2.1")), to: &old, now: 0)
        var new = resolver.initialState()
        _ = resolver.apply(.ready(appVersion: AppVersion("2.4")), to: &new, now: 0)
        let thread = ScreenContext("thread", ["conversationId": "1", "threadId": "2"])
        let recorded = [
            RecordedIntent(intent: .show(thread, id: "a", session: "old"), before: old, at: 1),
            RecordedIntent(intent: .show(thread, id: "b", session: "new"), before: new, at: 2),
        ]
        var candidate = RouteMap.demo
        candidate.screens["thread"]!.since = AppVersion("2.3")
        candidate.screens["thread"]!.fallback = .parent
        let impact = RouteImpact(
            replaying: recorded, current: resolver, candidate: try Resolver(map: candidate))
        let route = try #require(impact.routes.first)
        #expect(impact.routes.count == 1 && route.route == "thread" && route.same == 1)
        #expect(route.changes.map(\.change) == [.otherCommands] && route.changes[0].example.session == "old")
        #expect(route.changes[0].example.after.contains("pushing chat(conversationId=1)"))
    }

    @Test("the same outcome, but a parked intent it releases ends otherwise: released differently")
    func releases() throws {
        let resolver = try Resolver(map: .demo)
        var state = resolver.initialState()
        let parked = resolver.resolve(.show(ScreenContext("editProfile"), id: "e", session: "s"), into: &state, now: 1)
        guard case .parked = parked.outcome else {
            Issue.record("\(parked.outcome)")
            return
        }
        var login = Intent.show(ScreenContext("settings"), id: "l", session: "s")
        login.setConditions = ["authenticated": true]
        let recorded = [RecordedIntent(intent: login, before: state, at: 2)]
        var candidate = RouteMap.demo
        candidate.screens["editProfile"] = nil
        let impact = RouteImpact(replaying: recorded, current: resolver, candidate: try Resolver(map: candidate))
        #expect(impact.routes.first?.changes.map(\.change) == [.releasedDifferently], "\(impact)")
    }
}

@Suite("Route map versions and rollout buckets")
struct RouteMapVersionTests {
    @Test("a version is 12 hex digits of the text; buckets are stable, spread, salted, and not the workers' shards")
    func buckets() {
        #expect(RouteMapVersion.of(text: "tabs: []") == RouteMapVersion.of(text: "tabs: []"))
        #expect(RouteMapVersion.of(text: "tabs: []") != RouteMapVersion.of(text: "tabs: [ ]"))
        #expect(RouteMapVersion.of(text: "x").count == 12)
        // Pinned (worked out apart from this code, in Python): instances of two builds in one
        // deployment must put each session in the same bucket, so a changed hash is a failure.
        #expect(RouteMapVersion.of(text: "tabs: []") == "97ea69eba77c")
        #expect(RouteMapVersion.bucket(of: "s1", salt: "v1") == 6436)
        #expect(RouteMapVersion.bucket(of: "alice", salt: "v1") == 1332)
        let sessions = (0..<10_000).map { "s\($0)" }
        let chosen = sessions.filter { RouteMapVersion.bucket(of: $0, salt: "v1") < 1_000 }
        // 10% within 100 either way (3.3 standard deviations).
        #expect(abs(chosen.count - 1_000) <= 100, "\(chosen.count)")
        // Another candidate chooses other sessions (about 10% of these).
        let again = Set(sessions.filter { RouteMapVersion.bucket(of: $0, salt: "v2") < 1_000 })
        #expect(Set(chosen).intersection(again).count < 200)
        // Spread over two workers' shards alike (FNV-1a modulo 2 is what shards them).
        let shard0 = chosen.filter { StableHash.bucket(of: $0, count: 2) == 0 }.count
        #expect(abs(shard0 - chosen.count / 2) <= 100, "\(shard0) of \(chosen.count)")
    }
}
