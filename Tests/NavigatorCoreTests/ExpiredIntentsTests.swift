import Foundation
import Testing

@testable import NavigatorCore

/// ``ExpiredIntents`` packs a session's recently expired intents into one buffer. Over random
/// intents (every kind of reason, empty, long and non-ASCII strings, times before 1970 and at
/// the ends of Int64, a clock that steps back, waits of any length or negative, node ids of any
/// size) and random runs of what the resolver does with them — add the newly expired keeping the
/// newest 8, forget those past a cutoff — it holds what the array it replaced held, in the same
/// order, equal where the arrays are equal and not where they differ, and encodes to the same
/// JSON.
@Suite("Recently expired intents, packed")
struct ExpiredIntentsTests {
    struct Intents {
        var random: SeededRandom
        var clock: Int64 = 0

        mutating func text() -> String {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: ""
            case 1: "login"
            case 2: "\(random.next() | 1 << 63)-\(random.next())"  // as long as a UUID, or longer
            case 3: "écran-\(Int.random(in: 0..<1_000, using: &random))-🚀"
            case 4: String(repeating: "x", count: Int.random(in: 100..<400, using: &random))
            default: "chat-\(Int.random(in: 0..<100, using: &random))"
            }
        }

        mutating func reason() -> ParkReason {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: .notReady
            case 1: .guardUnmet(condition: text(), redirect: text())
            default:
                .blocked(
                    by: NodeID(rawValue: [0, 5, 300, UInt64.max, NodeID.clientBit | 7].randomElement(using: &random)!),
                    screen: text())
            }
        }

        /// One expiring now (time moves forward, sometimes back: a wall clock; sometimes several
        /// expire at once).
        mutating func intent() -> ExpiredIntent {
            clock &+= [0, 1, 1_000_000_000, 70_000_000_000, -30_000_000_000].randomElement(using: &random)!
            let waited = [0, 1, 127, 128, 300_000_000_000, -5, Int64.max, Int64.min].randomElement(using: &random)!
            return ExpiredIntent(
                intentID: text(), source: text(), reason: reason(), parkedAt: clock &- waited, expiredAt: clock)
        }
    }

    @Test("it holds, compares, hashes and encodes what the array held", arguments: 0..<8)
    func sameAsArray(seed: UInt64) throws {
        var intents = Intents(random: SeededRandom(seed: seed))
        // Times before 1970 too.
        intents.clock = seed.isMultiple(of: 2) ? 1_700_000_000_000_000_000 : -5_000_000_000
        var array: [ExpiredIntent] = []
        var packed = ExpiredIntents()
        var forgot = 0
        for _ in 0..<400 {
            if Int.random(in: 0..<4, using: &intents.random) == 0 {
                // The window's cutoff: the oldest, one of them, or past them all.
                let cutoff =
                    (array.map(\.expiredAt).randomElement(using: &intents.random) ?? 0)
                    &- Int64.random(in: -1...1, using: &intents.random)
                let before = array.count
                array.removeAll { $0.expiredAt <= cutoff }
                let went = packed.forget(expiredAtOrBefore: cutoff)
                #expect(went == (array.count != before))
                if went { forgot += 1 }
            } else {
                let new = (0..<Int.random(in: 0...3, using: &intents.random)).map { _ in intents.intent() }
                array += new
                if array.count > ExpiredIntent.kept { array.removeFirst(array.count - ExpiredIntent.kept) }
                packed.append(new, keeping: ExpiredIntent.kept)
            }
            #expect(Array(packed) == array)
            #expect(packed.count == array.count && packed.isEmpty == array.isEmpty)
            #expect(packed.first == array.first)
            let rebuilt = ExpiredIntents(array)
            #expect(rebuilt == packed && rebuilt.hashValue == packed.hashValue)
            // The entries' views walk every entry in order (their bytes against SwiftProtobuf's:
            // StoredSessionEncoderTests).
            var views: [ExpiredIntent] = []
            packed.forEachEntry { views.append($0.intent) }
            #expect(views == array)
        }
        #expect(forgot > 10)
        // Codable: the JSON an array of expired intents makes, and back.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try encoder.encode(packed)
        #expect(json == (try encoder.encode(array)))
        #expect(try JSONDecoder().decode(ExpiredIntents.self, from: json) == packed)
        // Two different lists never compare equal.
        if let last = array.last {
            var changed = array
            changed[changed.count - 1].source += "."
            #expect(ExpiredIntents(changed) != packed)
            changed = array
            changed[changed.count - 1].parkedAt = last.parkedAt &- 1
            #expect(ExpiredIntents(changed) != packed)
        }
    }

    @Test("eight expired intents with UUID ids take their text's bytes, not 16 places of 88 bytes")
    func size() {
        let intents = (0..<8).map { index in
            ExpiredIntent(
                intentID: "6f1c2a9e-3b7d-4e2f-9a41-0c5d8e7f6a2\(index)", source: "push",
                reason: .guardUnmet(condition: "authenticated", redirect: "login"),
                parkedAt: 1_700_000_000_000_000_000, expiredAt: 1_700_000_300_000_000_000)
        }
        var packed = ExpiredIntents()
        for intent in intents { packed.append([intent], keeping: ExpiredIntent.kept) }
        // Each: its length (1), expired at (8), waited (6: 300 s in ns, 39 bits), the kind (1), the
        // condition (1 + 13) and redirect (1 + 5), the id (1 + 36), the source (1 + 4).
        #expect(packed.packedBytes == 8 * (1 + 8 + 6 + 1 + 14 + 6 + 37 + 5))
        #expect(MemoryLayout<ExpiredIntents>.size == 8)  // one reference in a session's state
    }

    @Test("more than eight given (as a state file may hold): the next append keeps the newest eight, even of none")
    func trimmedOnAppend() {
        let intents = (0..<11).map { index in
            ExpiredIntent(intentID: "e\(index)", source: "s", reason: .notReady, parkedAt: 0, expiredAt: Int64(index))
        }
        var packed = ExpiredIntents(intents)
        #expect(packed.count == 11)
        packed.append([], keeping: ExpiredIntent.kept)
        #expect(packed.map(\.intentID) == (3..<11).map { "e\($0)" })
        packed.append(Array(intents.prefix(10)), keeping: 3)
        #expect(packed.map(\.intentID) == ["e7", "e8", "e9"])
        packed.append([], keeping: 0)
        #expect(packed.isEmpty && packed.count == 0 && packed.first == nil)
    }

    @Test("a session state keeps, forgets and restores them as before")
    func inSessionState() throws {
        let intents = (0..<3).map { index in
            ExpiredIntent(
                intentID: "e\(index)", source: "s", reason: .notReady, parkedAt: Int64(index),
                expiredAt: Int64(index) * 10_000_000_000 + 1)
        }
        let tree = try Resolver(map: .demo).initialState().tree
        var state = SessionState(tree: tree, recentlyExpired: intents)
        #expect(Array(state.recentlyExpired) == intents && state.remembersForAWhile)
        let copy = try JSONDecoder().decode(SessionState.self, from: try JSONEncoder().encode(state))
        #expect(copy == state)
        // The dedup window's cutoff 15 s before now (11 s): e0 and e1 (expired at 1 ns and 10 s)
        // go, e2 (20 s) stays.
        let forgot = state.forget(before: 26_000_000_000, window: 15_000_000_000)
        #expect(forgot && state.recentlyExpired.map(\.intentID) == ["e2"])
        let again = state.forget(before: 26_000_000_000, window: 15_000_000_000)
        #expect(!again)
    }
}
