import NavigatorCore
import Testing

@testable import NavigatorEngine

@Suite("Landing: batches settled once, as landed or not, within bounds")
struct LandingTests {
    let second: Int64 = 1_000_000_000

    @Test("outcome counts: each outcome in its own place, iterated in order, only those counted")
    func outcomeCounts() {
        var counts = RouteMetrics.OutcomeCounts()
        #expect(Array(counts).isEmpty)
        for (offset, outcome) in RouteMetrics.Outcome.allCases.enumerated() {
            #expect(outcome.index == offset)
            counts[outcome] += UInt64(offset % 3)  // every third stays 0
        }
        let expected = RouteMetrics.Outcome.allCases.enumerated().filter { $0.offset % 3 != 0 }.map {
            ($0.element, UInt64($0.offset % 3))
        }
        #expect(Array(counts).map(\.0) == expected.map(\.0))
        #expect(Array(counts).map(\.1) == expected.map(\.1))
        counts[.refused] -= 1  // counted once (its place, 7, is 1 modulo 3)
        #expect(counts[.refused] == 0 && !Array(counts).contains { $0.0 == .refused })
    }

    @Test("an ack lands the batches up to its seq; the rest are not landed once the window passes")
    func ackAndSweep() {
        let metrics = RouteMetrics(landingWindow: .seconds(10))
        var book = LandingBook()
        for seq in 1...3 as ClosedRange<UInt64> {
            book.published(session: "s", seq: seq, route: "chat", map: "m1", origin: 100 * second, metrics: metrics)
        }
        book.acknowledged(session: "s", seq: 2, now: 100 * second + 20_000_000, metrics: metrics)
        #expect(book.count == 1)
        var chat = metrics.tallies["chat"]!
        #expect(chat.landed == 2 && chat.notLanded == 0)
        #expect(chat.landingTimes[4] == 2)  // 20 ms: in the 25 ms bucket
        book.sweep(now: 109 * second, metrics: metrics)
        #expect(book.count == 1)  // not yet
        book.sweep(now: 111 * second, metrics: metrics)
        #expect(book.count == 0 && book.sessions.isEmpty)
        chat = metrics.tallies["chat"]!
        #expect(chat.landed == 2 && chat.notLanded == 1 && chat.landingRatio == 2.0 / 3.0)
        // An ack for a batch already settled changes nothing.
        book.acknowledged(session: "s", seq: 3, now: 112 * second, metrics: metrics)
        #expect(metrics.tallies["chat"] == chat)
    }

    @Test("an ack after the window still measures the time to land, but the intent did not land in time")
    func lateAck() {
        let metrics = RouteMetrics(landingWindow: .seconds(10))
        var book = LandingBook()
        book.published(session: "s", seq: 7, route: "chat", map: "m1", origin: 0, metrics: metrics)
        book.acknowledged(session: "s", seq: 9, now: 12 * second, metrics: metrics)
        let chat = metrics.tallies["chat"]!
        #expect(chat.landed == 0 && chat.notLanded == 1)
        #expect(chat.landingTimes[RouteMetrics.latencyBuckets.firstIndex(of: .seconds(30))!] == 1)
    }

    @Test("bounds: the oldest beyond a session's 16 and beyond the book's total are settled as not landed")
    func bounds() {
        let metrics = RouteMetrics(landingWindow: .seconds(10))
        var book = LandingBook()
        for seq in 1...(UInt64(LandingBook.maxPerSession) + 1) {
            book.published(session: "one", seq: seq, route: "chat", map: "m1", origin: Int64(seq), metrics: metrics)
        }
        #expect(book.count == LandingBook.maxPerSession)
        #expect(metrics.tallies["chat"]!.notLanded == 1 && metrics.evictions == 1)
        // The first left: acknowledging it changes nothing; the second is the oldest kept.
        book.acknowledged(session: "one", seq: 1, now: 100, metrics: metrics)
        #expect(metrics.tallies["chat"]!.landed == 0)

        let extra = 5
        for index in 0..<(LandingBook.maxTotal + extra) {
            book.published(
                session: "s\(index)", seq: 1, route: "home", map: "m1", origin: 1_000 + Int64(index), metrics: metrics)
        }
        #expect(book.count == LandingBook.maxTotal)
        // The oldest went first: session "one"'s 16, then the first of the others.
        #expect(book.sessions["one"] == nil)
        #expect(metrics.tallies["chat"]!.notLanded == 1 + UInt64(LandingBook.maxPerSession))
        #expect(metrics.tallies["home"]!.notLanded == UInt64(extra))
        #expect(metrics.evictions == 1 + UInt64(LandingBook.maxPerSession + extra))
        #expect(book.sessions["s\(extra - 1)"] == nil && book.sessions["s\(extra)"] != nil)
    }

    @Test(
        "labels: screens the route map lacks are other; sources beyond the first 32, or longer than 64 bytes, are other"
    )
    func labels() {
        let metrics = RouteMetrics(landingWindow: .seconds(10))
        let long = String(repeating: "x", count: 65)
        #expect(metrics.source(of: Intent(id: "i", session: "s", target: .path([]), source: long)) == "other")
        let longest = String(repeating: "x", count: 64)
        #expect(metrics.source(of: Intent(id: "i", session: "s", target: .path([]), source: longest)) == longest)
        #expect(RouteMetrics.route("chat", map: .demo) == "chat")
        #expect(RouteMetrics.route("no-such-screen", map: .demo) == "other")
        #expect(RouteMetrics.route(nil, map: .demo) == "other")
        #expect(
            RouteMetrics.route(of: Intent(id: "u", session: "s", target: .url("app://chat/1")), map: .demo) == "other")
        let sources = (1..<41).map { index in
            metrics.source(of: Intent(id: "i", session: "s", target: .path([]), source: "producer-\(index)"))
        }
        // The 64-byte one took a label: 31 more.
        #expect(sources[..<31].elementsEqual((1..<32).map { "producer-\($0)" }))
        #expect(sources[31...].allSatisfy { $0 == "other" })
        #expect(
            metrics.source(of: Intent(id: "i", session: "s", target: .path([]), source: "producer-3")) == "producer-3")
        #expect(metrics.source(of: Intent(id: "i", session: "s", target: .url("app://x"))) == "url")
        #expect(metrics.source(of: Intent(id: "i", session: "s", target: .path([]))) == "path")
    }
}
