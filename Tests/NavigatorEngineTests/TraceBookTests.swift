import NavigatorCore
import Testing
import Tracing

@testable import NavigatorEngine

@Suite("Traces: what a worker keeps open is bounded and settled")
struct TraceBookTests {
    let second: Int64 = 1_000_000_000

    func intent(_ id: String, traceparent: String = "") -> Intent {
        var intent = Intent(id: id, session: "s", target: .path([ScreenContext("chat")]))
        intent.traceparent = traceparent
        intent.sentAt = 1
        return intent
    }

    func trace() -> IntentTrace { IntentTrace(tracer: NoOpTracer(), span: NoOpTracer.NoOpSpan(context: .topLevel)) }

    @Test("the budget lets so many traces a second through, and refills with time")
    func budget() {
        var budget = TraceBudget(perSecond: 3)
        let taken = (0..<5).map { _ in budget.take(at: 10 * second) }
        #expect(taken == [true, true, true, false, false])
        let refilled = budget.take(at: 10 * second + second / 3 + 1)  // a third of a second: one more
        let empty = budget.take(at: 10 * second + second / 3 + 2)
        #expect(refilled && !empty)
        let later = (0..<4).map { _ in budget.take(at: 20 * second) }
        #expect(later == [true, true, true, false])  // full again, not more
    }

    @Test("a traceparent's sampled flag is the lowest bit of its flags")
    func sampledFlag() {
        let base = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"
        #expect(intent("a", traceparent: base + "01").traceparentSaysSampled)
        #expect(intent("a", traceparent: base + "03").traceparentSaysSampled)
        #expect(!intent("a", traceparent: base + "00").traceparentSaysSampled)
        #expect(!intent("a", traceparent: base + "02").traceparentSaysSampled)
        #expect(!intent("a").traceparentSaysSampled)
    }

    @Test("parked intents' traces: taken on release, swept once past their expiry, bounded, settled at the end")
    func parked() {
        var book = ParkedTraces()
        let a = book.keep(trace(), session: "s", intent: intent("a"), expiresAt: 20 * second, at: 10 * second)
        let b = book.keep(trace(), session: "s", intent: intent("b"), expiresAt: 60 * second, at: 10 * second)
        #expect(a && b)
        let first = book.take(session: "s", intent: intent("a"))
        let again = book.take(session: "s", intent: intent("a"))
        #expect(first != nil && again == nil)
        let c = book.keep(trace(), session: "gone", intent: intent("c"), expiresAt: 20 * second, at: 10 * second)
        #expect(c)
        // "c" left with its session (forgotten, handed over): swept once past expiry and grace.
        book.sweep(now: 21 * second)
        #expect(book.traces.count == 2)
        book.sweep(now: 26 * second)
        #expect(book.traces.count == 2)  // the last sweep was under ten seconds ago
        book.sweep(now: 31 * second + ParkedTraces.grace)
        let swept = book.take(session: "gone", intent: intent("c"))
        #expect(book.traces.count == 1 && swept == nil)
        for index in 1..<ParkedTraces.maxParked {
            _ = book.keep(trace(), session: "s\(index)", intent: intent("x"), expiresAt: 99 * second, at: 40 * second)
        }
        #expect(book.traces.count == ParkedTraces.maxParked)
        let kept = book.keep(trace(), session: "one more", intent: intent("x"), expiresAt: 99 * second, at: 40 * second)
        #expect(!kept)
        book.settleAll(at: 50 * second)
        #expect(book.traces.isEmpty)
    }
}
