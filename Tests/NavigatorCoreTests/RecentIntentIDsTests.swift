import NavigatorCore
import TestThreads
import Testing

@Suite("Remembered intent ids")
struct RecentIntentIDsTests {
    static let second: Int64 = 1_000_000_000
    static let key = DedupKey(k0: 0x0706_0504_0302_0100, k1: 0x0F0E_0D0C_0B0A_0908)

    @Test("SipHash-2-4 gives the reference vectors (key 00..0f, messages 00..n-1)")
    func sipHashVectors() {
        #expect(Self.key.hash([UInt8]()) == 0x726F_DB47_DD0E_0E31)
        #expect(Self.key.hash([0]) == 0x74F8_39C5_93DC_67FD)
        #expect(Self.key.hash(Array(0..<15)) == 0xA129_CA61_49BE_45E5)
    }

    @Test("an id is seen within the window and forgotten after it, to the tick")
    func window() {
        var recent = RecentIntentIDs()
        let start: Int64 = 1_700_000_000 * Self.second
        let window = 600 * Self.second
        let hash = Self.key.intentIDHash("n1")
        recent.insert(hash, now: start, window: window, capacity: 256)
        #expect(recent.seen(hash, within: window, now: start + 1) == start)
        // Remembered at least the window, whatever the time within a tick.
        var later = recent
        later.insert(Self.key.intentIDHash("n3"), now: start + 1, window: window, capacity: 256)
        #expect(later.seen(Self.key.intentIDHash("n3"), within: window, now: start + window) != nil)
        #expect(recent.seen(hash, within: window, now: start + window - 1) != nil)
        #expect(recent.seen(hash, within: window, now: start + window + RecentIntentIDs.tick) == nil)
        #expect(recent.seen(Self.key.intentIDHash("n2"), within: window, now: start + 1) == nil)
        recent.prune(now: start + window + RecentIntentIDs.tick, window: window)
        #expect(recent.isEmpty)
    }

    @Test("at capacity the oldest goes first")
    func capacity() {
        var recent = RecentIntentIDs()
        let start: Int64 = 1_700_000_000 * Self.second
        for index in 0..<10 {
            recent.insert(
                Self.key.intentIDHash("i\(index)"), now: start + Int64(index) * Self.second, window: 600 * Self.second,
                capacity: 4)
        }
        #expect(recent.count == 4)
        let now = start + 10 * Self.second
        let kept = (0..<10).filter {
            recent.seen(Self.key.intentIDHash("i\($0)"), within: 600 * Self.second, now: now) != nil
        }
        #expect(kept == [6, 7, 8, 9])
    }

    @Test("a clock stepped back keeps the list oldest first, and every id is remembered at least the window")
    func clockSteppedBack() {
        var recent = RecentIntentIDs()
        let start: Int64 = 1_700_000_000 * Self.second
        let window = 600 * Self.second
        let (first, second, third) = (
            Self.key.intentIDHash("a"), Self.key.intentIDHash("b"), Self.key.intentIDHash("c")
        )
        recent.insert(first, now: start, window: window, capacity: 256)
        recent.insert(second, now: start + 100 * Self.second, window: window, capacity: 256)
        recent.insert(third, now: start + 50 * Self.second, window: window, capacity: 256)  // the clock went back
        let ticks = recent.entries.map { $0 & 0xFFFF }
        #expect(ticks == ticks.sorted())
        #expect(recent.seen(third, within: window, now: start + 50 * Self.second + window - 1) != nil)
        // The first's window is over: it goes from the front; the others stay.
        recent.prune(now: start + window + RecentIntentIDs.tick, window: window)
        #expect(recent.count == 2)
        #expect(recent.seen(first, within: window, now: start + window + RecentIntentIDs.tick) == nil)
        // Kept as seen when the second was: both go after its window.
        recent.prune(now: start + 100 * Self.second + window + RecentIntentIDs.tick, window: window)
        #expect(recent.isEmpty)
    }

    /// Against an exact model (a dictionary of strings and times) over days of random arrivals
    /// with windows up to a day: every answer agrees, except within a tick of the window's end.
    @Test("agrees with an exact model over days of random arrivals", arguments: [60, 600, 86_400] as [Int64])
    func model(windowSeconds: Int64) async throws {
        try await offPool {
            var random = SplitMix64(seed: UInt64(windowSeconds))
            let window = windowSeconds * Self.second
            var recent = RecentIntentIDs()
            var exact: [String: Int64] = [:]
            var now: Int64 = 1_700_000_000 * Self.second
            for _ in 0..<20_000 {
                now += Int64(random.next() % UInt64(windowSeconds * Self.second / 50))
                let id = "id-\(random.next() % 300)"
                let hash = Self.key.intentIDHash(id)
                let modelSeen = exact[id].map { now - $0 < window } ?? false
                let seen = recent.seen(hash, within: window, now: now)
                if let at = exact[id], abs((now - at) - window) <= RecentIntentIDs.tick {
                    // Within a tick of the window's end: either answer is right.
                } else {
                    #expect((seen != nil) == modelSeen, "id \(id) at \(now)")
                }
                if seen == nil {
                    recent.insert(hash, now: now, window: window, capacity: 1_000)
                    exact[id] = now
                }
            }
            #expect(recent.count <= 1_000)
        }
    }
}
