import Foundation
import GRDB
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing
import ZeroMQ

@testable import NavigatorEngine

/// Every RejectCode of service.proto is sent by the service, each for the reason the proto gives.
@Suite("Every reject code")
struct RejectCodeTests {
    @Test("each RejectCode is triggered, by what service.proto says it means")
    func everyCode() async throws {
        let directory = temporaryDirectory("navcodes")
        defer { try? FileManager.default.removeItem(at: directory) }
        let seen = try await Self.triggerAll(directory)
        // INTERNAL is a fault of the service's own plan: a transition provider that plans a
        // command that does not apply stands in for such a bug.
        struct Broken: TransitionProvider {
            func plan(
                to target: ScreenContext, in tree: ScreenTree, context: PlanningContext, scratch: inout PlanScratch
            ) throws(ResolveError) -> Plan { Plan([.popTo(NodeID(rawValue: 999))], "a bug") }
        }
        var state = try Resolver(map: .demo).initialState()
        let resolution = try Resolver(map: .demo, transitions: Broken()).resolve(
            .show(ScreenContext("settings"), id: "bug"), into: &state, now: 1)
        var codes = seen
        codes[.forbidden] = try await Self.forbidden()
        // MOVED needs several instances (PostgreSQL): without the test server it is left out.
        if TestPostgres.enabled { codes[.moved] = try await Self.moved() } else { codes[.moved] = "not checked" }
        if let error = resolution.rejection { codes[Navigator_V1_RejectCode(error.code)] = error.message }
        // APP_TOO_OLD needs a route map with `since:` and no fallback (the service's own path is
        // AppVersionServiceTests'): a shell of 1.0 and a screen since 9.0.
        var versioned = RouteMap.demo
        versioned.screens["settings"]!.since = AppVersion("9.0")
        let old = try Resolver(map: versioned)
        var oldShell = old.initialState()
        _ = old.apply(.ready(appVersion: AppVersion("1.0")), to: &oldShell, now: 1)
        if let error = old.resolve(.show(ScreenContext("settings"), id: "old"), into: &oldShell, now: 2).rejection {
            codes[Navigator_V1_RejectCode(error.code)] = error.message
        }
        for code in Navigator_V1_RejectCode.allCases where code != .unspecified {
            #expect(codes[code] != nil, "\(code.label) was never sent")
        }
        #expect(codes[.internal]?.contains("the planned commands do not apply") == true)
    }

    /// MOVED needs two instances on one database (forwarding off): a request for a session the
    /// other one serves.
    static func moved() async throws -> String? {
        try await TestPostgres.withDatabase { url in
            let reply = try await TestService.withInstances(["one", "two"], url: url, { $0.clusterEndpoint = "off" }) {
                servers -> Navigator_V1_Reply? in
                let (first, second) = (servers[0], servers[1])
                let ownership = try #require(second.store.ownership)
                let deadline = ContinuousClock.now + .seconds(20)
                while ownership.served.isEmpty || first.store.ownership!.served.count == 256 {
                    guard ContinuousClock.now < deadline else { return nil }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let session = (0..<1000).map { "m\($0)" }.first { ownership.serves(ownership.partition(of: $0)) }!
                return try await onThread {
                    try Client(first.endpoints).request(
                        .intent(wireIntent("m", [ScreenContext("settings")], session: session)))
                }
            }
            guard let reply else { return nil }
            return reply.rejected.code == .moved ? reply.rejected.message : nil
        }
    }

    /// FORBIDDEN needs secure mode: a producer asks for a session it does not own.
    static func forbidden() async throws -> String? {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let message = ResultBox<String>()
        try await withService(workers: 1, setup.configure) { _, endpoints in
            message.value = try await onThread {
                let producer = try setup.client(setup.producer, endpoints)
                let reply = try producer.request(
                    .intent(wireIntent("f", [ScreenContext("settings")], session: "other")))
                return reply.rejected.code == .forbidden ? reply.rejected.message : nil
            }
        }
        return message.value
    }

    /// Triggers every code a client can cause; returns each code with the message it came with.
    static func triggerAll(_ directory: URL) async throws -> [Navigator_V1_RejectCode: String] {
        let seen = ResultBox<[Navigator_V1_RejectCode: String]>()
        let oneCondition: (inout EngineConfiguration) -> Void = { $0.maxConditions = 1 }
        try await withService(dataDirectory: directory, oneCondition) { server, endpoints in
            let path = directory.appendingPathComponent("navigator.sqlite").path
            seen.value = try await onThread { () throws -> [Navigator_V1_RejectCode: String] in
                var codes: [Navigator_V1_RejectCode: String] = [:]
                let client = try Client(endpoints)
                func note(_ reply: Navigator_V1_Reply) {
                    if case .rejected(let rejected)? = reply.kind { codes[rejected.code] = rejected.message }
                }
                func intent(_ intent: Navigator_V1_Intent) throws { note(try client.request(.intent(intent))) }
                let dealer = try Socket(client.context, type: .dealer)
                try dealer.set(.receiveTimeout, .seconds(10))
                try dealer.connect(endpoints.requests[0])
                func raw(_ frames: [[UInt8]]) throws {
                    try dealer.send(multipart: frames)
                    note(try Navigator_V1_Reply(serializedBytes: try dealer.receiveMultipart().last!.bytes))
                }
                let empty: [UInt8] = []
                try raw([empty, [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]])  // MALFORMED
                try raw([empty, Array("x".utf8), Array("y".utf8)])  // BAD_FRAMES
                try raw([empty, [UInt8](repeating: 0, count: 70_000)])  // TOO_LARGE
                try raw([empty, try Navigator_V1_Request.with { $0.stats = .init() }.serializedBytes()])  // INVALID_ID
                // UNKNOWN_REQUEST
                try raw([empty, try Navigator_V1_Request.with { $0.requestID = "k" }.serializedBytes()])
                try intent(wireIntent("i1", [ScreenContext("home")], session: ""))  // INVALID_SESSION
                try intent(wireIntent("i2", [], session: "c"))  // EMPTY_PATH
                try intent(wireIntent("i3", [ScreenContext("nowhere")], session: "c"))  // UNKNOWN_SCREEN
                try intent(wireIntent("i4", [ScreenContext("chat")], session: "c"))  // MISSING_INFO
                // INVALID_INFO
                try intent(wireIntent("i5", [ScreenContext("chat", ["conversationId": "x"])], session: "c"))
                try intent(wireIntent("i6", url: "app://nowhere/1", session: "c"))  // UNKNOWN_URL
                // PATH_TOO_LONG
                try intent(wireIntent("i7", Array(repeating: ScreenContext("home"), count: 17), session: "c"))
                note(try client.request(.clientEvent(.init(.poppedTo(99), session: "c"))))  // INVALID_EVENT
                // LIMIT_EXCEEDED
                note(try client.request(.clientEvent(.init(.conditions(["a": true, "b": true]), session: "c"))))
                // STALE_EVENT: a back press made before the batch of seq 1.
                _ = try client.request(.intent(wireIntent("i8", [ScreenContext("settings")], session: "c")))
                note(try client.request(.clientEvent(.init(.tabSelected("home"), session: "c", lastSeq: 0, epoch: 1))))
                // CONFLICT: no rollout to promote; INVALID_REQUEST: a rollout of no share.
                note(try client.request(.routesRollout(.with { $0.action = .promote })))
                note(try client.request(.routesRollout(.with { $0.action = .start })))
                // Published rejections: SESSION_MISMATCH and EXPIRED.
                let rejections = try client.subscribe("r/")
                try client.send(wireIntent("i9", [ScreenContext("home")], session: "other"), session: "c")
                _ = try client.request(
                    .intent(wireIntent("i10", [ScreenContext("editProfile")], session: "c", ttl: 1)))
                while codes[.sessionMismatch] == nil || codes[.expired] == nil {
                    let rejection = try rejections.nextPublished().rejection
                    codes[rejection.code] = rejection.message
                }
                // OVERLOADED: the session's worker stalls (the test holds its shard), so its
                // queue from the requests thread fills.
                let shard = SessionStore.shardIndex(of: "e", count: server.store.shards.count)
                try server.store.shards[shard].records.withLock { _ in
                    let flood = try Socket(client.context, type: .dealer)
                    defer { flood.close() }
                    try flood.set(.receiveTimeout, .seconds(10))
                    try flood.connect(endpoints.requests[0])
                    let event: [UInt8] = try Navigator_V1_Request.with {
                        $0.requestID = "o"
                        $0.clientEvent = .init(.ready(), session: "e")
                    }.serializedBytes()
                    for _ in 0..<1_000 { try flood.send(multipart: [empty, event]) }
                    note(try Navigator_V1_Reply(serializedBytes: try flood.receiveMultipart().last!.bytes))
                }
                // Behind the flood's queued requests in the same queues: once this is answered,
                // they are all done (and written), before the state file is locked below.
                _ = try client.request(.clientEvent(.init(.ready(), session: "e")))
                // UNAVAILABLE: the state file is locked by another process's transaction.
                try whileLocked(stateFile: path) {
                    // Up to two busy waits of 5 s: a write-behind flush's, then this reply's.
                    try dealer.set(.receiveTimeout, .seconds(30))
                    try raw([
                        empty,
                        try Navigator_V1_Request.with {
                            $0.requestID = "i11"
                            $0.intent = wireIntent("i11", [ScreenContext("settings")], session: "d")
                        }.serializedBytes(),
                    ])
                }
                return codes
            }
            // SHUTTING_DOWN: requests that arrive while the workers drain a backlog.
            let shuttingDown = try await Self.duringShutdown(server, endpoints)
            if let shuttingDown { seen.value![.shuttingDown] = shuttingDown }
        }
        return seen.value!
    }

    /// Holds one worker (its shard locked) at an intent, stops the service and asks for stats
    /// until a request is refused as SHUTTING_DOWN (or the service is gone); returns that message.
    /// The held worker cannot report that it stopped, so the service stays in its stopping window
    /// however fast the machine is; the worker is let go once the refusal came.
    static func duringShutdown(_ server: Engine, _ endpoints: BoundEndpoints) async throws -> String? {
        let worker = SessionStore.shardIndex(of: "load0", count: server.store.shards.count)
        return try await onThread { () throws -> String? in
            let client = try Client(endpoints)
            _ = try client.request(.stats(.init()))  // connected before the worker stalls
            let context = try Context()
            let dealer = try Socket(context, type: .dealer)
            try dealer.set(.receiveTimeout, .seconds(2))
            try dealer.connect(endpoints.requests[0])
            return try server.store.shards[worker].records.withLock { _ -> String? in
                let before = server.counters.handled[worker].load
                try client.send(wireIntent("b0", [ScreenContext("settings")], session: "load0"), session: "load0")
                let deadline = ContinuousClock.now + .seconds(20)
                while server.counters.handled[worker].load == before {
                    guard ContinuousClock.now < deadline else { return nil }
                    usleep(1000)
                }
                let stopping = Task { await server.stop() }
                _ = stopping
                let request: [UInt8] = try Navigator_V1_Request.with {
                    $0.requestID = "s"
                    $0.stats = .init()
                }.serializedBytes()
                while ContinuousClock.now < deadline {
                    try dealer.send(multipart: [[], request])
                    guard let frames = try? dealer.receiveMultipart() else { return nil }  // gone
                    let reply = try Navigator_V1_Reply(serializedBytes: frames.last!.bytes)
                    if reply.rejected.code == .shuttingDown { return reply.rejected.message }
                }
                return nil
            }
        }
    }
}
