import Foundation
import Logging
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine
@testable import navigatord

/// The traces of intents (issue 32): navigatord started as a user would, with the standard
/// OTEL_ variables pointing at an OTLP/HTTP receiver the test runs, and the spans it exports.
@Suite("Traces")
struct TracesTests {
    static let producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let producerSpan = "00f067aa0ba902b7"
    static let parkedTrace = "0af7651916cd43dd8448eb211c80319c"
    static let unsampledTrace = "b7ad6b7169203331b7ad6b7169203331"
    static let releasedTrace = "5b8aa5a2d2c872e8321cf37308d69df2"

    @Test(
        "one intent from the producer's span to the shell's ack, a parked one to its expiry, an unsampled one not at all"
    )
    func spansOfIntents() async throws {
        let receiver = try OTLPReceiver()
        defer { receiver.stop() }
        let daemon = try Daemon(
            dataDirectory: temporaryDirectory("navtrace"),
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                // Spans go out every 50 ms rather than every 5 s.
                "OTEL_BSP_SCHEDULE_DELAY": "50",
            ])
        defer { daemon.reap() }
        let endpoints = try await daemon.endpoints()
        #expect(daemon.log.contains("traces=otlp \(receiver.endpoint)/v1/traces"), "\(daemon.log)")

        try await onThread {
            let client = try Client(endpoints)
            let now = WallClock.now()
            // The producer does not sample this one: navigatord follows its decision.
            var unsampled = wireIntent("u1", [ScreenContext("chat", ["conversationId": "7"])], session: "traced")
            unsampled.sentAtUnixNanos = now
            unsampled.traceparent = "00-\(Self.unsampledTrace)-\(Self.producerSpan)-00"
            _ = try client.request(.intent(unsampled))
            // Sampled by its producer: resolved, published, and acknowledged by the shell.
            var chat = wireIntent("t1", [ScreenContext("chat", ["conversationId": "42"])], session: "traced")
            chat.sentAtUnixNanos = now
            chat.source = "push"
            chat.traceparent = "00-\(Self.producerTrace)-\(Self.producerSpan)-01"
            let resolved = try client.request(.intent(chat))
            #expect(resolved.resolved.batch.seq == 2, "\(resolved)")
            let ack = try client.request(.clientEvent(.init(.ack(2), session: "traced", lastSeq: 2)))
            #expect(ack.eventApplied.seq == 2, "\(ack)")
            // Never signed in: parked behind its guard until its 100 ms are up.
            var edit = wireIntent("t2", [ScreenContext("editProfile")], session: "guarded", ttl: 100)
            edit.sentAtUnixNanos = now
            edit.traceparent = "00-\(Self.parkedTrace)-\(Self.producerSpan)-01"
            _ = try client.request(.intent(edit))
            // Parked behind the same guard until the shell says the user signed in: released,
            // published, acknowledged.
            var later = wireIntent("t3", [ScreenContext("editProfile")], session: "signin", ttl: 60_000)
            later.sentAtUnixNanos = now
            later.traceparent = "00-\(Self.releasedTrace)-\(Self.producerSpan)-01"
            let parked = try client.request(.intent(later))
            #expect(!parked.parked.reason.isEmpty, "\(parked)")
            let signedIn = try client.request(
                .clientEvent(
                    .init(.conditions(["authenticated": true]), session: "signin", lastSeq: parked.parked.redirect.seq))
            )
            #expect(signedIn.eventApplied.releasedIntentIds == ["t3"], "\(signedIn)")
            let seq = signedIn.eventApplied.seq
            _ = try client.request(.clientEvent(.init(.ack(seq), session: "signin", lastSeq: seq)))
        }

        let spans = try await receiver.wait("the landed intent's six spans and the expired one's settling") { spans in
            spans.filter { $0.traceID == Self.producerTrace }.count >= 6
                && spans.contains { $0.traceID == Self.parkedTrace && $0.name == "navigator.intent" }
                && spans.contains { $0.traceID == Self.releasedTrace && $0.name == "navigator.intent" }
        }
        #expect(receiver.problems.isEmpty, "\(receiver.problems)")
        #expect(receiver.requests.allSatisfy { $0.hasPrefix("POST /v1/traces HTTP/1.1 application/x-protobuf") })

        // The landed intent: one span of navigatord under the producer's, the rest under it.
        let landed = spans.filter { $0.traceID == Self.producerTrace }
        let names = landed.map(\.name).sorted()
        #expect(
            names == [
                "navigator.intent", "navigator.land", "navigator.persist", "navigator.publish", "navigator.receive",
                "navigator.resolve",
            ], "\(landed)")
        let intent = try #require(landed.first { $0.name == "navigator.intent" })
        #expect(intent.parentSpanID == Self.producerSpan)
        #expect(intent.kind == 5)  // consumer
        #expect(intent.resource["service.name"] == "navigatord")
        #expect(intent.attributes["navigator.session"] == "traced")
        #expect(intent.attributes["navigator.intent.id"] == "t1")
        #expect(intent.attributes["navigator.intent.source"] == "push")
        #expect(intent.attributes["navigator.route"] == "chat")
        #expect(intent.attributes["navigator.outcome"] == "resolved")
        #expect(intent.attributes["navigator.landed"] == "true")
        #expect(intent.attributes["navigator.settled"] == "acknowledged")
        #expect(intent.attributes["navigator.seq"] == "2")
        #expect(intent.statusCode != 2)
        for child in landed where child.name != "navigator.intent" {
            #expect(child.parentSpanID == intent.spanID, "\(child)")
            #expect(child.start >= intent.start && child.end >= child.start, "\(child)")
        }
        func span(_ name: String) throws -> OTLPReceiver.Span { try #require(landed.first { $0.name == name }) }
        let receive = try span("navigator.receive")
        let resolve = try span("navigator.resolve")
        let publish = try span("navigator.publish")
        let land = try span("navigator.land")
        #expect(receive.start == intent.start && receive.end <= resolve.start)
        #expect(resolve.attributes["navigator.outcome"] == "resolved")
        #expect(resolve.attributes["navigator.decisive_step"] == "transition", "\(resolve)")
        #expect(resolve.attributes["navigator.decisive_detail"]?.isEmpty == false)
        #expect(resolve.attributes["navigator.command_count"].flatMap(Int.init).map { $0 > 0 } == true)
        #expect(publish.attributes["navigator.seq"] == "2" && publish.start >= resolve.end)
        #expect(try span("navigator.persist").attributes["navigator.store"] == "sqlite")
        // The shell's ack closes the trace.
        #expect(land.start == publish.end && land.attributes["navigator.ack_seq"] == "2")
        #expect(land.end == intent.end)

        // The parked intent: parked, then expired (an error), its trace settled there.
        let parked = spans.filter { $0.traceID == Self.parkedTrace }
        let parkedIntent = try #require(parked.first { $0.name == "navigator.intent" })
        let park = try #require(parked.first { $0.name == "navigator.park" }, "\(parked)")
        #expect(parkedIntent.parentSpanID == Self.producerSpan)
        #expect(parkedIntent.attributes["navigator.outcome"] == "parked")
        #expect(parkedIntent.attributes["navigator.settled"] == "expired")
        #expect(parkedIntent.attributes["navigator.landed"] == "false")
        #expect(parkedIntent.statusCode == 2 && parkedIntent.statusMessage.contains("expired"), "\(parkedIntent)")
        #expect(park.parentSpanID == parkedIntent.spanID && park.statusCode == 2, "\(park)")
        #expect(park.attributes["navigator.park.reason"]?.isEmpty == false, "\(park)")
        // Expired no sooner than its 100 ms after it was parked, which is after the intent was
        // taken (the park span itself starts once the resolution is recorded: under load, later
        // than the parking's own clock reading, so its length may be a little under the TTL).
        #expect(park.end == parkedIntent.end && parkedIntent.end - parkedIntent.start >= 100_000_000, "\(park)")

        // The released intent: its login redirect published, parked, released onto editProfile,
        // published, acknowledged.
        let released = spans.filter { $0.traceID == Self.releasedTrace }
        let releasedIntent = try #require(released.first { $0.name == "navigator.intent" })
        #expect(
            released.map(\.name).sorted() == [
                "navigator.intent", "navigator.land", "navigator.park", "navigator.persist", "navigator.persist",
                "navigator.publish", "navigator.publish", "navigator.receive", "navigator.resolve",
            ], "\(released)")
        #expect(released.allSatisfy { $0.name == "navigator.intent" || $0.parentSpanID == releasedIntent.spanID })
        #expect(releasedIntent.attributes["navigator.settled"] == "acknowledged")
        #expect(releasedIntent.attributes["navigator.landed"] == "true" && releasedIntent.statusCode != 2)
        let releasedPark = try #require(released.first { $0.name == "navigator.park" })
        #expect(releasedPark.attributes["navigator.park.result"] == "released" && releasedPark.statusCode != 2)
        let publishes = released.filter { $0.name == "navigator.publish" }.sorted { $0.start < $1.start }
        #expect(publishes.first?.attributes["navigator.redirect"] == "true", "\(publishes)")
        #expect(publishes.last.map { $0.start >= releasedPark.end - 1_000_000_000 } == true)

        // The producer's unsampled intent (sent first, exported first if at all) has no spans.
        #expect(!spans.contains { $0.traceID == Self.unsampledTrace })

        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0, "\(daemon.log)")
    }

    @Test("producers marking every intent sampled get maxTracedIntentsPerSecond traced, no more")
    func budget() async throws {
        let receiver = try OTLPReceiver()
        defer { receiver.stop() }
        let daemon = try Daemon(
            dataDirectory: temporaryDirectory("navtracebudget"), extra: ["--max-traced-intents-per-second", "1"],
            environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"])
        defer { daemon.reap() }
        let endpoints = try await daemon.endpoints()
        try await onThread {
            let client = try Client(endpoints)
            // Rejected at once (no such screen), so each trace ends right away; one session, so
            // one worker, whose budget is 1 a second.
            for index in 0..<5 {
                var intent = wireIntent("b\(index)", [ScreenContext("nope")], session: "budget")
                intent.traceparent = "00-\(String(repeating: "\(index + 1)", count: 32))-\(Self.producerSpan)-01"
                _ = try client.request(.intent(intent))
            }
            // Without a traceparent: sampled by navigatord's own sampler, outside the budget;
            // its span goes out after the five's.
            _ = try client.request(.intent(wireIntent("marker", [ScreenContext("nope")], session: "budget")))
        }
        let spans = try await receiver.wait("the marker intent's span") { spans in
            spans.contains { $0.name == "navigator.intent" && $0.attributes["navigator.intent.id"] == "marker" }
        }
        let traced = spans.filter { $0.name == "navigator.intent" && $0.parentSpanID == Self.producerSpan }
        #expect((1...2).contains(traced.count), "\(traced)")  // 1, and 1 more if a second passed
        #expect(traced.allSatisfy { $0.attributes["navigator.settled"] == "rejected" && $0.statusCode == 2 })
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0, "\(daemon.log)")
    }

    @Test("the OTEL_ variables: off without an endpoint, on with one, refused for what navigatord cannot do")
    func environment() throws {
        let logger = Logger(label: "test")
        #expect(try Telemetry.fromEnvironment([:], logger: logger) == nil)
        #expect(try Telemetry.fromEnvironment(["OTEL_TRACES_SAMPLER": "always_on"], logger: logger) == nil)
        let on = try #require(
            try Telemetry.fromEnvironment(
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/",
                    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                    "OTEL_TRACES_SAMPLER_ARG": "0.01",
                ], logger: logger))
        #expect(on.summary == "otlp http://127.0.0.1:4318/v1/traces, sampler parentbased_traceidratio 0.01")
        let defaulted = try #require(try Telemetry.fromEnvironment(["OTEL_TRACES_EXPORTER": "otlp"], logger: logger))
        #expect(defaulted.summary == "otlp http://localhost:4318/v1/traces, sampler parentbased_always_on")
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"]
        #expect(
            try Telemetry.fromEnvironment(endpoint.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }, logger: logger)
                == nil)
        #expect(
            try Telemetry.fromEnvironment(endpoint.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }, logger: logger)
                == nil)
        #expect {
            _ = try Telemetry.fromEnvironment(
                endpoint.merging(["OTEL_TRACES_EXPORTER": "zipkin"]) { $1 }, logger: logger)
        } throws: { "\($0)".contains("OTEL_TRACES_EXPORTER is zipkin; navigatord exports traces over OTLP only") }
        #expect {
            _ = try Telemetry.fromEnvironment(
                endpoint.merging(["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]) { $1 }, logger: logger)
        } throws: { "\($0)".contains("OTEL_EXPORTER_OTLP_PROTOCOL is grpc; navigatord exports over OTLP/HTTP") }
    }
}
