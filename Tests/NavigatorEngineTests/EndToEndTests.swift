import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

@testable import NavigatorEngine

@Suite("navigatord end to end")
struct EndToEndTests {
    @Test("an intent reaches the subscribed shell as the right batch")
    func intentToShell() async throws {
        try await withService { _, endpoints in
            let published = try await onThread {
                let client = try Client(endpoints)
                let shell = try client.subscribe(Topic.batches("s1"))
                try client.send(wireIntent("i1", [ScreenContext("chat", ["conversationId": "42"])]), session: "s1")
                return try shell.nextPublished()
            }
            #expect(published.topic == "s/s1/")
            #expect(published.header.kind == .batch)
            #expect(published.header.seq == 1)
            #expect(published.header.sentAt == 1_700_000_000_000_000_000)
            #expect(published.header.flags.contains(.animated))
            let batch = try published.batch
            #expect(batch.session == "s1")
            #expect(batch.intentID == "i1")
            #expect(batch.cause == .intent)
            #expect(
                try batch.coreCommands().map(\.description) == [
                    "selectTab(chats)", "push(chat(conversationId=42)#5 onto tab chats)",
                ])
        }
    }
}

@Suite("Several binds per socket")
struct MultiBindTests {
    @Test("each socket serves on tcp and ipc at once")
    func tcpAndIPC() async throws {
        let directory = temporaryDirectory("navipc")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let configure: (inout EngineConfiguration) -> Void = { configuration in
            configuration.intentEndpoints = ["tcp://127.0.0.1:*", "ipc://\(directory.path)/intents.sock"]
            configuration.requestEndpoints = ["tcp://127.0.0.1:*", "ipc://\(directory.path)/requests.sock"]
            configuration.commandEndpoints = ["tcp://127.0.0.1:*", "ipc://\(directory.path)/commands.sock"]
        }
        try await withService(configure) { _, endpoints in
            #expect(endpoints.intents.count == 2 && endpoints.requests.count == 2 && endpoints.commands.count == 2)
            let viaIPC = BoundEndpoints(
                intents: [endpoints.intents[1]], requests: [endpoints.requests[1]], commands: [endpoints.commands[1]])
            let (batch, reply) = try await onThread {
                let ipc = try Client(viaIPC)
                let tcp = try Client(endpoints)
                let shell = try ipc.subscribe(Topic.batches("multi"))
                try tcp.send(wireIntent("t1", [ScreenContext("settings")]), session: "multi")
                let batch = try shell.nextPublished().batch
                return (batch, try ipc.request(.snapshot(.with { $0.session = "multi" })))
            }
            #expect(batch.intentID == "t1")
            #expect(reply.snapshot.seq == 1)
        }
    }
}

@Suite("Audit stream")
struct AuditTests {
    @Test("audit records reach audit subscribers, with the outcome and the batch's seq")
    func audit() async throws {
        try await withService { _, endpoints in
            let (resolved, rejected) = try await onThread {
                let client = try Client(endpoints)
                let audit = try client.subscribe(Topic.allAudit)
                try client.send(wireIntent("a1", [ScreenContext("chat", ["conversationId": "3"])]), session: "au")
                try client.send(wireIntent("a2", [ScreenContext("nope")]), session: "au")
                return (try audit.nextPublished(), try audit.nextPublished())
            }
            #expect(resolved.topic == "a/au/" && resolved.header.kind == .audit)
            let first = try resolved.audit
            #expect(first.kind == .resolution && first.intentID == "a1" && first.outcome == .resolved && first.seq == 1)
            #expect(first.summary.hasPrefix("transition:"))
            let second = try rejected.audit
            #expect(second.outcome == .rejected && second.rejectCode == .unknownScreen)
        }
    }

    @Test(
        "an intent's W3C traceparent goes into its audit records, parked and expired too; one not of its form is dropped and counted"
    )
    func traceparent() async throws {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        try await withService { service, endpoints in
            let records = try await onThread { () throws -> [Navigator_V1_AuditRecord] in
                let client = try Client(endpoints)
                let audit = try client.subscribe(Topic.allAudit)
                var traced = wireIntent("t1", [ScreenContext("chat", ["conversationId": "3"])])
                traced.traceparent = parent
                try client.send(traced, session: "tp")
                // Never signed in: parked behind its guard, then expired after 100 ms.
                var guarded = wireIntent("t2", [ScreenContext("editProfile")], ttl: 100)
                guarded.traceparent = parent
                try client.send(guarded, session: "tp")
                var bad = wireIntent("t3", [ScreenContext("settings")])
                bad.traceparent = parent.uppercased()
                try client.send(bad, session: "tp")
                return try (0..<4).map { _ in try audit.nextPublished().audit }
            }
            let byIntent = Dictionary(grouping: records, by: \.intentID)
            #expect(byIntent["t1"]?.first?.traceparent == parent)
            #expect(byIntent["t2"]?.map(\.kind) == [.resolution, .expiry], "\(records)")
            #expect(byIntent["t2"]?.allSatisfy { $0.traceparent == parent } == true)
            #expect(byIntent["t3"]?.first?.traceparent == "" && byIntent["t3"]?.first?.outcome == .resolved)
            #expect(service.counters.traceparentInvalid.load == 1)
        }
    }

    @Test(
        "which subscriptions receive audit records",
        arguments: [
            ("", true), ("a", true), ("a/", true), ("a/x/", true), ("s/", false), ("ab", false), ("r/", false),
        ])
    func topics(topic: String, receives: Bool) {
        #expect(EgressLoop.receivesAudit(topic: Array(topic.utf8)) == receives)
    }
}
