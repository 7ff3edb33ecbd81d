import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine

@Suite("Flight recorder")
struct FlightRecorderTests {
    /// deploy/routes.example.yaml: the demo map, written out.
    static func demoYAML() throws -> String {
        try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("deploy/routes.example.yaml"), encoding: .utf8)
    }

    static func intent(_ n: Int) -> Intent {
        Intent(id: "i\(n)", session: "s", target: .path([ScreenContext("settings")]))
    }

    @Test("a ring of fixed size: the last intents, oldest first; nothing kept with capacity 0")
    func ring() {
        let state = RouteMap.demo.initialTree()
        let recorder = FlightRecorder(capacity: 3)
        for n in 1...5 { recorder.record(Self.intent(n), before: SessionState(tree: state), at: Int64(n)) }
        #expect(recorder.entries().map(\.intent.id) == ["i3", "i4", "i5"])
        let other = FlightRecorder(capacity: 3)
        other.record(Self.intent(9), before: SessionState(tree: state), at: 4)
        #expect(FlightRecorder.merged([recorder, other]).map(\.at) == [3, 4, 4, 5])
        let off = FlightRecorder(capacity: 0)
        off.record(Self.intent(1), before: SessionState(tree: state), at: 1)
        #expect(off.entries().isEmpty)
    }

    @Test(
        "with the recorder off, routes_impact is refused UNAVAILABLE saying why; an invalid candidate gets its problems"
    )
    func off() async throws {
        let off: (inout EngineConfiguration) -> Void = { $0.flightRecorderIntents = 0 }
        try await withService(off) { _, endpoints in
            try await onThread {
                let client = try Client(endpoints)
                let refused = try client.request(
                    .routesImpact(.with { $0.yaml = "root: home\nscreens:\n  home: {}\n" }))
                #expect(refused.rejected.code == .unavailable)
                #expect(refused.rejected.message.contains("flightRecorderIntents 0"))
                // Many problems: the first 100 listed, each naming at most 20 screens.
                var many = "root: home\nscreens:\n  home: {}\n"
                for n in 0..<150 { many += "  s\(n): { parent: nowhere }\n" }
                let capped = try client.request(.routesCheck(.with { $0.yaml = many }))
                #expect(capped.routesCheck.problems.count == 100)
                #expect(capped.routesCheck.summary == "150 problems (the first 100 listed)")
                #expect(capped.routesCheck.problems[0].message.hasSuffix(", … (151 in all)"))
                let invalid = try client.request(.routesImpact(.with { $0.yaml = "root: home\n" }))
                #expect(!invalid.routesImpact.check.valid && invalid.routesImpact.intents == 0)
                #expect(invalid.routesImpact.check.problems.first?.message.contains("screens") == true)
            }
        }
    }

    @Test("the instance's recorder is split between its workers and fills with every worker's intents")
    func split() async throws {
        let five: (inout EngineConfiguration) -> Void = { $0.flightRecorderIntents = 5 }
        try await withService(workers: 2, five) { server, endpoints in
            #expect(server.recorders.map(\.capacity) == [3, 3])
            try await onThread {
                let client = try Client(endpoints)
                for n in 1...20 {
                    _ = try client.request(.intent(wireIntent("r\(n)", [ScreenContext("settings")], session: "s\(n)")))
                }
                let reply = try client.request(.routesImpact(.with { $0.yaml = try Self.demoYAML() }))
                #expect(reply.routesImpact.intents == 6, "3 a worker, both full after 20 sessions: \(reply)")
                #expect(reply.routesImpact.recorderCapacity == 6 && reply.routesImpact.changed == 0)
            }
        }
    }

    @Test("a duplicate is not recorded: its replay would not be one")
    func duplicates() async throws {
        try await withService { server, endpoints in
            try await onThread {
                let client = try Client(endpoints)
                for _ in 0..<2 {
                    _ = try client.request(.intent(wireIntent("same", [ScreenContext("settings")], session: "d")))
                }
            }
            #expect(server.recorders.flatMap { $0.entries() }.map(\.intent.id) == ["same"])
        }
    }
}
