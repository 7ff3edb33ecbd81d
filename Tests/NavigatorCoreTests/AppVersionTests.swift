import NavigatorCore
import Testing

/// The demo map with screens of later app versions: `thread` since 2.3 (its parent instead),
/// `mediaViewer` since 3.0 (a web page instead), `reactions` since 2.5 (another screen, the chat),
/// `payment` since 2.0 with no fallback.
func versionedMap() -> RouteMap {
    var map = RouteMap.demo
    map.screens["web"] = ScreenSpec(transition: .modal(.sheet), info: ["url": InfoSpec(.string)])
    map.screens["thread"]!.since = AppVersion("2.3")
    map.screens["thread"]!.fallback = .parent
    map.screens["mediaViewer"]!.since = AppVersion("3.0")
    map.screens["mediaViewer"]!.fallback = .webView(screen: "web", url: "https://m.example.com/media/{mediaId}")
    map.screens["reactions"]!.since = AppVersion("2.5")
    map.screens["reactions"]!.fallback = .screen("chat")
    map.screens["payment"]!.since = AppVersion("2.0")
    return map
}

@Suite("App versions")
struct AppVersionTests {
    @Test("compared number by number: 1.10 after 1.9, 1.2 equal to 1.2.0")
    func comparison() throws {
        func v(_ text: String) throws -> AppVersion { try #require(AppVersion(text)) }
        #expect(try v("1.10") > v("1.9"))
        #expect(try v("1.2") == v("1.2.0"))
        #expect(try v("2") < v("2.0.1"))
        #expect(try v("10.0") > v("9.99.99"))
        #expect(try v("1.2.3.4") < v("1.2.3.5"))
        for bad in ["", "1.", ".1", "v1.2", "1.2-beta", "1.2.3.4.5", "1..2", "1234567890", " 1"] {
            #expect(AppVersion(bad) == nil, "\(bad)")
            #expect(AppVersion.problem(with: bad)?.contains("expected 1 to 4 numbers separated by dots") == true)
        }
    }

    static func session(_ version: String?) -> Harness {
        var session = Harness(map: versionedMap())
        _ = session.event(.conditions(["authenticated": true]))
        _ = session.event(.ready(appVersion: version.flatMap(AppVersion.init)))
        return session
    }

    @Test(
        "an old shell gets the fallback, with the reason in the explanation; a new one and one that did not say get the screen"
    )
    func fallbacks() throws {
        let thread = ScreenContext("thread", ["conversationId": "7", "threadId": "3"])
        var old = Self.session("2.1")
        let resolution = old.show(thread)
        guard case .resolved(let commands) = resolution.outcome else {
            Issue.record("\(resolution.outcome)")
            return
        }
        #expect(old.state.tree.top.context == ScreenContext("chat", ["conversationId": "7"]))
        #expect(
            !commands.contains {
                if case .push(let screen, _) = $0 { screen.context.screen == "thread" } else { false }
            })
        let reason =
            "thread needs app version 2.3 or later and the session's shell runs 2.1: its fallback chat(conversationId=7) is shown instead"
        #expect(resolution.fallback == reason)
        #expect(resolution.explanation.contains { $0.step == .validate && $0.detail == reason })

        for version in ["2.3", "2.10", nil] {
            var new = Self.session(version)
            new.show(thread)
            #expect(new.state.tree.top.context == thread, "\(version ?? "no version")")
            #expect(new.state.appVersion == version.flatMap(AppVersion.init))
        }

        // A web page instead: the URL made from the target's info, percent-encoded.
        old.show(ScreenContext("mediaViewer", ["mediaId": "a b/c"]))
        #expect(old.state.tree.top.context == ScreenContext("web", ["url": "https://m.example.com/media/a%20b%2Fc"]))
        // Another screen instead, with the info it declares.
        var other = Self.session("2.4")
        other.show(ScreenContext("reactions", ["conversationId": "9"]))
        #expect(other.state.tree.top.context == ScreenContext("chat", ["conversationId": "9"]))
    }

    @Test("no fallback: refused app_too_old naming both versions, the session unchanged")
    func tooOld() {
        var old = Self.session("1.9")
        let before = old.state
        let resolution = old.show(
            ScreenContext("payment", ["conversationId": "1", "amount": "5", "currency": "EUR"]))
        #expect(resolution.rejection?.code == .appTooOld)
        #expect(
            resolution.rejection?.message.hasPrefix(
                "payment needs app version 2.0 or later, and the session's shell runs 1.9") == true)
        #expect(old.state == before)
        // A later ready with a newer version: shown.
        _ = old.event(.ready(appVersion: AppVersion("2.0.0")))
        #expect(
            old.show(ScreenContext("payment", ["conversationId": "1", "amount": "5", "currency": "EUR"])).rejection
                == nil)
    }

    @Test("route map checks: since and fallback")
    func validation() {
        func problems(_ change: (inout RouteMap) -> Void) -> [String] {
            var map = versionedMap()
            change(&map)
            return map.validate().map(\.description)
        }
        #expect(problems { _ in } == [])
        #expect(
            problems { $0.screens["settings"]!.fallback = .parent }.contains {
                $0.contains("fallback is given without since")
            })
        #expect(
            problems { $0.screens["mediaViewer"]!.fallback = .parent }.contains {
                $0.contains("fallback is parent, but mediaViewer has no parent")
            })
        #expect(
            problems { $0.screens["thread"]!.fallback = .screen("nowhere") }.contains {
                $0.contains("screen nowhere is not declared")
            })
        #expect(
            problems {
                $0.screens["chat"]!.since = AppVersion("1.0")
                $0.screens["chat"]!.fallback = .screen("thread")
            }.contains {
                $0.contains("fallback thread requires info threadId, which chat does not require")
            })
        #expect(
            problems {
                $0.screens["mediaViewer"]!.fallback = .webView(screen: "web", url: "https://x/{nope}")
            }.contains { $0.contains("the url's {nope} is not required info of mediaViewer") })
        #expect(
            problems { $0.screens["mediaViewer"]!.fallback = .webView(screen: "chatList", url: "https://x") }.contains {
                $0.contains("screen chatList does not declare info url")
            })
        #expect(
            problems {
                $0.screens["chat"]!.since = AppVersion("1.0")
                $0.screens["chat"]!.fallback = .screen("reactions")
                $0.screens["reactions"]!.fallback = .screen("chat")
            }.contains { $0.contains("fallbacks loop back to") })
    }
}
