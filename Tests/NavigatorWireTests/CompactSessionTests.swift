import NavigatorCore
import NavigatorWire
import TestThreads
import Testing

@Suite("Compact sessions at rest")
struct CompactSessionTests {
    typealias Random = BatchEncoderTests.Random

    /// A session at rest: a random tree and conditions, nothing parked, remembered or expired.
    static func restingState(_ random: inout Random) throws -> SessionState {
        let full = try StoredSessionEncoderTests.state(&random)
        return SessionState(
            tree: full.tree, conditions: full.conditions, lastServiceSeq: full.lastServiceSeq,
            shellReady: full.shellReady, appVersion: full.appVersion)
    }

    /// The names of `state`'s tree and conditions, as a route map would hold them.
    static func map(naming state: SessionState) -> RouteMap {
        var screens: [String: ScreenSpec] = [:]
        for (_, stack) in state.tree.stacks {
            for screen in stack {
                var spec = screens[screen.context.screen] ?? ScreenSpec()
                for key in screen.context.info.keys { spec.info[key] = InfoSpec(.string) }
                screens[screen.context.screen] = spec
            }
        }
        // Conditions as guards of a screen of their own (a map names them there).
        for (index, condition) in state.conditions.keys.enumerated() {
            screens["guarded\(index)"] = ScreenSpec(guard: .init(condition: condition, redirect: "login"))
        }
        return RouteMap(tabs: state.tree.tabNames.map { .init(name: $0, root: "r") }, screens: screens)
    }

    @Test("reads back the same state and seq for 2,000 random sessions at rest, names numbered or written out")
    func roundTrip() async throws {
        try await offPool {
            var random = Random(state: 31)
            var table = NameIndex()
            for index in 0..<2_000 {
                let state = try Self.restingState(&random)
                let seq = random.chance(10) ? 0 : random.next() >> 4
                // Half the sessions' names are in the table (an earlier map's stay in it); a fresh
                // table every 100 sessions keeps it below its limit (random names are many).
                if index % 100 == 0 { table = NameIndex() }
                if index % 2 == 0 { table = table.adding(Self.map(naming: state)) }
                let bytes = try #require(CompactSession.encode(state, seq: seq, names: table))
                #expect(CompactSession.isCompact(bytes))
                let (decoded, decodedSeq) = try bytes.withUnsafeBytes { try CompactSession.decode($0, names: table) }
                if decoded != state || decodedSeq != seq {
                    Issue.record("session \(index) reads back otherwise:\n\(state)\n\(decoded)")
                    return
                }
                // A later table (another map added) still reads it.
                let later = table.adding(
                    RouteMap(tabs: [], rootScreen: "late", screens: ["late\(index)": ScreenSpec()]))
                #expect(try bytes.withUnsafeBytes { try CompactSession.decode($0, names: later) }.state == state)
                if index % 2 == 0 {
                    // Names numbered: fewer bytes, which an empty table cannot read.
                    let stored = Navigator_V1_StoredSession.encodedWithoutParked(state, seq: seq)
                    #expect(bytes.count < stored.count, "\(bytes.count) compact bytes, \(stored.count) stored")
                    #expect(throws: WireError.self) {
                        try bytes.withUnsafeBytes { try CompactSession.decode($0, names: NameIndex()) }
                    }
                }
            }
        }
    }

    @Test("ids, seqs and versions at their extremes read back the same")
    func extremes() throws {
        let top = Screen(id: NodeID(rawValue: NodeID.clientBit - 1), ScreenContext("home", ["k": ""]))
        let client = Screen(id: NodeID(rawValue: .max), ScreenContext("client-screen"))
        let modal = Modal(
            id: .client(NodeID.clientBit - 2), style: .popover, stack: [Screen(id: .client(1), ScreenContext("m"))])
        let tree = try ScreenTree(
            root: .stack([client, top]), modals: [modal], version: .max, lastServiceID: NodeID.clientBit - 1)
        let state = SessionState(
            tree: tree, conditions: ["": false, "é": true], lastServiceSeq: .max, shellReady: true)
        for table in [NameIndex(), NameIndex().adding(Self.map(naming: state))] {
            let bytes = try #require(CompactSession.encode(state, seq: .max, names: table))
            let (decoded, seq) = try bytes.withUnsafeBytes { try CompactSession.decode($0, names: table) }
            #expect(decoded == state && seq == .max)
        }
    }

    @Test("a tab selection or a presentation style of ten bytes is refused, not turned into an Int that traps")
    func hugeNumbers() throws {
        let huge: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        // marker, seq, last service seq, flags (tabs), no conditions, version, last service id 1,
        // one tab selecting `number`, named "a", holding screen #1 "s".
        func tabs(_ number: [UInt8]) -> [UInt8] {
            [0, 0, 0, 2, 0, 0, 1, 1] + number + [0, 1, 0x61, 1, 2, 0, 1, 0x73, 0, 0]
        }
        // A single stack with #1 "s", one modal #2 of style `number` holding #3 "t".
        func style(_ number: [UInt8]) -> [UInt8] {
            [0, 0, 0, 0, 0, 0, 3, 1, 2, 0, 1, 0x73, 0, 1, 4] + number + [1, 6, 0, 1, 0x74, 0]
        }
        func decode(_ bytes: [UInt8]) throws -> SessionState {
            try bytes.withUnsafeBytes { try CompactSession.decode($0, names: NameIndex()) }.state
        }
        // With a small number in its place the bytes read back: the huge one is what is refused.
        #expect(try decode(tabs([0])).tree.selectedTab == "a")
        #expect(try decode(style([3])).tree.modals.first?.style == .popover)
        for (bytes, problem) in [
            (tabs(huge), "selects tab 18446744073709551615 of 1"), (style(huge), "has presentation style"),
        ] {
            let error = #expect(throws: WireError.self) { try decode(bytes) }
            #expect(error?.message.contains(problem) == true, "\(String(describing: error))")
        }
    }

    @Test("only a session at rest is compacted: parked, remembered or expired intents keep the stored form")
    func onlyAtRest() throws {
        var random = Random(state: 5)
        var checked = 0
        while checked < 200 {
            let state = try StoredSessionEncoderTests.state(&random)
            guard state.remembersForAWhile else { continue }
            #expect(CompactSession.encode(state, seq: 1, names: NameIndex()) == nil)
            checked += 1
        }
        #expect(
            !CompactSession.isCompact(
                Navigator_V1_StoredSession.encodedWithoutParked(try Self.restingState(&random), seq: 1)))
    }

    @Test("bytes cut short or changed throw a malformed error or read back as a valid state, never trap")
    func damaged() async throws {
        try await offPool {
            var random = Random(state: 11)
            var thrown = 0
            for _ in 0..<100 {
                let state = try Self.restingState(&random)
                let table = NameIndex().adding(Self.map(naming: state))
                let bytes = try #require(CompactSession.encode(state, seq: 7, names: table))
                for length in 0..<bytes.count {
                    #expect(throws: WireError.self) {
                        try Array(bytes[..<length]).withUnsafeBytes { try CompactSession.decode($0, names: table) }
                    }
                }
                var changed = bytes
                let at = 1 + random.below(bytes.count - 1)
                changed[at] = UInt8(truncatingIfNeeded: random.next())
                do {
                    let (decoded, _) = try changed.withUnsafeBytes { try CompactSession.decode($0, names: table) }
                    try decoded.tree.checkInvariant()
                } catch is WireError {
                    thrown += 1
                }
                // Names numbered past the table's end: refused, not read out of bounds.
                #expect(throws: WireError.self) {
                    try bytes.withUnsafeBytes { try CompactSession.decode($0, names: NameIndex()) }
                }
            }
            #expect(thrown > 0)
        }
    }
}
