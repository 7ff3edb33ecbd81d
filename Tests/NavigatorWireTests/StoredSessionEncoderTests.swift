import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import TestThreads
import Testing

@Suite("The hand-written stored-session encoder")
struct StoredSessionEncoderTests {
    typealias Random = BatchEncoderTests.Random

    /// A valid tree (the type allows no other): unique ids, unique tab names, non-empty stacks.
    static func tree(_ random: inout Random) throws -> ScreenTree {
        var next: UInt64 = 1
        func screens(_ random: inout Random) -> [Screen] {
            (0...random.below(4)).map { _ in
                defer { next += 1 }
                let id = random.chance(20) ? NodeID.client(next) : NodeID(rawValue: next)
                return Screen(id: id, ScreenContext(random.text(), random.info()))
            }
        }
        let root: Root
        if random.chance(40) {
            root = .stack(screens(&random))
        } else {
            let tabs = (0...random.below(4)).map { index in
                Tab(name: "tab\(index)-\(random.text())", stack: screens(&random))
            }
            root = .tabs(TabBar(tabs: tabs, selected: tabs[random.below(tabs.count)].name))
        }
        let modals = (0..<random.below(3)).map { _ in
            let stack = screens(&random)
            defer { next += 1 }
            return Modal(
                id: NodeID(rawValue: next), style: PresentationStyle.allCases[random.below(4)], stack: stack)
        }
        return try ScreenTree(
            root: root, modals: modals, version: random.chance(10) ? 0 : random.next() >> 20,
            lastServiceID: next + UInt64(random.below(1000)))
    }

    static func state(_ random: inout Random) throws -> SessionState {
        var conditions: [String: Bool] = [:]
        for _ in 0..<random.below(5) { conditions[random.text()] = random.chance(50) }
        let expired = (0..<random.below(3)).map { _ in
            ExpiredIntent(
                intentID: random.text(), source: random.text(),
                reason: [
                    ParkReason.notReady, .guardUnmet(condition: random.text(), redirect: random.text()),
                    .blocked(by: random.id(), screen: random.text()),
                ][random.below(3)],
                parkedAt: random.chance(20) ? -Int64(random.below(1000)) : Int64(random.next() >> 2),
                expiredAt: random.chance(10) ? 0 : Int64(random.next() >> 2))
        }
        let ids = (0..<(random.chance(30) ? 0 : random.below(300))).map { _ in random.next() }
        return SessionState(
            tree: try tree(&random), conditions: conditions,
            recentIntentIDs: RecentIntentIDs(base: random.chance(10) ? 0 : Int64(random.next() >> 2), entries: ids),
            lastServiceSeq: random.chance(20) ? 0 : random.next() >> 8, shellReady: random.chance(50),
            recentlyExpired: expired,
            appVersion: random.chance(50) ? nil : AppVersion("\(random.below(20)).\(random.below(200))"))
    }

    @Test("writes exactly SwiftProtobuf's bytes (deterministic ordering) for 2,000 random sessions")
    func sameBytes() async throws {
        try await offPool {
            var random = Random(state: 17)
            var options = BinaryEncodingOptions()
            options.useDeterministicOrdering = true
            for index in 0..<2_000 {
                let state = try Self.state(&random)
                let seq = random.chance(10) ? 0 : random.next() >> 4
                let expected: [UInt8] = try Navigator_V1_StoredSession(state, seq: seq, parked: false).serializedBytes(
                    options: options)
                let written = Navigator_V1_StoredSession.encodedWithoutParked(state, seq: seq)
                if written != expected {
                    Issue.record("session \(index) differs: \(written.count) bytes written, \(expected.count) expected")
                    return
                }
                // And it reads back as the same state.
                #expect(try Navigator_V1_StoredSession(serializedBytes: written).core().state == state)
            }
        }
    }

    @Test("records that kept an expired intent's reason as text, and its parked time, still load")
    func legacyExpired() throws {
        let reasons: [ParkReason] = [
            .notReady, .guardUnmet(condition: "authenticated", redirect: "login"),
            .blocked(by: 42, screen: "incomingCall"), .blocked(by: .client(7), screen: "a (modal #3) b"),
        ]
        for reason in reasons {
            #expect(ParkReason(text: reason.description) == reason, "\(reason)")
            var old = Navigator_V1_StoredExpiredIntent()
            old.intentID = "i"
            old.reason = reason.description
            old.parkedAtUnixNanos = 1_000
            old.expiredAtUnixNanos = 5_000
            let expired = try old.core("recently_expired[0]")
            #expect(
                expired == ExpiredIntent(intentID: "i", source: "", reason: reason, parkedAt: 1_000, expiredAt: 5_000))
        }
        // The form a blocked reason had before "(modal #6)".
        for (text, reason) in [
            ("blocked by incomingCall#6", ParkReason.blocked(by: 6, screen: "incomingCall")),
            ("blocked by sheet#c3", .blocked(by: .client(3), screen: "sheet")),
        ] {
            var old = Navigator_V1_StoredExpiredIntent()
            old.reason = text
            #expect(try old.core("recently_expired[0]").reason == reason, "\(text)")
        }
        var broken = Navigator_V1_StoredExpiredIntent()
        broken.reason = "no reason at all"
        #expect(throws: WireError.self) { try broken.core("recently_expired[0]") }
    }
}
