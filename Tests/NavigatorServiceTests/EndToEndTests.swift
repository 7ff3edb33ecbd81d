import NavigatorCore
import NavigatorService
import NavigatorWire
import Testing
import ZeroMQ

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
