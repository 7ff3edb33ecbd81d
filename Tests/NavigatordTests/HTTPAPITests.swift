import Foundation
import JWTKit
import NavigatorCore
import NavigatorTestSupport
import NavigatorTokens
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import Testing

@testable import NavigatorEngine
@testable import NavigatorHTTP
@testable import navigatord

/// One API call over a plain socket: the status code, the response's head and its body (a
/// `navigator.v1.Reply` in JSON whenever the API answers).
func api(
    _ address: String, _ method: String, _ path: String, body: String? = nil,
    contentType: String? = "application/json"
) throws -> (status: Int, head: String, reply: Navigator_V1_Reply) {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if let body {
        if let contentType { request += "Content-Type: \(contentType)\r\n" }
        request += "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    } else {
        request += "\r\n"
    }
    let (statusLine, body) = try http(address, request)
    let status = Int(statusLine.split(separator: " ")[1]) ?? 0
    var options = JSONDecodingOptions()
    options.ignoreUnknownFields = false
    let reply = try Navigator_V1_Reply(jsonString: body, options: options)
    return (status, statusLine, reply)
}

@Suite("HTTP JSON API")
struct HTTPAPITests {
    static let configure: @Sendable (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }

    @Test("an acknowledged intent, a snapshot, explain and a client event, in protobuf's JSON mapping")
    func calls() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                let intent = #"{"id":"h1","session":"web-1","path":[{"screen":"chat","info":{"conversationId":"42"}}]}"#
                let resolved = try api(address, "POST", "/v1/intents?wait=true", body: intent)
                #expect(resolved.status == 200)
                #expect(resolved.reply.resolved.outcome == .resolved)
                #expect(resolved.reply.resolved.batch.seq == 1)
                let chat = try #require(resolved.reply.resolved.batch.commands.last?.push.screen)
                #expect(chat.context.screen == "chat" && chat.context.info["conversationId"] == "42")

                // The same id again is a duplicate, ignored.
                let again = try api(address, "POST", "/v1/intents?wait=true", body: intent)
                #expect(again.status == 200 && again.reply.ignored.reason.contains("duplicate"), "\(again.reply)")

                let snapshot = try api(address, "GET", "/v1/sessions/web-1")
                #expect(snapshot.status == 200)
                #expect(snapshot.reply.snapshot.seq == 1)
                #expect(snapshot.reply.snapshot.tree.root.tabBar.selected == "chats")

                // Explain changes nothing.
                let explained = try api(
                    address, "POST", "/v1/explain",
                    body: #"{"id":"h2","session":"web-1","path":[{"screen":"settings"}]}"#)
                #expect(explained.status == 200 && explained.reply.explanation.outcome == .resolved)
                #expect(try api(address, "GET", "/v1/sessions/web-1").reply.snapshot.seq == 1)

                // Back to the chat list, as a shell reports it.
                let listID = snapshot.reply.snapshot.tree.root.tabBar.tabs.first { $0.name == "chats" }?.stack.first?.id
                let back = try api(
                    address, "POST", "/v1/sessions/web-1/events",
                    body: #"{"lastSeq":"1","poppedTo":{"screenId":"\#(try #require(listID))"}}"#)
                #expect(back.status == 200 && back.reply.eventApplied.seq == 2, "\(back.reply)")
                let after = try api(address, "GET", "/v1/sessions/web-1").reply.snapshot
                #expect(after.tree.root.tabBar.tabs.first { $0.name == "chats" }?.stack.count == 1)
            }
        }
    }

    @Test(
        "routes/check: a candidate's problems with their lines, or its changes against the map in use; nothing loaded")
    func routesCheck() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                var candidate = RouteMap.demo
                candidate.screens["thread"]!.guardCondition = .init(condition: "verified", redirect: "login")
                candidate.screens["chat"]!.url = "app://c/{conversationId}"
                let yaml = RouteMapYAML.encode(candidate)
                let body = try Navigator_V1_RoutesCheckRequest.with {
                    $0.yaml = yaml
                    $0.source = "candidate.yaml"
                }.jsonString()
                let checked = try api(address, "POST", "/v1/routes/check", body: body)
                #expect(checked.status == 200)
                #expect(checked.reply.routesCheck.valid && checked.reply.routesCheck.currentSource == "embedded demo")
                #expect(
                    checked.reply.routesCheck.changeLines == [
                        "~ url chat: app://chat/{conversationId} -> app://c/{conversationId}",
                        "+ guard thread: verified, else login", "2 changes: 1 added, 1 changed",
                    ])

                let broken = yaml.replacingOccurrences(of: "redirect: login", with: "redirect: logn")
                let refused = try api(
                    address, "POST", "/v1/routes/check",
                    body: try Navigator_V1_RoutesCheckRequest.with { $0.yaml = broken }.jsonString())
                #expect(refused.status == 200 && !refused.reply.routesCheck.valid)
                let problems = refused.reply.routesCheck.problems
                #expect(problems.count == 3, "editProfile, payment and thread name the redirect: \(problems)")
                #expect(problems.allSatisfy { $0.line > 0 && $0.message.contains("screen logn is not declared") })
                #expect(problems.map(\.keyPath).contains("screens.thread.guard.redirect"))
                #expect(refused.reply.routesCheck.changes.isEmpty && refused.reply.routesCheck.summary == "3 problems")

                // Impact: a deep link that the candidate's pattern no longer matches.
                let link = #"{"id":"l1","session":"web-2","url":"app://chat/42"}"#
                #expect(try api(address, "POST", "/v1/intents?wait=true", body: link).status == 200)
                let impact = try api(address, "POST", "/v1/routes/impact", body: body)
                #expect(impact.status == 200 && impact.reply.routesImpact.intents == 1, "\(impact.reply)")
                let change = impact.reply.routesImpact.routes.first?.changes.first
                #expect(
                    change?.kind == "now rejected" && change?.code == .unknownURL && change?.exampleIntentID == "l1")
                #expect(impact.reply.routesImpact.summary == "1 of 1 recorded intents would change, on 1 of 1 routes")
                let notValid = try api(
                    address, "POST", "/v1/routes/impact",
                    body: try Navigator_V1_RoutesImpactRequest.with { $0.yaml = broken }.jsonString())
                #expect(notValid.status == 200 && notValid.reply.routesImpact.check.problems.count == 3)

                let notYAML = try api(
                    address, "POST", "/v1/routes/check", body: #"{"yaml":"tabs: [","source":"x.yaml"}"#)
                #expect(
                    notYAML.status == 200
                        && notYAML.reply.routesCheck.problems.first?.message.hasPrefix("YAML syntax") == true)
            }
            // Nothing was loaded: the service still resolves with the map it had.
            #expect(server.engine.routeMap.source == "embedded demo" && server.engine.routeMap.map == .demo)
        }
    }

    @Test("a fire-and-forget intent is accepted (202) and reaches the session")
    func fireAndForget() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let accepted = try await onThread {
                try api(
                    address, "POST", "/v1/intents",
                    body: #"{"id":"f1","session":"web-2","path":[{"screen":"settings"}]}"#)
            }
            #expect(accepted.status == 202)
            let deadline = ContinuousClock.now + .seconds(10)
            while try await onThread({ try api(address, "GET", "/v1/sessions/web-2").reply.snapshot.seq }) != 1 {
                guard ContinuousClock.now < deadline else { throw TestFailure("the intent never reached web-2") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    @Test("mistakes get the reject code, the fitting status and a message, and change nothing")
    func mistakes() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                let first = #"{"id":"m1","session":"web-3","path":[{"screen":"settings"}]}"#
                #expect(try api(address, "POST", "/v1/intents?wait=true", body: first).status == 200)
                let cases: [(String, String, String?, String?, Int, Navigator_V1_RejectCode, String)] = [
                    (
                        "POST", "/v1/intents?wait=true", #"{"id":"m2","session":"web-3","path":[{"screen":"nope"}]}"#,
                        "application/json", 400, .unknownScreen, "not in the route map"
                    ),
                    (
                        "POST", "/v1/intents?wait=true", #"{"id":"m3","session":"web-3","path":[{"screen":"chat"}]}"#,
                        "application/json", 400, .missingInfo, "conversationId"
                    ),
                    ("POST", "/v1/intents", "{not json", "application/json", 400, .malformed, "JSON mapping"),
                    ("POST", "/v1/intents", #"{"idd":"x"}"#, "application/json", 400, .malformed, "JSON mapping"),
                    ("POST", "/v1/intents", "{}", "text/plain", 415, .malformed, "expected application/json"),
                    (
                        "POST", "/v1/intents?wait=true", #"{"id":"m4","session":"a/b","path":[{"screen":"home"}]}"#,
                        "application/json", 400, .invalidSession, "\"/\""
                    ),
                    (
                        "POST", "/v1/intents", String(repeating: " ", count: 300_000), "application/json", 413,
                        .tooLarge, "at most"
                    ),
                    (
                        "POST", "/v1/sessions/web-3/events", #"{"lastSeq":"0","poppedTo":{"screenId":"1"}}"#,
                        "application/json", 409, .staleEvent, "stale"
                    ),
                    (
                        "POST", "/v1/sessions/web-3/events", #"{"session":"other","ready":{}}"#, "application/json",
                        400, .sessionMismatch, "differs"
                    ),
                    ("GET", "/v1/sessions/a%2Fb", nil, nil, 400, .invalidSession, "\"/\""),
                    ("GET", "/v1/nothing", nil, nil, 404, .unknownRequest, "POST /v1/intents"),
                    ("DELETE", "/v1/intents", nil, nil, 405, .unknownRequest, "use POST"),
                ]
                for (method, path, body, type, status, code, message) in cases {
                    let answer = try api(address, method, path, body: body, contentType: type)
                    #expect(answer.status == status, "\(method) \(path): \(answer.head)")
                    #expect(answer.reply.rejected.code == code, "\(method) \(path): \(answer.reply)")
                    #expect(answer.reply.rejected.message.contains(message), "\(method) \(path): \(answer.reply)")
                }
                // Nothing changed: web-3 is where the first intent left it, no other session exists.
                let snapshot = try api(address, "GET", "/v1/sessions/web-3").reply.snapshot
                #expect(snapshot.seq == 1)
                let stats = try Client(endpoints).request(.stats(.init())).stats
                #expect(stats.sessions == 1)
            }
        }
    }

    @Test("secure mode: the API refuses every call with 401 (no tokens yet) and nothing reaches the service")
    func secureMode() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = { configuration in
            Self.configure(&configuration)
            setup.configure(&configuration.engine)
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                let refused = try api(
                    address, "POST", "/v1/intents?wait=true",
                    body: #"{"id":"s1","session":"s1","path":[{"screen":"settings"}]}"#)
                #expect(refused.status == 401)
                #expect(refused.reply.rejected.code == .forbidden)
                #expect(refused.reply.rejected.message.contains("without a token key"))
                #expect(try api(address, "GET", "/v1/sessions/s1").status == 401)
                let stats = try setup.client(setup.admin, endpoints).request(.stats(.init())).stats
                #expect(stats.sessions == 0)
            }
        }
    }

    @Test("the OpenAPI document is served, is JSON, and names every path the API serves")
    func openAPI() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let (status, body) = try await onThread { try http(address, "GET /v1/openapi.json HTTP/1.1\r\n\r\n") }
            #expect(status == "HTTP/1.1 200 OK")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let paths = try #require(document["paths"] as? [String: [String: Any]])
            for (pattern, method) in HTTPAPI.paths where pattern != "/v1/openapi.json" {
                #expect(paths[pattern]?[method.lowercased()] != nil, "\(method) \(pattern) is not in the document")
            }
        }
    }

    @Test("the live page and its client module are served from the package's resources")
    func page() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let (index, module, missing, traversal) = try await onThread {
                (
                    try http(address, "GET / HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /page/navigator-client.js HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /page/nothing.js HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /page/..%2FPackage.swift HTTP/1.1\r\n\r\n")
                )
            }
            #expect(index.status == "HTTP/1.1 200 OK")
            #expect(index.body.contains("<script type=\"module\" src=\"/page/page.js\">"))
            #expect(module.status == "HTTP/1.1 200 OK")
            #expect(module.body.contains("export class SessionMirror"))
            #expect(missing.status == "HTTP/1.1 404 Not Found" && missing.body.contains("navigator-client.js"))
            #expect(traversal.status == "HTTP/1.1 404 Not Found")
        }
    }

    @Test("secure mode with a token key: bearer tokens name a client of the access file, which authorizes each call")
    func tokens() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let keyFile = setup.directory.appendingPathComponent("token.key").path
        let other = setup.directory.appendingPathComponent("other.key").path
        for (path, secret) in [
            (keyFile, "token-key-of-the-test-0123456789abcdef"), (other, String(repeating: "x", count: 40)),
        ] {
            #expect(
                FileManager.default.createFile(
                    atPath: path, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o600]))
        }
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = { configuration in
            Self.configure(&configuration)
            setup.configure(&configuration.engine)
            configuration.tokenKeyFile = keyFile
        }
        let keys = try await TokenKey.load(file: keyFile)
        let otherKeys = try await TokenKey.load(file: other)
        @Sendable func token(
            // An hour: the test's own calls must not outlive the tokens they use (this test ran 65 s
            // on a loaded machine and its 60-second tokens expired under it).
            _ client: String, _ role: String, _ sessions: [String], lifetime: TimeInterval = 3600,
            signedBy: TokenKey? = nil
        ) async throws -> String {
            try await (signedBy ?? keys).sign(
                AccessToken(client: client, role: role, sessions: sessions, lifetime: lifetime))
        }
        let shell = try await token("alice-phone", "shell", ["s1"])
        let producer = try await token("shop-gateway", "producer", ["shop-*"])
        let forged = try await token("ops", "admin", [], signedBy: otherKeys)
        let expired = try await token("alice-phone", "shell", ["s1"], lifetime: -10)
        let stranger = try await token("mallory", "admin", [])
        // Hostile tokens, validly signed with the service's key: an expiry no date arithmetic
        // survives (it once crashed navigatord on a stream), a header that names another
        // algorithm, a token not valid yet, one issued in the future, one living a century.
        @Sendable func loose(
            exp: Double, iat: Double = Date().timeIntervalSince1970, nbf: Double? = nil, header: JWTHeader = JWTHeader()
        ) async throws -> String {
            try await keys.sign(
                LooseClaims(
                    sub: .init(value: "alice-phone"), iat: .init(value: Date(timeIntervalSince1970: iat)),
                    exp: .init(value: Date(timeIntervalSince1970: exp)),
                    nbf: nbf.map { .init(value: Date(timeIntervalSince1970: $0)) }, role: "shell", sessions: ["s1"]),
                header: header)
        }
        let now = Date().timeIntervalSince1970
        let hostile = [
            ("expected at most", try await loose(exp: 1e300)),
            ("expected HS256", try await loose(exp: now + 60, header: ["alg": "none"])),
            ("not valid yet", try await loose(exp: now + 600, nbf: now + 300)),
            ("iat lies in the future", try await loose(exp: now + 600, iat: now + 300)),
            ("expected at most", try await loose(exp: now + 100 * 365 * 86_400)),
        ]
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            @Sendable func call(_ method: String, _ path: String, _ token: String?, body: String? = nil) throws -> (
                Int, Navigator_V1_Reply
            ) {
                var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                if let token { request += "Authorization: Bearer \(token)\r\n" }
                if let body {
                    request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                } else {
                    request += "\r\n"
                }
                let (status, text) = try http(address, request)
                return (Int(status.split(separator: " ")[1]) ?? 0, try Navigator_V1_Reply(jsonString: text))
            }
            let results = try await onThread { () throws -> [(Int, Navigator_V1_Reply)] in
                [
                    try call("GET", "/v1/sessions/s1", nil),
                    try call("GET", "/v1/sessions/s1", shell),
                    try call("GET", "/v1/sessions/s2", shell),
                    try call(
                        "POST", "/v1/intents?wait=true", shell,
                        body: #"{"id":"t1","session":"s1","path":[{"screen":"settings"}]}"#),
                    try call(
                        "POST", "/v1/intents?wait=true", producer,
                        body: #"{"id":"t2","session":"shop-1","path":[{"screen":"settings"}]}"#),
                    try call("GET", "/v1/sessions/s1", forged),
                    try call("GET", "/v1/sessions/s1", expired),
                    try call("GET", "/v1/sessions/s1", stranger),
                ]
            }
            #expect(results[0].0 == 401 && results[0].1.rejected.message.contains("bearer token is needed"))
            #expect(results[1].0 == 200 && results[1].1.snapshot.session == "s1", "\(results[1])")
            #expect(results[2].0 == 403 && results[2].1.rejected.code == .forbidden, "\(results[2])")
            #expect(results[3].0 == 403, "a shell may not publish: \(results[3])")
            #expect(results[4].0 == 200 && results[4].1.resolved.batch.seq == 1, "\(results[4])")
            #expect(results[5].0 == 401 && results[5].1.rejected.message.contains("not valid"), "\(results[5])")
            #expect(results[6].0 == 401 && results[6].1.rejected.message.contains("expired"), "\(results[6])")
            #expect(
                results[7].0 == 401 && results[7].1.rejected.message.contains("not in the access file"), "\(results[7])"
            )
            for (reason, token) in hostile {
                let (status, reply) = try await onThread { try call("GET", "/v1/sessions/s1", token) }
                #expect(status == 401 && reply.rejected.message.contains(reason), "\(reason): \(status) \(reply)")
                let refused = try await onThread {
                    try http(
                        address, "GET /v1/sessions/s1/stream?access_token=\(token) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                }
                #expect(refused.status == "HTTP/1.1 401 Unauthorized", "a stream with a token whose \(reason)")
            }
            // Still serving.
            let after = try await onThread { try call("GET", "/v1/sessions/s1", shell) }
            #expect(after.0 == 200)

            // The dashboard's data is the service's stats: an admin's to read, not a shell's.
            let ops = try await token("ops", "admin", [])
            let dashboard = try await onThread { () throws -> [(String, String)] in
                [
                    try http(address, "GET /v1/dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                    try http(
                        address,
                        "GET /v1/dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(shell)\r\n\r\n"),
                    try http(address, "GET /v1/dashboard?access_token=\(ops) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                    try http(address, "GET /dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                ]
            }
            #expect(dashboard[0].0 == "HTTP/1.1 401 Unauthorized", "\(dashboard[0])")
            #expect(
                dashboard[1].0 == "HTTP/1.1 403 Forbidden" && dashboard[1].1.contains("FORBIDDEN"), "\(dashboard[1])")
            #expect(dashboard[2].0 == "HTTP/1.1 200 OK" && dashboard[2].1.contains(#""landingWindowSeconds":10"#))
            #expect(dashboard[3].0 == "HTTP/1.1 200 OK" && dashboard[3].1.contains("/page/dashboard.js"))
            // Checking a route map is an admin's too.
            let check = #"{"yaml":"root: home\nscreens:\n  home: {}\n"}"#
            let checks = try await onThread {
                [
                    try call("POST", "/v1/routes/check", shell, body: check),
                    try call("POST", "/v1/routes/check", ops, body: check),
                    try call("POST", "/v1/routes/rollout/promote", shell),
                    try call("POST", "/v1/routes/rollout/promote", ops),
                ]
            }
            // So is a rollout (an admin gets as far as CONFLICT: none is under way).
            #expect(checks[2].0 == 403 && checks[2].1.rejected.code == .forbidden, "\(checks[2])")
            #expect(checks[3].0 == 409 && checks[3].1.rejected.code == .conflict, "\(checks[3])")
            #expect(checks[0].0 == 403 && checks[0].1.rejected.code == .forbidden, "\(checks[0])")
            #expect(checks[1].0 == 200 && checks[1].1.routesCheck.valid, "\(checks[1])")
            #expect(checks[1].1.routesCheck.changes.first?.subject == "root", "\(checks[1])")

            // A stream ends when its token expires, saying why (the token rides in the query, as
            // EventSource cannot set headers).
            // Made only now: a loaded machine may take seconds to get here.
            let short = try await token("alice-phone", "shell", ["s1"], lifetime: 3)
            let stream = try SSEClient(address, "/v1/sessions/s1/stream?access_token=\(short)")
            defer { stream.close() }
            // The same over WebSocket: the `closed` event, then close code 4001.
            let socket = try WebSocketClient(address, "/v1/sessions/s1/stream?access_token=\(short)")
            defer { socket.close() }
            try await stream.wait("a snapshot") { !$0.isEmpty }
            try await socket.wait("a snapshot") { !$0.isEmpty }
            let events = try await stream.wait("the closing event", timeout: .seconds(15)) {
                $0.contains { $0.event == "closed" }
            }
            #expect(events.last?.streamEvent?.closed.contains("token expired") == true)
            let deadline = ContinuousClock.now + .seconds(10)
            while !stream.responseEnded {
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("the stream stayed open after its token expired")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let messages = try await socket.wait("the closing event", timeout: .seconds(15)) {
                $0.contains { $0.hasPrefix(#"{"closed""#) }
            }
            #expect(messages.last?.contains("token expired") == true)
            while socket.closeCode == nil {
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("no close frame after the token expired")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(socket.closeCode == 4001)
            // Without a token the stream is refused.
            let refused = try await onThread { try http(address, "GET /v1/sessions/s1/stream HTTP/1.1\r\n\r\n") }
            #expect(refused.status == "HTTP/1.1 401 Unauthorized")
        }
    }

    @Test("reject codes map to HTTP statuses")
    func statuses() {
        #expect(HTTPAPI.status(of: .unknownScreen) == 400)
        #expect(HTTPAPI.status(of: .forbidden) == 403)
        #expect(HTTPAPI.status(of: .tooLarge) == 413)
        #expect(HTTPAPI.status(of: .overloaded) == 429)
        #expect(HTTPAPI.status(of: .staleEvent) == 409)
        #expect(HTTPAPI.status(of: .moved) == 503 && HTTPAPI.status(of: .unavailable) == 503)
        #expect(HTTPAPI.method(of: "/v1/sessions/x/events") == "POST")
        #expect(HTTPAPI.method(of: "/v1/sessions/") == nil)
    }
}

/// Claims as a token's issuer may write them, checked by nothing on the way out.
struct LooseClaims: JWTPayload {
    var sub: SubjectClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?
    var role: String
    var sessions: [String]
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
