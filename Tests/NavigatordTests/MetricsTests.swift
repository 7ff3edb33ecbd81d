import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine
@testable import NavigatorHTTP
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

@Suite("HTTP: metrics and health")
struct MetricsTests {
    @Test("/metrics speaks Prometheus text; /healthz and /readyz answer; others are refused")
    func endpoints() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let exchanges = try await onThread { () throws -> [(status: String, body: String)] in
                let client = try Client(endpoints)
                _ = try client.request(
                    .intent(wireIntent("m1", [ScreenContext("chat", ["conversationId": "1"])], session: "m")))
                _ = try client.request(.intent(wireIntent("m2", [ScreenContext("nope")], session: "m")))
                return [
                    try http(address, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                    try http(address, "GET /healthz HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /readyz HTTP/1.1\r\n\r\n"),
                    try http(address, "GET /nothing HTTP/1.1\r\n\r\n"),
                    try http(address, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
                ]
            }
            let metrics = exchanges[0]
            #expect(metrics.status == "HTTP/1.1 200 OK")
            #expect(metrics.body.contains(#"navigator_intents_total{outcome="resolved"} 1"#))
            #expect(metrics.body.contains(#"navigator_intents_total{outcome="rejected"} 1"#))
            #expect(metrics.body.contains(#"navigator_rejections_total{code="unknown_screen"} 1"#))
            #expect(metrics.body.contains("navigator_resolve_duration_seconds_bucket"))
            #expect(metrics.body.contains("navigator_sessions 1"))
            // Sessions at rest (PackingTests counts them as they are packed and unpacked).
            #expect(metrics.body.contains("navigator_sessions_packed "))
            #expect(metrics.body.contains(#"navigator_packed_session_bytes{of="blocks"} "#))
            #expect(metrics.body.contains(#"navigator_worker_queue_depth{worker="0"}"#))
            #expect(exchanges[1].status == "HTTP/1.1 200 OK" && exchanges[1].body == "ok\n")
            #expect(exchanges[2].status == "HTTP/1.1 200 OK" && exchanges[2].body == "ready\n")
            #expect(exchanges[3].status == "HTTP/1.1 404 Not Found")
            #expect(exchanges[4].status == "HTTP/1.1 405 Method Not Allowed")
        }
    }

    @Test(
        "landing by route: an acknowledged batch lands (time to land), a guard never met does not, an unknown screen is other"
    )
    func landingByRoute() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let body = try await onThread { () throws -> String in
                let client = try Client(endpoints)
                let now = WallClock.now()
                var chat = wireIntent("l1", [ScreenContext("chat", ["conversationId": "1"])], session: "land")
                chat.sentAtUnixNanos = now
                chat.source = "push"
                let resolved = try client.request(.intent(chat))
                #expect(resolved.resolved.batch.seq == 1, "\(resolved)")
                let ack = try client.request(.clientEvent(.init(.ack(1), session: "land", lastSeq: 1)))
                #expect(ack.eventApplied.seq == 1, "\(ack)")
                // Never signed in: parked behind its guard until its 100 ms are up.
                var edit = wireIntent("l2", [ScreenContext("editProfile")], session: "guarded", ttl: 100)
                edit.sentAtUnixNanos = now
                _ = try client.request(.intent(edit))
                _ = try client.request(.intent(wireIntent("l3", [ScreenContext("nope")], session: "land")))
                var metrics = ""
                let deadline = WallClock.now() + 10_000_000_000
                repeat {
                    metrics = try http(address, "GET /metrics HTTP/1.1\r\n\r\n").body
                    if metrics.contains(#"navigator_route_landing_ratio{route="editProfile"}"#) { break }
                    usleep(20_000)
                } while WallClock.now() < deadline
                return metrics
            }
            let lines = Set(body.split(separator: "\n").map(String.init))
            for expected in [
                #"navigator_route_intents_total{route="chat",outcome="resolved"} 1"#,
                #"navigator_source_intents_total{source="push",outcome="resolved"} 1"#,
                #"navigator_route_landed_total{route="chat"} 1"#,
                #"navigator_time_to_land_seconds_count{route="chat"} 1"#,
                #"navigator_time_to_publish_seconds_count{route="chat"} 1"#,
                #"navigator_route_landing_ratio{route="chat"} 1.0"#,
                #"navigator_route_intents_total{route="editProfile",outcome="parked"} 1"#,
                #"navigator_route_intents_total{route="editProfile",outcome="expired"} 1"#,
                #"navigator_route_not_landed_total{route="editProfile"} 1"#,
                #"navigator_route_landing_ratio{route="editProfile"} 0.0"#,
                #"navigator_route_rejections_total{route="other",code="unknown_screen"} 1"#,
                #"navigator_source_intents_total{source="path",outcome="rejected"} 1"#,
            ] {
                #expect(lines.contains(expected), "\(expected) is not in /metrics:\n\(body)")
            }
            #expect(!body.contains("unspecified"))
        }
    }

    @Test("a parked intent released onto its screen already shown lands; its release is counted once")
    func releasedOntoShown() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let (outcomes, body) = try await onThread { () throws -> ([String], String) in
                let client = try Client(endpoints)
                let call = ScreenContext("incomingCall", ["callId": "5f0c4c1e-2b7d-4d5f-a1e3-000000000001"])
                let chat = ScreenContext("chat", ["conversationId": "1"])
                // A blocking call is up: chat 1 waits behind it; a critical chat 1 dismisses the
                // call and shows chat 1, which releases the first onto a screen already shown.
                let replies = [
                    try client.request(.intent(wireIntent("r1", [call], session: "rel"))),
                    try client.request(.intent(wireIntent("r2", [chat], session: "rel"))),
                    try client.request(.intent(wireIntent("r3", [chat], session: "rel", priority: .critical))),
                ]
                return (
                    replies.map { $0.resolved.hasBatch ? "resolved" : $0.parked.reason.isEmpty ? "other" : "parked" },
                    try http(address, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").body
                )
            }
            #expect(outcomes == ["resolved", "parked", "resolved"])
            let lines = Set(body.split(separator: "\n").map(String.init))
            for expected in [
                #"navigator_route_intents_total{route="chat",outcome="parked"} 1"#,
                #"navigator_route_intents_total{route="chat",outcome="released"} 1"#,
                #"navigator_route_intents_total{route="chat",outcome="resolved"} 1"#,
                // The released one landed at once (nothing to acknowledge); r3's batch waits for
                // an ack that never comes within the test.
                #"navigator_route_landed_total{route="chat"} 1"#,
            ] {
                #expect(lines.contains(expected), "\(expected) is not in /metrics:\n\(body)")
            }
        }
    }

    @Test("the traceparent header is the intent's traceparent: kept with it while parked; a malformed one is counted")
    func traceparentHeader() async throws {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let configure: (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }
        try await withNavigatord(configure) { server, _ in
            let address = try #require(server.httpAddress)
            let (parked, snapshot, metrics) = try await onThread { () throws -> (String, String, String) in
                func post(_ body: String, _ traceparent: String) throws -> (status: String, body: String) {
                    try http(
                        address,
                        "POST /v1/intents?wait=true HTTP/1.1\r\nHost: 127.0.0.1\r\ntraceparent: \(traceparent)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                    )
                }
                let parked = try post(#"{"id":"h1","session":"tp","path":[{"screen":"editProfile"}]}"#, parent)
                _ = try post(#"{"id":"h2","session":"tp2","path":[{"screen":"settings"}]}"#, "not-a-traceparent")
                return (
                    parked.body, try http(address, "GET /v1/sessions/tp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").body,
                    try http(address, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").body
                )
            }
            #expect(parked.contains("parked"), "\(parked)")
            #expect(snapshot.contains(#""traceparent":"\#(parent)""#), "\(snapshot)")
            #expect(metrics.contains("navigator_traceparent_invalid_total 1"))
        }
    }

    @Test("idle connections hold nothing up: /healthz answers while ten others sit open")
    func idleConnections() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let (health, ready) = try await onThread { () throws -> (String, String) in
                let idle = try (0..<10).map { _ in try tcpConnect(address) }
                defer { for fd in idle { close(fd) } }
                return (
                    try http(address, "GET /healthz HTTP/1.1\r\n\r\n").status,
                    try http(address, "GET /readyz HTTP/1.1\r\n\r\n").status
                )
            }
            #expect(health == "HTTP/1.1 200 OK")
            #expect(ready == "HTTP/1.1 200 OK")
        }
    }

    @Test("HTTP addresses: host:port, [ipv6]:port, localhost; anything else is refused saying the form")
    func addresses() throws {
        #expect(try HTTPEndpoint.parse("127.0.0.1:9090") == ("127.0.0.1", 9090))
        #expect(try HTTPEndpoint.parse("[::1]:0") == ("::1", 0))
        #expect(try HTTPEndpoint.parse("[::]:9090") == ("::", 9090))
        #expect(try HTTPEndpoint.parse("localhost:80") == ("127.0.0.1", 80))
        for bad in ["9090", ":9090", "host:port", "::1:99999", "[::1:80"] {
            #expect(throws: HTTPServerError.self) { try HTTPEndpoint.parse(bad) }
        }
    }
}
