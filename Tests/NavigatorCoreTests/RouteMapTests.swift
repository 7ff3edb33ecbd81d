import Foundation
import TestThreads
import Testing

@testable import NavigatorCore

/// A small valid map to break one way at a time.
func baseMap() -> RouteMap {
    RouteMap(
        tabs: [.init(name: "home", root: "home"), .init(name: "chats", root: "chatList")],
        screens: [
            "home": ScreenSpec(),
            "chatList": ScreenSpec(),
            "chat": ScreenSpec(
                homeTab: "chats", parent: "chatList", identity: ["id"], info: ["id": InfoSpec(.int)],
                url: "app://chat/{id}"),
            "login": ScreenSpec(transition: .modal(.fullScreen)),
        ])
}

struct MapDefect: Sendable, CustomTestStringConvertible {
    let name: String
    let path: String
    let message: String
    let breakIt: @Sendable (inout RouteMap) -> Void
    var testDescription: String { name }
}

let mapDefects: [MapDefect] = [
    MapDefect(name: "no tabs and no root", path: "(top level)", message: "neither tabs nor root") { $0.tabs = [] },
    MapDefect(name: "root and tabs", path: "root", message: "together with tabs") { $0.rootScreen = "home" },
    MapDefect(name: "unknown root screen", path: "root", message: "screen nowhere is not declared") {
        $0.tabs = []
        $0.rootScreen = "nowhere"
    },
    MapDefect(name: "duplicate tab", path: "tabs.1.name", message: "tab home is declared twice") {
        $0.tabs[1].name = "home"
    },
    MapDefect(name: "tab root not declared", path: "tabs.0.root", message: "screen start is not declared") {
        $0.tabs[0].root = "start"
    },
    MapDefect(
        name: "tab root needing info", path: "tabs.1.root",
        message: "requires info id; expected a tab root that needs none"
    ) { $0.tabs[1].root = "chat" },
    MapDefect(name: "unknown initial tab", path: "initialTab", message: "tab inbox is not declared") {
        $0.initialTab = "inbox"
    },
    MapDefect(name: "unknown home tab", path: "screens.chat.homeTab", message: "tab inbox is not declared") {
        $0.screens["chat"]!.homeTab = "inbox"
    },
    MapDefect(
        name: "identity key not declared", path: "screens.chat.identity", message: "identity key room is not declared"
    ) {
        $0.screens["chat"]!.identity = ["room"]
    },
    MapDefect(name: "optional identity key", path: "screens.chat.identity", message: "identity key id is optional") {
        $0.screens["chat"]!.info["id"] = .optional(.int)
    },
    MapDefect(name: "empty enum", path: "screens.chat.info.mood", message: "enum has no values") {
        $0.screens["chat"]!.info["mood"] = .optional(.oneOf([]))
    },
    MapDefect(name: "unknown parent", path: "screens.chat.parent", message: "screen inbox is not declared") {
        $0.screens["chat"]!.parent = "inbox"
    },
    MapDefect(
        name: "parent needs info the child lacks", path: "screens.thread.parent",
        message: "parent chat requires info id"
    ) {
        $0.screens["thread"] = ScreenSpec(
            homeTab: "chats", parent: "chat", identity: ["t"], info: ["t": InfoSpec(.int)])
    },
    MapDefect(name: "parent cycle", path: "screens.a.parent", message: "parent chain loops back") {
        $0.screens["a"] = ScreenSpec(parent: "b")
        $0.screens["b"] = ScreenSpec(parent: "a")
    },
    MapDefect(
        name: "guard redirect unknown", path: "screens.chat.guard.redirect", message: "screen signin is not declared"
    ) {
        $0.screens["chat"]!.guardCondition = .init(condition: "authenticated", redirect: "signin")
    },
    MapDefect(
        name: "guard redirect needing info", path: "screens.home.guard.redirect",
        message: "redirect screen chat requires info"
    ) {
        $0.screens["home"]!.guardCondition = .init(condition: "authenticated", redirect: "chat")
    },
    MapDefect(
        name: "guard redirect with its own guard", path: "screens.chat.guard.redirect", message: "has a guard itself"
    ) {
        $0.screens["login"]!.guardCondition = .init(condition: "x", redirect: "home")
        $0.screens["chat"]!.guardCondition = .init(condition: "authenticated", redirect: "login")
    },
    MapDefect(name: "empty guard condition", path: "screens.chat.guard.condition", message: "condition is empty") {
        $0.screens["chat"]!.guardCondition = .init(condition: "", redirect: "login")
    },
    MapDefect(name: "url without scheme", path: "screens.chat.url", message: "has no scheme") {
        $0.screens["chat"]!.url = "chat/{id}"
    },
    MapDefect(name: "url capturing an undeclared key", path: "screens.chat.url", message: "captures {room}") {
        $0.screens["chat"]!.url = "app://chat/{room}"
    },
    MapDefect(name: "url with a query", path: "screens.chat.url", message: "has a query") {
        $0.screens["chat"]!.url = "app://chat/{id}?x=1"
    },
    MapDefect(name: "url with a broken segment", path: "screens.chat.url", message: "has segment c{id}") {
        $0.screens["chat"]!.url = "app://chat/c{id}"
    },
    MapDefect(
        name: "two urls matching the same links", path: "screens.login.url",
        message: "matches the same links as the url of chat"
    ) {
        $0.screens["login"]!.url = "app://chat/{x}"
        $0.screens["login"]!.info = ["x": InfoSpec(.string)]
    },
    MapDefect(name: "screen name with a slash", path: "screens.a/b", message: "without \"/\"") {
        $0.screens["a/b"] = ScreenSpec()
    },
]

@Suite("Route map")
struct RouteMapTests {
    @Test("a map made to fail everywhere: at most 1,000 problems, names listed 20 at most and cut to 64 bytes")
    func problemsBounded() {
        let long = String(repeating: "n", count: 100)
        let tabs = (0..<30).map { RouteMap.TabSpec(name: "\(long)\($0)", root: "r") }
        var screens: [String: ScreenSpec] = ["r": ScreenSpec()]
        for index in 0..<1_200 { screens["s\(index)"] = ScreenSpec(homeTab: "nope") }
        let errors = RouteMap(tabs: tabs, screens: screens).validate()
        #expect(errors.count == RouteMap.maxProblems + 1)
        #expect(errors.last?.message == "and 200 more problems")
        let homeTab = errors.first { $0.message.hasPrefix("tab nope is not declared") }
        #expect(homeTab?.message.contains("… (30 in all)") == true, "\(String(describing: homeTab))")
        #expect(homeTab?.message.contains(String(repeating: "n", count: 61) + "…") == true)
        #expect((homeTab?.message.utf8.count ?? .max) < 20 * 70 + 200)
    }

    @Test("the demo map is valid and uses every feature")
    func demo() throws {
        #expect(RouteMap.demo.validate() == [])
        let specs = Array(RouteMap.demo.screens.values)
        #expect(specs.contains { $0.parent != nil })
        #expect(specs.contains { $0.uniqueInStack })
        #expect(specs.contains { $0.blocking })
        #expect(specs.contains { $0.guardCondition != nil })
        #expect(specs.contains { $0.transition == .setRoot })
        #expect(specs.contains { $0.transition == .replace })
        for style in PresentationStyle.allCases {
            #expect(specs.contains { $0.transition == .modal(style) }, "\(style)")
        }
        let types = specs.flatMap { $0.info.values.map(\.type) }
        #expect(types.contains(.int) && types.contains(.uuid) && types.contains(.string) && types.contains(.bool))
        #expect(types.contains { if case .oneOf = $0 { true } else { false } })
        #expect(specs.contains { $0.info.values.contains { !$0.required } })
        #expect(specs.contains { $0.url?.contains("}/thread/{") == true })
    }

    @Test("the base map for the defect tests is valid")
    func base() { #expect(baseMap().validate() == []) }

    @Test("each defect is reported at its key with its reason", arguments: mapDefects)
    func defect(_ defect: MapDefect) {
        var map = baseMap()
        defect.breakIt(&map)
        let errors = map.validate()
        #expect(
            errors.contains { $0.keyPath == defect.path && $0.message.contains(defect.message) },
            "got: \(errors.map(\.description))")
        #expect(throws: RouteMapErrors.self) { try Resolver(map: map) }
    }

    @Test("all problems are reported at once")
    func allAtOnce() {
        var map = baseMap()
        map.initialTab = "inbox"
        map.screens["chat"]!.homeTab = "nowhere"
        map.screens["chat"]!.parent = "nobody"
        #expect(map.validate().count == 3)
        #expect(RouteMapErrors(map.validate()).description.hasPrefix("route map has 3 problems:"))
    }

    @Test("the demo map round-trips through JSON")
    func roundTrip() throws {
        let data = try JSONEncoder().encode(RouteMap.demo)
        #expect(try JSONDecoder().decode(RouteMap.self, from: data) == RouteMap.demo)
    }

    @Test(
        "decoding refuses unknown keys and values, naming them",
        arguments: [
            (#"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"homeTap":"a"}}}"#, "unknown key homeTap in a screen"),
            (
                #"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"transition":"slide"}}}"#,
                "transition slide is unknown"
            ),
            (
                #"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"transition":"modal","style":"card"}}}"#,
                "style card is unknown"
            ),
            (
                #"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"style":"sheet"}}}"#,
                "expected it only with transition: modal"
            ),
            (
                #"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"info":{"x":"float"}}}}"#,
                "info type float is unknown"
            ),
            (
                #"{"tabs":[{"name":"a","root":"a"}],"screens":{"a":{"info":{"x":{"type":"int","enum":["1"]}}}}}"#,
                "either type or enum"
            ),
            (#"{"tabs":[{"name":"a","root":"a","icon":"x"}],"screens":{"a":{}}}"#, "unknown key icon in a tab"),
            (#"{"tab":[],"screens":{}}"#, "unknown key tab in the route map"),
        ])
    func decodingErrors(json: String, message: String) {
        #expect {
            _ = try JSONDecoder().decode(RouteMap.self, from: Data(json.utf8))
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.debugDescription.contains(message)
        }
    }

    @Test(
        "info types check and canonicalize values",
        arguments: [
            (InfoType.int, "42", "42"), (.int, "+042", "42"), (.int, "-7", "-7"), (.int, "4.2", nil), (.int, "", nil),
            (.int, "99999999999999999999", nil), (.bool, "YES", "true"), (.bool, "0", "false"), (.bool, "maybe", nil),
            (.uuid, "ABCDEF00-0000-4000-8000-000000000001", "abcdef00-0000-4000-8000-000000000001"),
            (.uuid, "abcdef00-0000-4000-8000-00000000000", nil), (.uuid, "abcdef00x0000-4000-8000-000000000001", nil),
            (.uuid, "abcdef00-0000-4000-8000-000000000001", "abcdef00-0000-4000-8000-000000000001"),
            (.uuid, "Abcdef00-0000-4000-8000-00000000000G", nil), (.uuid, "abcdef00-0000-4000-8000-0000000000é", nil),
            (.uuid, "abcdef00-0000-4000-8000-00000000000-", nil),
            (.oneOf(["EUR", "USD"]), "USD", "USD"), (.oneOf(["EUR", "USD"]), "usd", nil), (.string, "", ""),
        ] as [(InfoType, String, String?)])
    func infoTypes(type: InfoType, value: String, expected: String?) {
        #expect(type.normalize(value) == expected)
    }

    @Test("an int's canonical spelling is the number read and written again, at every length and with any bytes")
    func intSpellings() async throws {
        try await offPool {
            func reference(_ value: String) -> String? {
                Int64(value.hasPrefix("+") ? String(value.dropFirst()) : value).map { String($0) }
            }
            var random = SplitMix64(seed: 17)
            let pieces = ["0", "0", "1", "5", "9", "9", "-", "+", " ", "a", "٣", "00", "123456789"]
            var canonical = 0
            for round in 0..<6000 {
                var value = ""
                let count = round < 3000 ? Int(random.next() % 8) : Int(random.next() % 4)
                for _ in 0..<count { value += pieces[Int(random.next() % UInt64(pieces.count))] }
                if round % 3 == 0 { value = String(repeating: "9", count: Int(random.next() % 22)) }
                let expected = reference(value)
                #expect(InfoType.int.normalize(value) == expected, "\(value)")
                if expected == value { canonical += 1 }
            }
            #expect(canonical > 1000)
            for edge in [
                "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-0", "0", "999999999999999999",
            ] {
                #expect(InfoType.int.normalize(edge) == reference(edge), "\(edge)")
            }
        }
    }

    @Test("URL patterns capture, percent-decode and read query parameters")
    func urlPatterns() throws {
        let pattern = try URLPattern("app://chat/{conversationId}/thread/{threadId}")
        #expect(pattern.match("app://chat/42/thread/7") == ["conversationId": "42", "threadId": "7"])
        #expect(pattern.match("APP://chat/42/thread/7") == ["conversationId": "42", "threadId": "7"])
        #expect(
            pattern.match("app://chat/a%2Fb/thread/7?x=1&y") == [
                "conversationId": "a/b", "threadId": "7", "x": "1", "y": "",
            ])
        #expect(pattern.match("app://chat/42") == nil)
        #expect(pattern.match("app://chat/42/thread/7/more") == nil)
        #expect(pattern.match("app://chats/42/thread/7") == nil)
        #expect(pattern.match("app://chat/%ZZ/thread/7") == nil)
        #expect(pattern.match("other://chat/42/thread/7") == nil)
    }

    @Test("a URL is read as splitting its query and decoding its escapes by characters read it, whatever its bytes")
    func queries() async throws {
        try await offPool {
            let pattern = try URLPattern("app://chat/{conversationId}")
            // The reading before the query was scanned and escapes were looked for by bytes: arrays
            // from `split`, and `contains("%")` (a `%` with a combining mark is not one).
            func decoding(_ text: Substring) -> String? {
                guard text.contains("%") else { return String(text) }
                var bytes: [UInt8] = []
                var iterator = text.utf8.makeIterator()
                func hex(_ byte: UInt8) -> UInt8? {
                    switch byte {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
                    default: nil
                    }
                }
                while let byte = iterator.next() {
                    if byte == UInt8(ascii: "%") {
                        guard let high = iterator.next().flatMap(hex), let low = iterator.next().flatMap(hex) else {
                            return nil
                        }
                        bytes.append(high << 4 | low)
                    } else {
                        bytes.append(byte)
                    }
                }
                return String(validating: bytes, as: UTF8.self)
            }
            // The old `match` after the URL is taken apart (`Parsed`, unchanged).
            func reading(_ url: String) -> [String: String]? {
                guard let parsed = URLPattern.Parsed(url), parsed.scheme == "app", parsed.segments.count == 2,
                    parsed.segments.first == "chat", let value = decoding(parsed.segments[1])
                else { return nil }
                var info = ["conversationId": value]
                for pair in parsed.query?.split(separator: "&") ?? [] {
                    let keyValue = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    guard let key = decoding(keyValue[0]), !key.isEmpty else { return nil }
                    if info[key] == nil { info[key] = keyValue.count == 2 ? decoding(keyValue[1]) : "" }
                }
                return info
            }
            var random = SplitMix64(seed: 31)
            let pieces = [
                "&", "&", "=", "=", "a", "b", "conversationId", "%41", "%4", "%ZZ", "%C3%A9", "%FF", "é", "+", "?",
                "\u{301}", "%\u{301}41",
            ]
            var matched = 0
            var combining = 0
            for _ in 0..<6000 {
                var capture = "c"
                var query = ""
                for _ in 0..<Int(random.next() % 3) { capture += pieces[7 + Int(random.next() % 10)] }
                for _ in 0..<Int(random.next() % 9) { query += pieces[Int(random.next() % UInt64(pieces.count))] }
                let url = "app://chat/\(capture)?" + query
                let expected = reading(url)
                #expect(pattern.match(url) == expected, "\(url)")
                if expected != nil { matched += 1 }
                if (capture + query).contains("\u{301}") { combining += 1 }
            }
            #expect(matched > 1000 && matched < 6000 && combining > 500)
        }
    }
}
