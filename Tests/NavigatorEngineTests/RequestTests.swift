import NavigatorCore
import NavigatorEngine
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

@Suite("Acknowledged requests")
struct RequestTests {
    @Test("each outcome of an acknowledged intent, with its explanation")
    func outcomes() async throws {
        try await withService { _, endpoints in
            let replies = try await onThread { () throws -> [Navigator_V1_Reply] in
                let client = try Client(endpoints)
                let chat = ScreenContext("chat", ["conversationId": "42"])
                return [
                    try client.request(.intent(wireIntent("a", [chat], session: "s"))),
                    try client.request(
                        .intent(
                            wireIntent(
                                "b", [ScreenContext("chat", ["conversationId": "42", "draft": "hi"])], session: "s"))),
                    try client.request(.intent(wireIntent("c", [chat], session: "s"))),
                    try client.request(.intent(wireIntent("d", [ScreenContext("editProfile")], session: "s"))),
                    try client.request(.intent(wireIntent("e", [ScreenContext("nope")], session: "s"))),
                    try client.request(.intent(wireIntent("a", [chat], session: "s"))),
                ]
            }
            guard case .resolved(let resolved)? = replies[0].kind else {
                Issue.record("\(replies[0])")
                return
            }
            #expect(resolved.outcome == .resolved)
            #expect(resolved.batch.seq == 1)
            #expect(resolved.batch.commands.count == 2)
            #expect(replies[0].explanationSteps.contains { $0.decisive && $0.step == "transition" })

            guard case .resolved(let refreshed)? = replies[1].kind else {
                Issue.record("\(replies[1])")
                return
            }
            #expect(refreshed.outcome == .refreshed)
            #expect(refreshed.batch.seq == 2)

            guard case .ignored(let ignored)? = replies[2].kind else {
                Issue.record("\(replies[2])")
                return
            }
            #expect(ignored.reason.contains("already shown"))

            guard case .parked(let parked)? = replies[3].kind else {
                Issue.record("\(replies[3])")
                return
            }
            #expect(parked.reason == "waiting for authenticated (showing login)")
            #expect(parked.redirect.seq == 3)
            #expect(parked.expiresAtUnixNanos > 0)

            guard case .rejected(let rejected)? = replies[4].kind else {
                Issue.record("\(replies[4])")
                return
            }
            #expect(rejected.code == .unknownScreen)
            #expect(rejected.message.contains("screen nope is not in the route map; expected one of"))

            guard case .ignored(let duplicate)? = replies[5].kind else {
                Issue.record("\(replies[5])")
                return
            }
            #expect(duplicate.reason == "duplicate intent id a")
        }
    }

    @Test("snapshot, explain (which changes nothing), stats and routes")
    func queries() async throws {
        try await withService { _, endpoints in
            let (before, explained, after, stats, routes) = try await onThread {
                let client = try Client(endpoints)
                _ = try client.request(
                    .intent(wireIntent("a", [ScreenContext("chat", ["conversationId": "1"])], session: "q")))
                let before = try client.request(.snapshot(.with { $0.session = "q" }))
                let explained = try client.request(
                    .explain(
                        wireIntent(
                            "b", [ScreenContext("thread", ["conversationId": "1", "threadId": "2"])], session: "q")))
                let after = try client.request(.snapshot(.with { $0.session = "q" }))
                return (
                    before, explained, after, try client.request(.stats(.init())), try client.request(.routes(.init()))
                )
            }
            #expect(before.snapshot.seq == 1)
            #expect(try before.snapshot.tree.core().top.context == ScreenContext("chat", ["conversationId": "1"]))
            #expect(explained.explanation.outcome == .resolved)
            #expect(explained.explanation.batch.seq == 0)
            #expect(explained.explanation.batch.commands.count == 1)
            #expect(!explained.explanationSteps.isEmpty)
            #expect(after.snapshot == before.snapshot)
            #expect(stats.stats.sessions == 1)
            #expect(stats.stats.intentsByOutcome["resolved"] == 1)
            #expect(stats.stats.workers == 2)
            #expect(routes.routes.source == "embedded demo")
            #expect(routes.routes.yaml.contains("incomingCall:"))
        }
    }

    @Test("instances: with SQLite, the one answering, with its bound endpoints")
    func instances() async throws {
        try await withService { _, endpoints in
            let reply = try await onThread { try Client(endpoints).request(.instances(.init())) }
            #expect(reply.instances.instances.count == 1)
            let me = reply.instances.instances[0]
            #expect(me.answering)
            #expect(me.requestEndpoints == endpoints.requests)
            #expect(me.commandEndpoints == endpoints.commands)
        }
    }

    @Test("client events apply, echo to shells, and release parked intents")
    func clientEvents() async throws {
        try await withService { _, endpoints in
            let (parked, applied, published) = try await onThread {
                let client = try Client(endpoints)
                let shell = try client.subscribe(Topic.batches("e"))
                let callID = "5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10"
                _ = try client.request(
                    .intent(wireIntent("call", [ScreenContext("incomingCall", ["callId": callID])], session: "e")))
                let parked = try client.request(
                    .intent(wireIntent("chat", [ScreenContext("chat", ["conversationId": "3"])], session: "e")))
                let applied = try client.request(.clientEvent(.init(.dismissedTo(nil), session: "e", lastSeq: 1)))
                let published = [try shell.nextPublished(), try shell.nextPublished(), try shell.nextPublished()]
                // Counted once each by first outcome; the release separately.
                let counts = try client.request(.stats(.init())).stats.intentsByOutcome
                #expect(counts["resolved"] == 1 && counts["parked"] == 1 && counts["released"] == 1)
                return (parked, applied, published)
            }
            guard case .parked? = parked.kind else {
                Issue.record("\(parked)")
                return
            }
            #expect(applied.eventApplied.releasedIntentIds == ["chat"])
            #expect(applied.eventApplied.seq == 3)
            #expect(try published.map { try $0.batch.cause } == [.intent, .clientEvent, .release])
            #expect(published.map(\.header.seq) == [1, 2, 3])
            #expect(try published[2].batch.intentID == "chat")
        }
    }
}
