import Foundation
import NavigatorCore
import NavigatorYAML
import Testing

@Suite("Route maps in YAML")
struct RouteMapYAMLTests {
    static let exampleFile = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/routes.example.yaml").path

    @Test("the documented example file is exactly the built-in demo map")
    func exampleIsDemo() throws {
        #expect(try RouteMapYAML.load(contentsOfFile: Self.exampleFile) == RouteMap.demo)
    }

    @Test("the demo map round-trips through YAML")
    func roundTrip() throws {
        let yaml = RouteMapYAML.encode(.demo)
        #expect(yaml.contains("incomingCall:"))
        #expect(try RouteMapYAML.load(yaml) == RouteMap.demo)
        #expect(RouteMapYAML.encode(try RouteMapYAML.load(yaml)) == yaml)
    }

    @Test("JSON reads too")
    func json() throws {
        let data = try JSONEncoder().encode(RouteMap.demo)
        #expect(try RouteMapYAML.load(String(decoding: data, as: UTF8.self)) == RouteMap.demo)
    }

    struct Broken: Sendable, CustomTestStringConvertible {
        let name: String
        let yaml: String
        let expected: [String]
        var testDescription: String { name }
    }

    static let broken: [Broken] = [
        Broken(
            name: "syntax error", yaml: "tabs:\n  - name: home\n    root: [home\n",
            expected: ["routes.yaml:4:1: YAML syntax"]),
        Broken(name: "empty document", yaml: "", expected: ["routes.yaml: the document is empty"]),
        Broken(
            name: "unknown key on its line",
            yaml: "tabs:\n  - name: home\n    root: home\nscreens:\n  home:\n    homeTap: home\n",
            expected: ["routes.yaml:6:5: screens.home.homeTap: unknown key homeTap in a screen; expected one of"]),
        Broken(
            name: "unknown transition",
            yaml: "tabs:\n  - {name: home, root: home}\nscreens:\n  home:\n    transition: slide\n",
            expected: ["routes.yaml:5:5: screens.home.transition: transition slide is unknown"]),
        Broken(
            name: "missing key", yaml: "tabs:\n  - name: home\nscreens:\n  home: {}\n",
            expected: ["routes.yaml:2:5: tabs.0: missing key root"]),
        Broken(
            name: "wrong type",
            yaml: "tabs:\n  - {name: home, root: home}\nscreens:\n  home:\n    blocking: sometimes\n",
            expected: ["routes.yaml:5:5: screens.home.blocking: expected true or false"]),
        Broken(
            name: "every value problem at once, each on its line",
            yaml: """
                tabs:
                  - {name: home, root: home}
                  - {name: chats}
                screens:
                  home:
                    blocking: sometimes
                  chat:
                    transition: slide

                """,
            expected: [
                "routes.yaml:3:5: tabs.1: missing key root",
                "routes.yaml:6:5: screens.home.blocking: expected true or false",
                "routes.yaml:8:5: screens.chat.transition: transition slide is unknown",
            ]),
        Broken(
            name: "value and validation problems at once",
            yaml: """
                tabs:
                  - name: a
                    root: x
                screens:
                  y: {transition: bogus}
                  z: {homeTab: nope}

                """,
            expected: [
                "routes.yaml:3:5: tabs.0.root: screen x is not declared under screens",
                "routes.yaml:5:7: screens.y.transition: transition bogus is unknown",
                "routes.yaml:6:7: screens.z.homeTab: tab nope is not declared",
            ]),
        Broken(
            name: "every validation problem, each on its line",
            yaml: """
                tabs:
                  - name: home
                    root: home
                initialTab: inbox
                screens:
                  home: {}
                  chat:
                    homeTab: chats
                    parent: nobody

                """,
            expected: [
                "routes.yaml:4:1: initialTab: tab inbox is not declared; expected one of home",
                "routes.yaml:8:5: screens.chat.homeTab: tab chats is not declared",
                "routes.yaml:9:5: screens.chat.parent: screen nobody is not declared; expected one of chat, home",
            ]),
    ]

    @Test("problems come with file, line, column, key and reason", arguments: broken)
    func errors(_ broken: Broken) {
        do {
            _ = try RouteMapYAML.load(broken.yaml, source: "routes.yaml")
            Issue.record("loaded a broken map")
        } catch {
            let lines = error.description.split(separator: "\n").map(String.init)
            #expect(lines.count == broken.expected.count, "\(error.description)")
            for (line, expected) in zip(lines, broken.expected) {
                #expect(line.hasPrefix(expected), "\(line)")
            }
        }
    }

    @Test("a missing file is reported with its path and the system's reason")
    func missingFile() {
        #expect {
            _ = try RouteMapYAML.load(contentsOfFile: "/nonexistent/routes.yaml")
        } throws: { error in
            "\(error)".contains(
                "/nonexistent/routes.yaml: cannot open it: No such file or directory")
        }
    }

    @Test(
        "a candidate's nodes are counted before it is decoded, and it may not use anchors or aliases: an alias bomb is refused at once"
    )
    func nodeLimit() throws {
        // 300 screens, each an alias of one screen with 300 info keys: 90,000 keys once expanded.
        var text = "root: s0\nscreens:\n  s0: &S\n    info:\n"
        for key in 0..<300 { text += "      k\(key): { type: string, required: false }\n" }
        let written = text.replacingOccurrences(of: "s0: &S", with: "s0:")
        for screen in 1...300 { text += "  s\(screen): *S\n" }
        let clock = ContinuousClock()
        let started = clock.now
        #expect {
            try RouteMapYAML.load(text, source: "bomb.yaml", maxNodes: 50_000)
        } throws: {
            "\($0)".hasPrefix("bomb.yaml:3:7: a YAML anchor (&name) is not taken in a route map sent to navigatord")
        }
        // Not a timing assertion: the refusal is printed with what it took, for the record.
        print("alias bomb refused in \(clock.now - started)")
        // An alias as a mapping key: the parser hashed its expansion (10^12 nodes), for ever.
        var laughs = "l0: [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...11 {
            laughs += "l\(level): [" + Array(repeating: "*l\(level - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        laughs = laughs.replacingOccurrences(of: "l0: [", with: "l0: &l0 [")
        for level in 1...11 {
            laughs = laughs.replacingOccurrences(of: "l\(level): [", with: "l\(level): &l\(level) [")
        }
        laughs += "? *l11\n: 1\n"
        #expect {
            try RouteMapYAML.load(laughs, source: "laughs.yaml", maxNodes: 50_000)
        } throws: { "\($0)".contains("is not taken in a route map sent to navigatord") }
        // Behind a quote in a plain scalar (which a scanner skipping quotes would take for the
        // start of a quoted one), the anchor is still found.
        #expect {
            try RouteMapYAML.load("a: b 'c\n" + laughs, source: "hidden.yaml", maxNodes: 50_000)
        } throws: { "\($0)".hasPrefix("hidden.yaml:2:5: a YAML anchor (&name) is not taken") }
        // Written out, the nodes are counted.
        #expect {
            try RouteMapYAML.load(written, source: "big.yaml", maxNodes: 100)
        } throws: {
            "\($0)" == "big.yaml: the document makes more than 100 YAML nodes (aliases expanded); expected at most 100"
        }
        // & and * inside words, or alone, are not anchors.
        let plain = """
            root: home # a & comment
            screens:
              home:
                info:
                  kind: { enum: ['a & b', "x*c", x*y, R&D, "&"], required: false }
            """
        do {
            _ = try RouteMapYAML.load(plain, source: "plain.yaml", maxNodes: 50_000)
        } catch {
            Issue.record("\(error)")
        }
        // A file (the operator's) may use them.
        #expect(throws: Never.self) {
            try RouteMapYAML.load("root: a\nscreens:\n  a: &A {}\n  b: *A\n", source: "file.yaml")
        }
        // A mapping of more keys than a candidate may have.
        var wide = "root: s0\nscreens:\n"
        for screen in 0...RouteMapYAML.maxKeysPerMapping { wide += "  s\(screen): {}\n" }
        #expect {
            try RouteMapYAML.load(wide, source: "wide.yaml", maxNodes: 50_000)
        } throws: {
            "\($0)" == "wide.yaml: a mapping (line 3) has 2001 keys; expected at most 2000"
        }
        // The example map is well within it.
        let example = try String(contentsOfFile: Self.exampleFile, encoding: .utf8)
        #expect(try RouteMapYAML.load(example, maxNodes: 2_000) == .demo)
    }
}
