import NavigatorCore
import NavigatorEngine
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing
import ZeroMQ

@Suite("Bad input")
struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let frames: [[UInt8]]
        let topic: String
        let code: Navigator_V1_RejectCode
        let message: String
        var testDescription: String { name }
    }

    static let valid: [UInt8] = try! wireIntent("ok", [ScreenContext("chat", ["conversationId": "1"])])
        .serializedBytes()

    static let intentCases: [Case] = [
        Case(
            name: "undecodable payload", frames: [Array("b1".utf8), [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]],
            topic: "r/b1/", code: .malformed, message: "not a valid navigator.v1.Intent"),
        Case(
            name: "one frame", frames: [Array("b1".utf8)], topic: "r/b1/", code: .badFrames,
            message: "intent message has 1 frame; expected 2: [session][Intent]"),
        Case(
            name: "three frames", frames: [Array("b1".utf8), valid, valid], topic: "r/b1/", code: .badFrames,
            message: "has 3 frames; expected 2"),
        Case(
            name: "oversize intent", frames: [Array("b1".utf8), [UInt8](repeating: 0x20, count: 70_000)],
            topic: "r/b1/", code: .tooLarge, message: "intent is 70000 bytes; expected at most 65536"),
        Case(
            name: "empty session", frames: [[], valid], topic: "r//", code: .invalidSession,
            message: "session id is empty"),
        Case(
            name: "oversized session", frames: [[UInt8](repeating: 0x61, count: 200), valid], topic: "r//",
            code: .invalidSession, message: "session id has 200 bytes; expected at most 128"),
        Case(
            name: "session with a slash", frames: [Array("a/b".utf8), valid], topic: "r//", code: .invalidSession,
            message: "contains \"/\""),
        Case(
            name: "unknown screen",
            frames: [Array("b1".utf8), try! wireIntent("x", [ScreenContext("nope")]).serializedBytes()], topic: "r/b1/",
            code: .unknownScreen, message: "screen nope is not in the route map"),
        Case(
            name: "invalid info",
            frames: [
                Array("b1".utf8),
                try! wireIntent("x", [ScreenContext("chat", ["conversationId": "abc"])]).serializedBytes(),
            ], topic: "r/b1/", code: .invalidInfo, message: "chat.conversationId is \"abc\"; expected int"),
        Case(
            name: "session mismatch",
            frames: [Array("b1".utf8), try! wireIntent("x", [ScreenContext("home")], session: "b2").serializedBytes()],
            topic: "r/b1/", code: .sessionMismatch, message: "differs from the session frame"),
        Case(
            name: "no path and no url", frames: [Array("b1".utf8), try! wireIntent("x").serializedBytes()],
            topic: "r/b1/", code: .emptyPath, message: "empty path and no url"),
    ]

    @Test("a bad intent gets a rejection, a counter, and changes no tree", arguments: intentCases)
    func badIntent(_ bad: Case) async throws {
        try await withService { _, endpoints in
            let (rejection, snapshot, stats, stillServing) = try await onThread {
                let client = try Client(endpoints)
                let watcher = try client.subscribe("r/")
                let shell = try client.subscribe("s/b1/")
                try client.sendRaw(bad.frames)
                let rejection = try watcher.nextPublished()
                let snapshot = try client.request(.snapshot(.with { $0.session = "b1" }))
                let stats = try client.request(.stats(.init()))
                try client.send(wireIntent("after", [ScreenContext("chat", ["conversationId": "9"])]), session: "b1")
                return (rejection, snapshot, stats, try shell.nextPublished())
            }
            #expect(rejection.topic == bad.topic)
            #expect(rejection.header.kind == .rejection)
            let body = try rejection.rejection
            #expect(body.code == bad.code)
            #expect(body.message.contains(bad.message), "\(body.message)")
            #expect(snapshot.snapshot.seq == 0)
            #expect(try snapshot.snapshot.tree.core() == RouteMap.demo.initialTree())
            #expect(stats.stats.rejectionsByCode[bad.code.label] == 1)
            // One rule, wherever it was refused: a refused intent counts once as outcome rejected.
            #expect(stats.stats.intentsByOutcome["rejected"] == 1)
            #expect(try stillServing.batch.intentID == "after")
        }
    }

    @Test("bad requests get a rejected reply that says what was wrong")
    func badRequests() async throws {
        try await withService { _, endpoints in
            let replies = try await onThread { () throws -> [Navigator_V1_Reply] in
                let client = try Client(endpoints)
                let dealer = try Socket(client.context, type: .dealer)
                try dealer.set(.receiveTimeout, .seconds(10))
                try dealer.connect(endpoints.requests[0])
                func exchange(_ frames: [[UInt8]]) throws -> Navigator_V1_Reply {
                    try dealer.send(multipart: frames)
                    return try Navigator_V1_Reply(serializedBytes: try dealer.receiveMultipart().last!.bytes)
                }
                let empty: [UInt8] = []
                return [
                    try exchange([empty, [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]]),
                    try exchange([empty, try Navigator_V1_Request.with { $0.requestID = "k" }.serializedBytes()]),
                    try exchange([empty, Array("x".utf8), Array("y".utf8)]),
                    try exchange([empty, [UInt8](repeating: 0, count: 70_000)]),
                    try client.request(.intent(wireIntent("i", [ScreenContext("home")], session: ""))),
                    try client.request(.snapshot(.with { $0.session = String(repeating: "z", count: 129) })),
                    try client.request(.clientEvent(.init(.poppedTo(99), session: "fresh"))),
                    try client.request(.clientEvent(Navigator_V1_ClientEvent.with { $0.session = "fresh" })),
                    // Too large, but a well-formed request: its id comes back (read without
                    // decoding the rest), the id given last as a decoder would take it.
                    try exchange([
                        empty,
                        try Navigator_V1_Request.with {
                            $0.requestID = "first"
                            $0.intent = wireIntent(
                                "big", [ScreenContext("search", ["query": String(repeating: "q", count: 70_000)])],
                                session: "big")
                        }.serializedBytes() + Navigator_V1_Request.with { $0.requestID = "big-1" }.serializedBytes(),
                    ]),
                ]
            }
            let expected: [(Navigator_V1_RejectCode, String)] = [
                (.malformed, "not a valid navigator.v1.Request"),
                (.unknownRequest, "request has no kind this service knows; expected intent, client_event"),
                (.badFrames, "request message has 3 frames after the routing id; expected [empty][Request]"),
                (.tooLarge, "request is 70000 bytes; expected at most 65536"),
                (.invalidSession, "session id is empty"),
                (.invalidSession, "session id has 129 bytes"),
                (.invalidEvent, "no screen #99 in the tree"),
                (.invalidEvent, "client event has no kind set"),
                (.tooLarge, "expected at most 65536"),
            ]
            for (reply, (code, message)) in zip(replies, expected) {
                guard case .rejected(let rejected)? = reply.kind else {
                    Issue.record("expected a rejection (\(code.label)), got \(reply)")
                    continue
                }
                #expect(rejected.code == code)
                #expect(rejected.message.contains(message), "\(rejected.message)")
            }
            #expect(replies[1].requestID == "k")
            #expect(replies[3].requestID == "")  // not a message: no id to read
            #expect(replies[8].requestID == "big-1")
        }
    }
}
