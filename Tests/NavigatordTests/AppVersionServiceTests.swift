import Foundation
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import navigatord

@Suite("Shells of different app versions")
struct AppVersionServiceTests {
    /// deploy/routes.example.yaml with a web-view screen, `thread` since 2.3 (its parent
    /// instead), `mediaViewer` since 3.0 (a web page instead) and `payment` since 2.5 (no
    /// fallback), written as an operator would.
    static func routes(in directory: URL) throws -> String {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/routes.example.yaml")
        var text = try String(contentsOf: example, encoding: .utf8)
        text = text.replacingOccurrences(
            of: "  thread:\n", with: "  thread:\n    since: 2.3\n    fallback: parent\n")
        text = text.replacingOccurrences(
            of: "  mediaViewer:\n",
            with:
                "  mediaViewer:\n    since: \"3.0\"\n    fallback: { screen: web, url: \"https://m.example.com/media/{mediaId}\" }\n"
        )
        text = text.replacingOccurrences(of: "  payment:\n", with: "  payment:\n    since: 2.5\n")
        text += "  web:\n    transition: modal\n    info:\n      url: string\n"
        let path = directory.appendingPathComponent("routes.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(
        "an old shell's session gets the fallback, another session's newer shell the screen; no fallback: APP_TOO_OLD; kept across a restart"
    )
    func versions() async throws {
        let directory = temporaryDirectory("navver")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let routes = try Self.routes(in: directory)
        let data = directory.appendingPathComponent("data")
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = {
            $0.httpAddress = "127.0.0.1:0"
            $0.engine.routeMapPath = routes
        }
        try await withNavigatord(dataDirectory: data, configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let connection = try await NavigatorConnection(
                endpoints: ServerEndpoints(
                    intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0]),
                timeout: .seconds(10))
            let audits = connection.follow(.session("old"))
            try await onThread {
                #expect(
                    try api(address, "POST", "/v1/sessions/old/events", body: #"{"ready":{"appVersion":"2.1"}}"#).status
                        == 200)
                #expect(
                    try api(address, "POST", "/v1/sessions/new/events", body: #"{"ready":{"appVersion":"2.10"}}"#)
                        .status == 200)
                #expect(try api(address, "GET", "/v1/sessions/old").reply.snapshot.appVersion == "2.1")
                let bad = try api(
                    address, "POST", "/v1/sessions/odd/events", body: #"{"ready":{"appVersion":"2.1-beta"}}"#)
                #expect(bad.status == 400 && bad.reply.rejected.code == .invalidEvent)
                #expect(bad.reply.rejected.message.contains("expected 1 to 4 numbers separated by dots"))

                func thread(_ id: String, _ session: String) throws -> Navigator_V1_Reply {
                    try api(
                        address, "POST", "/v1/intents?wait=true",
                        body:
                            #"{"id":"\#(id)","session":"\#(session)","setConditions":{"authenticated":true},"path":[{"screen":"thread","info":{"conversationId":"7","threadId":"3"}}]}"#
                    ).reply
                }
                let old = try thread("t1", "old")
                let pushedOld = old.resolved.batch.commands.compactMap { command -> String? in
                    if case .push(let push)? = command.kind { push.screen.context.screen } else { nil }
                }
                #expect(pushedOld == ["chat"], "\(old)")
                #expect(
                    old.explanationSteps.contains {
                        $0.detail
                            == "thread needs app version 2.3 or later and the session's shell runs 2.1: its fallback chat(conversationId=7) is shown instead"
                    }, "\(old.explanationSteps)")
                let new = try thread("t2", "new")
                let pushedNew = new.resolved.batch.commands.compactMap { command -> String? in
                    if case .push(let push)? = command.kind { push.screen.context.screen } else { nil }
                }
                #expect(pushedNew == ["chat", "thread"], "\(new)")

                let media = try api(
                    address, "POST", "/v1/intents?wait=true",
                    body: #"{"id":"m1","session":"old","path":[{"screen":"mediaViewer","info":{"mediaId":"x 1"}}]}"#)
                let presented = media.reply.resolved.batch.commands.last?.present.modal.stack.first?.context
                #expect(presented?.screen == "web" && presented?.info["url"] == "https://m.example.com/media/x%201")

                let payment = try api(
                    address, "POST", "/v1/intents?wait=true",
                    body:
                        #"{"id":"p1","session":"old","path":[{"screen":"payment","info":{"conversationId":"7","amount":"5","currency":"EUR"}}]}"#
                )
                #expect(payment.status == 409 && payment.reply.rejected.code == .appTooOld, "\(payment.reply)")
                #expect(
                    payment.reply.rejected.message.hasPrefix(
                        "payment needs app version 2.5 or later, and the session's shell runs 2.1"))
            }
            // The audit record of the fallback names it.
            var fallback = ""
            for try await event in audits {
                if case .audit(let record, _) = event, record.intentID == "t1" {
                    fallback = record.fallback
                    break
                }
            }
            #expect(fallback.hasPrefix("thread needs app version 2.3 or later"))
            await connection.close()
        }
        // The version is the session's state: after a restart the old shell still gets the fallback.
        try await withNavigatord(dataDirectory: data, configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                let again = try api(
                    address, "POST", "/v1/intents?wait=true",
                    body:
                        #"{"id":"t3","session":"old","path":[{"screen":"thread","info":{"conversationId":"8","threadId":"1"}}]}"#
                )
                let pushed = again.reply.resolved.batch.commands.compactMap { command -> String? in
                    if case .push(let push)? = command.kind { push.screen.context.screen } else { nil }
                }
                #expect(pushed == ["chat"], "\(again.reply)")
            }
        }
    }
}
