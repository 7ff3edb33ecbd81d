import Foundation
import GRDB
import Logging
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine

@Suite("Packing idle sessions")
struct PackingTests {
    /// When the tests' intents are resolved (unix ns): now, so that they are within the dedup
    /// window when restored.
    static let t0 = WallClock.now()
    static let window: Int64 = 600_000_000_000

    /// A store, its state file and persistence in a fresh directory, removed after `body`.
    private func withStore(
        packAfter: Duration = .seconds(30), _ body: (SessionStore, Persistence, Resolver, URL) throws -> Void
    ) throws {
        let directory = temporaryDirectory("navpack")
        defer { try? FileManager.default.removeItem(at: directory) }
        let resolver = try Resolver(map: .demo)
        PackedNames.add(resolver.map)
        let store = SessionStore(shards: 2, epoch: 1) { _ in resolver.initialState() }
        let persistence = Persistence(
            database: try StateFile(directory: directory.path), store: store, packAfter: packAfter,
            logger: Logger(label: "test"))
        try body(store, persistence, resolver, directory)
    }

    /// Every session has a record in its shard's table, at rest too: its size is part of what a
    /// session at rest costs (with the id's 16 bytes, at the table's load).
    @Test("a session's record takes 32 bytes; its seq and parked count share a word and keep their values")
    func recordSize() throws {
        #expect(MemoryLayout<SessionStore.Record>.stride == 32)
        let resolver = try Resolver(map: .demo)
        var state = resolver.initialState()
        // Signed out: each of these parks until the session signs in.
        for index in 0..<3 {
            _ = resolver.resolve(
                Intent(id: "p\(index)", session: "s", target: .path([ScreenContext("editProfile")])), into: &state,
                now: Self.t0 + Int64(index))
        }
        let parked = Int32(state.parked.count)
        #expect(parked > 0)
        var record = SessionStore.Record(state: state, seq: (1 << 48) - 2)
        #expect(record.seq == (1 << 48) - 2 && record.parkedCount == parked && record.changedAt == 0)
        record.seq += 1
        #expect(record.seq == (1 << 48) - 1 && record.parkedCount == parked && record.changedAt > 0)
        _ = resolver.apply(.conditions(["authenticated": true]), to: &record.state, now: Self.t0 + 10)
        #expect(record.seq == (1 << 48) - 1 && record.parkedCount == Int32(record.state.parked.count))
        #expect(record.parkedCount < parked)
    }

    private func resolve(
        _ id: String, _ path: [ScreenContext], session: String, _ store: SessionStore, _ resolver: Resolver
    ) -> Resolution {
        store.update(session) { record in
            let resolution = resolver.resolve(
                Intent(id: id, session: session, target: .path(path)), into: &record.state, now: Self.t0)
            if !resolution.commands.isEmpty { record.seq += 1 }
            return resolution
        }
    }

    /// `count` sessions named `prefix-N`, each shown a chat of its own (conversation N); their names.
    private func chats(_ prefix: String, _ count: Int, _ store: SessionStore, _ resolver: Resolver) -> [String] {
        let sessions = (0..<count).map { "\(prefix)-\($0)" }
        for (index, session) in sessions.enumerated() {
            _ = resolve(
                "c\(index)", [ScreenContext("chat", ["conversationId": "\(index)"])], session: session, store, resolver)
        }
        return sessions
    }

    private func record(_ session: String, _ store: SessionStore) -> SessionStore.Record? {
        store.shards[store.shardIndex(of: session)].records.withLock { $0[session] }
    }

    @Test("sessions handed to another instance leave the write-behind's kept parked encodings with their records")
    func droppedPartitionsForgetParkedEncodings() throws {
        let directory = temporaryDirectory("navdrop")
        defer { try? FileManager.default.removeItem(at: directory) }
        let resolver = try Resolver(map: .demo)
        let ownership = PartitionOwnership(instance: "a", partitions: 8)
        let store = SessionStore(shards: 2, epoch: 1, ownership: ownership) { _ in resolver.initialState() }
        let persistence = Persistence(
            database: try StateFile(directory: directory.path), store: store, logger: Logger(label: "test"))
        // Signed out, each parks an intent: its flush keeps the parked list's encoding.
        let sessions = (0..<40).map { "s\($0)" }
        for session in sessions {
            _ = resolve("p-\(session)", [ScreenContext("editProfile")], session: session, store, resolver)
        }
        try persistence.flushAndPack()
        #expect(persistence.sessionsWithParkedEncodings == Set(sessions))
        let lost = ownership.partition(of: "s0")
        let gone = Set(sessions.filter { ownership.partition(of: $0) == lost })
        #expect(gone.count > 1 && gone.count < sessions.count)
        #expect(persistence.drop(partitions: [lost]) == gone.count)
        #expect(persistence.sessionsWithParkedEncodings == Set(sessions).subtracting(gone))
        #expect(gone.allSatisfy { record($0, store) == nil })
        #expect(persistence.drop(partitions: [lost]) == 0)
    }

    @Test(
        "a parked list's encoding reuses the entries of intents still waiting unchanged, and is the list's whole encoding"
    )
    func parkedEncodingReusesEntries() throws {
        var random = FuzzRandom(state: 31)
        var serial = 0
        func intent() -> ParkedIntent {
            serial += 1
            let info = random.chance(2) ? ["id": "\(random.below(1000))"] : [:]
            let reason: ParkReason =
                switch random.below(3) {
                case 0: .notReady
                case 1: .guardUnmet(condition: "authenticated", redirect: "login")
                default: .blocked(by: NodeID(rawValue: UInt64(1 + random.below(50))), screen: "alert")
                }
            return ParkedIntent(
                intent: Intent(
                    id: "i\(serial)", session: "s", target: .path([ScreenContext("chat", info)]),
                    source: random.chance(2) ? "push" : ""),
                reason: reason, parkedAt: Int64(serial), expiresAt: Int64(serial) + 300)
        }
        var list: [ParkedIntent] = []
        var earlier: SessionStore.Record.ParkedEncoding? = nil
        for _ in 0..<2_000 {
            let before = list
            var kept = list.count  // how many of the earlier entries are still there unchanged
            switch random.below(6) {
            case 0, 1: list.append(intent())
            case 2:
                if !list.isEmpty {
                    list.remove(at: random.below(list.count))
                    kept -= 1
                }
            case 3:
                // Up to 20 of the oldest leave: the first left is up to 20 further on, beyond
                // the lookahead of 16 at times (then it is encoded again).
                let gone = min(list.count, 1 + random.below(20))
                list.removeFirst(gone)
                kept = gone >= SessionStore.Record.ParkedEncoding.lookahead ? 0 : kept - gone
            case 4:
                if !list.isEmpty {
                    let index = random.below(list.count)
                    if list[index].reason != .notReady {
                        list[index].reason = .notReady
                        kept -= 1
                    }
                }
            default:
                if list.count > 40 {
                    list = (0..<random.below(5)).map { _ in intent() }
                    kept = 0
                }
            }
            let encoding = try SessionStore.Record.ParkedEncoding(list, reusing: earlier)
            #expect(encoding.bytes == (try Navigator_V1_StoredSession.encodedParkedField(list)))
            #expect(encoding.encodes(list))
            let decoded = try Navigator_V1_StoredSession(serializedBytes: encoding.bytes)
            #expect(decoded.parked.count == list.count)
            #expect(earlier == nil || encoding.reused == kept, "after \(before.count) intents, now \(list.count)")
            earlier = encoding
        }
    }

    @Test("coming to rest (a round with nothing to write after one that wrote) gives memory back once")
    func givesBackAtRest() throws {
        try withStore { store, persistence, resolver, _ in
            try persistence.flushAndPack()
            #expect(persistence.rests.load(ordering: .relaxed) == 0)  // never busy yet
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            try persistence.flushAndPack()  // writes "a"
            #expect(persistence.rests.load(ordering: .relaxed) == 0)
            try persistence.flushAndPack()  // nothing to write: at rest
            #expect(persistence.rests.load(ordering: .relaxed) == 1)
            try persistence.flushAndPack()  // still at rest: not again
            #expect(persistence.rests.load(ordering: .relaxed) == 1)
            // Busy and at rest again within 10 s (a trickle of changes): not again yet.
            _ = resolve("c2", [ScreenContext("chat", ["conversationId": "43"])], session: "a", store, resolver)
            try persistence.flushAndPack()
            try persistence.flushAndPack()
            #expect(persistence.rests.load(ordering: .relaxed) == 1)
            // The state file still takes writes after its cache was given back.
            _ = resolve("c3", [ScreenContext("chat", ["conversationId": "44"])], session: "b", store, resolver)
            #expect(persistence.flushChanged())
        }
    }

    @Test("sessions unchanged since a flush are packed after the idle time, and read back the same")
    func packsIdle() throws {
        try withStore { store, persistence, resolver, _ in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            _ = resolve("g1", [ScreenContext("editProfile")], session: "b", store, resolver)  // parks
            let before = (a: try #require(record("a", store)), b: try #require(record("b", store)))
            #expect(before.b.parkedCount == 1)

            persistence.flushChanged()
            #expect(persistence.compactIdle(now: MonotonicClock.now()) == 0)  // not idle long enough
            #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 2)

            let after = (a: try #require(record("a", store)), b: try #require(record("b", store)))
            #expect(after.a.isPacked && after.b.isPacked)
            #expect(after.a.state == before.a.state && after.a.seq == before.a.seq)
            #expect(after.b.state == before.b.state && after.b.parkedCount == 1)
            #expect(store.parkedCount == 1)
            // The running count follows parking and releasing: signing in releases g1.
            _ = store.update("b") { record in
                resolver.resolve(
                    Intent(
                        id: "in", session: "b", target: .path([ScreenContext("home")]),
                        setConditions: ["authenticated": true]), into: &record.state, now: Self.t0 + 1_000)
            }
            #expect(record("b", store)?.parkedCount == 0)
            #expect(store.parkedCount == 0)
            // Each round is considered once.
            #expect(persistence.compactIdle(now: MonotonicClock.now() + 60_000_000_000) == 0)
        }
    }

    @Test("a packed session is unpacked by its next change, which resolves as on the live state")
    func unpacksOnUse() throws {
        try withStore { store, persistence, resolver, _ in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            var expected = try #require(record("a", store)).state
            let expectedResolution = resolver.resolve(
                Intent(id: "s1", session: "a", target: .path([ScreenContext("settings")])), into: &expected,
                now: Self.t0)
            persistence.flushChanged()
            #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 1)

            let resolution = resolve("s1", [ScreenContext("settings")], session: "a", store, resolver)
            let after = try #require(record("a", store))
            #expect(!after.isPacked)
            #expect(resolution == expectedResolution)
            #expect(after.state == expected)
            #expect(after.seq == 2)
            // The dedup memory came through the packing too.
            let again = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            #expect(again.outcome == .ignored("duplicate intent id c1"))
        }
    }

    @Test("a session changed after its flush stays live")
    func changedStaysLive() throws {
        try withStore { store, persistence, resolver, _ in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            persistence.flushChanged()
            let flushedAt = MonotonicClock.now()
            _ = resolve("s1", [ScreenContext("settings")], session: "a", store, resolver)
            #expect(persistence.compactIdle(now: flushedAt + 31_000_000_000) == 0)
            #expect(record("a", store)?.isPacked == false)
            // Its next flush makes it a candidate again.
            persistence.flushChanged()
            #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 1)
        }
    }

    @Test(
        "packed records share their shard's arena blocks; blocks mostly freed are compacted and unmapped; a copy read out of the lock keeps its bytes"
    )
    func arena() async throws {
        try await onThread {
            try withStore { store, persistence, resolver, _ in
                let sessions = chats("arena", 6_000, store, resolver)
                let expected = Dictionary(uniqueKeysWithValues: sessions.map { ($0, record($0, store)!.state) })
                persistence.flushChanged()
                #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 6_000)
                #expect(store.packedCount == 6_000)
                let sizes = store.shards.map { shard in shard.records.withLock { $0.arena.size } }
                let live = sizes.reduce(0) { $0 + $1.live }
                let mapped = sizes.reduce(0) { $0 + $1.mapped }
                // Every record's bytes are in the arenas, in whole blocks, not one allocation each.
                let stored = try sessions.reduce(0) { $0 + (try record($1, store)!.stored().count) }
                #expect(live == stored)
                #expect(mapped <= live + 2 * PackedArena.blockSize)
                #expect(sessions.allSatisfy { record($0, store)!.state == expected[$0] })

                // A reader's copy, taken before its record moves or goes.
                var copied: SessionStore.Record?
                do {
                    let found: SessionStore.Record = try #require(record(sessions[0], store))
                    copied = found
                }
                // Every block in use now, held weakly: which of them outlive the compaction.
                final class Weak {
                    weak var block: PackedBlock?
                    init(_ block: PackedBlock?) { self.block = block }
                }
                let blocksBefore = sessions.map { Weak(record($0, store)?.packedBlock) }
                // Most sessions change (unpacked: their bytes no longer count) and one is removed.
                for (index, session) in sessions.enumerated() where index % 10 != 0 {
                    _ = resolve("s\(index)", [ScreenContext("settings")], session: session, store, resolver)
                }
                _ = store.shards[store.shardIndex(of: sessions[0])].records.withLock { $0.remove(sessions[0]) }
                #expect(store.packedCount == 599)
                let moved = persistence.compactArenas()
                // Of the other tenth, those in the blocks left mostly free (not those in a block being
                // filled): the old blocks are unmapped.
                #expect(moved > 400 && moved <= 599)
                let after = store.shards.map { shard in shard.records.withLock { $0.arena.size } }
                #expect(after.reduce(0) { $0 + $1.live } == stored / 10 - (try copied!.stored().count))
                #expect(after.reduce(0) { $0 + $1.mapped } <= 2 * PackedArena.blockSize)
                for (index, session) in sessions.enumerated() where index % 10 == 0 && index > 0 {
                    let moved = try #require(record(session, store))
                    #expect(moved.isPacked && moved.state == expected[session])
                }
                // The copy still reads the bytes of a block no record of the store points into.
                #expect(copied!.isPacked && copied!.state == expected[sessions[0]])
                // Once the copy goes too, every block no record uses any more is unmapped.
                copied = nil
                let inUse = Set(sessions.compactMap { record($0, store)?.packedBlock.map(ObjectIdentifier.init) })
                let outliving = Set(blocksBefore.compactMap { $0.block.map(ObjectIdentifier.init) }).subtracting(inUse)
                #expect(outliving.isEmpty, "\(outliving.count) blocks no record uses are still mapped")
            }
        }
    }

    @Test(
        "at rest the packed sessions are moved together into as few blocks as they fill, where busy rounds leave blocks a fifth free"
    )
    func compactedAtRest() async throws {
        try await onThread {
            try withStore { store, persistence, resolver, _ in
                let sessions = chats("rest", 16_000, store, resolver)
                persistence.flushChanged()
                #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 16_000)
                func sizes() -> [(mapped: Int, live: Int)] {
                    store.shards.map { shard in shard.records.withLock { $0.arena.size } }
                }
                let packed = sizes()
                // Several blocks a shard, or there is nothing to move together.
                #expect(packed.allSatisfy { $0.mapped >= 4 * PackedArena.blockSize }, "\(packed)")
                // A fifth of the sessions change: every block keeps four fifths of its bytes.
                for (index, session) in sessions.enumerated() where index % 5 == 0 {
                    _ = resolve("s\(index)", [ScreenContext("settings")], session: session, store, resolver)
                }
                let expected = Dictionary(uniqueKeysWithValues: sessions.map { ($0, record($0, store)!.state) })
                try persistence.flushAndPack()  // writes them: busy, and its compaction leaves the blocks
                let busy = sizes()
                #expect(persistence.rests.load(ordering: .relaxed) == 0)
                #expect(zip(busy, packed).allSatisfy { $0.mapped == $1.mapped }, "\(packed) -> \(busy)")
                #expect(zip(busy, packed).allSatisfy { $0.live < $1.live * 9 / 10 })
                try persistence.flushAndPack()  // nothing to write: at rest
                #expect(persistence.rests.load(ordering: .relaxed) == 1)
                let rested = sizes()
                for (before, after) in zip(busy, rested) {
                    #expect(after.live == before.live)
                    // At least a block given back in each shard, and at most the block being filled
                    // and an eighth of each other block left free.
                    #expect(after.mapped <= before.mapped - PackedArena.blockSize, "\(before) -> \(after)")
                    #expect(after.mapped - after.live < PackedArena.blockSize + after.mapped / 8, "\(after)")
                }
                #expect(store.packedCount == 12_800)
                #expect(sessions.allSatisfy { record($0, store)!.state == expected[$0] })
            }
        }
    }

    @Test("per-session tables give their room back once most entries went, and keep every entry left")
    func spareRoom() {
        var table = Dictionary(uniqueKeysWithValues: (0..<20_000).map { ("s\($0)", $0) })
        var set = Set(table.keys)
        let full = (table.capacity, set.capacity)
        for index in 0..<19_000 {
            table["s\(index)"] = nil
            set.remove("s\(index)")
        }
        table.releaseSpareRoom()
        set.releaseSpareRoom()
        #expect(
            table.capacity < full.0 / 8 && set.capacity < full.1 / 8, "\(full) -> \(table.capacity), \(set.capacity)")
        #expect(table == Dictionary(uniqueKeysWithValues: (19_000..<20_000).map { ("s\($0)", $0) }))
        #expect(set == Set((19_000..<20_000).map { "s\($0)" }))
        // Half used: kept as it is (a busy table is not copied over and over).
        let busy = table.capacity
        for index in 19_000..<19_400 { table["s\(index)"] = nil }
        table.releaseSpareRoom()
        #expect(table.capacity == busy)
        var queue = Array(0..<10_000)
        queue.removeFirstReleasingRoom(9_000)
        #expect(queue == Array(9_000..<10_000) && queue.capacity < 2_000)
    }

    @Test("only a session's latest write is kept as a candidate, however often it is flushed")
    func candidates() {
        var candidates = Persistence.Candidates()
        candidates.add("hot", at: 1)
        candidates.add("cold", at: 1)
        candidates.add("hot", at: 2)
        candidates.add("hot", at: 3)
        let first = candidates.take(through: 2)
        #expect(first.map(\.session) == ["cold"] && first.map(\.at) == [1])  // hot was written again at 3
        let second = candidates.take(through: 3)
        #expect(second.map(\.session) == ["hot"] && second.map(\.at) == [3])
        #expect(candidates.take(through: 100).isEmpty)
    }

    @Test("a flush reuses the encoding of an unchanged parked list, and encodes a changed one anew")
    func parkedEncoding() throws {
        try withStore { store, persistence, resolver, directory in
            _ = resolve("g1", [ScreenContext("editProfile")], session: "b", store, resolver)
            func decoded(_ bytes: [UInt8]) throws -> SessionState {
                try Navigator_V1_StoredSession(serializedBytes: bytes).core().state
            }
            let first = try #require(record("b", store)).storedReusingParked(nil)
            #expect(try decoded(first.bytes) == record("b", store)?.state)
            let encoding = try #require(first.parked)

            let again = try #require(record("b", store)).storedReusingParked(encoding)
            #expect(again.parked === encoding)  // reused, not encoded again
            #expect(again.bytes == first.bytes)

            // A change to the session that leaves the list alone keeps the reuse.
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "b", store, resolver)
            let unchanged = try #require(record("b", store)).storedReusingParked(encoding)
            #expect(unchanged.parked === encoding)
            #expect(try decoded(unchanged.bytes) == record("b", store)?.state)

            // Parking a second intent changes the list: encoded anew, and both come back.
            _ = resolve("g2", [ScreenContext("editProfile")], session: "b", store, resolver)
            let changed = try #require(record("b", store)).storedReusingParked(encoding)
            #expect(changed.parked !== encoding)
            let state = try decoded(changed.bytes)
            #expect(state == record("b", store)?.state)
            #expect(state.parked.map(\.intent.id) == ["g1", "g2"])

            // Through the state file: two flushes (the second reusing), then a restore.
            persistence.flushChanged()
            _ = resolve("c2", [ScreenContext("chat", ["conversationId": "7"])], session: "b", store, resolver)
            persistence.flushChanged()
            let restoredStore = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
            let restored = Persistence(
                database: try StateFile(directory: directory.path), store: restoredStore, logger: Logger(label: "test"))
            #expect(try restored.restore().restored == 1)
            #expect(record("b", restoredStore)?.state == record("b", store)?.state)
        }
    }

    @Test(
        "a packed session forgets its intent ids and expired intents once the dedup window is past, and keeps its tree, parked intents and idle time"
    )
    func forgetsPastWindow() throws {
        try withStore { store, persistence, resolver, directory in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            _ = resolve("g1", [ScreenContext("editProfile")], session: "a", store, resolver)  // parks
            // An expired intent too: g0 parked, then its time ran out.
            store.update("a") { record in
                _ = resolver.resolve(
                    Intent(id: "g0", session: "a", target: .path([ScreenContext("editProfile")]), ttlMilliseconds: 1),
                    into: &record.state, now: Self.t0)
                _ = resolver.expire(&record.state, now: Self.t0 + 2_000_000)
            }
            let before = try #require(record("a", store))
            #expect(before.state.recentIntentIDs.count == 3)
            #expect(before.state.recentlyExpired.map(\.intentID) == ["g0"])
            persistence.flushChanged()
            let packedAt = MonotonicClock.now() + 31_000_000_000
            #expect(persistence.compactIdle(now: packedAt) == 1)
            let packed = try #require(record("a", store))
            let packedBytes = try packed.stored()

            // Within the window: nothing is due, nothing forgotten.
            #expect(persistence.forgetPast(now: packedAt + 1_000_000_000, wallNow: Self.t0 + 1_000_000_000) == 0)
            #expect(try record("a", store)?.stored() == packedBytes)
            // Past it: the ids and the expired intent go; the rest is as it was, still packed.
            #expect(
                persistence.forgetPast(now: packedAt + Self.window, wallNow: Self.t0 + Self.window + 3_000_000_000) == 1
            )
            let rested = try #require(record("a", store))
            #expect(rested.isPacked)
            #expect(rested.state.recentIntentIDs.isEmpty && rested.state.recentlyExpired.isEmpty)
            #expect(rested.state.tree == before.state.tree && rested.state.parked == before.state.parked)
            #expect(rested.seq == before.seq && rested.parkedCount == 1 && rested.changedAt == packed.changedAt)
            #expect(try rested.stored().count < packedBytes.count)
            // Looked at once: nothing is queued again.
            #expect(persistence.forgetPast(now: packedAt + 3 * Self.window, wallNow: Self.t0 + 3 * Self.window) == 0)
            // The state file keeps what it had; a restore past the window forgets it as it loads.
            let restoredStore = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
            let restored = Persistence(
                database: try StateFile(directory: directory.path), store: restoredStore, logger: Logger(label: "test"))
            #expect(try restored.restore(wallNow: Self.t0 + Self.window + 3_000_000_000).restored == 1)
            #expect(record("a", restoredStore)?.state == rested.state)
        }
    }

    @Test("a restore within the window keeps the ids, and forgets them once the window is past")
    func restoredForgetLater() throws {
        try withStore { store, persistence, resolver, directory in
            for session in ["a", "b"] {
                _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: session, store, resolver)
            }
            persistence.flushChanged()
            let restoredStore = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
            let restored = Persistence(
                database: try StateFile(directory: directory.path), store: restoredStore, logger: Logger(label: "test"))
            let loadedAt = MonotonicClock.now()
            #expect(try restored.restore(wallNow: Self.t0 + 1_000).restored == 2)
            #expect(record("b", restoredStore)?.state.recentIntentIDs.count == 1)
            // A duplicate within the window is still one after the restore (and "a" is live now).
            let again = resolve(
                "c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", restoredStore, resolver)
            #expect(again.outcome == .ignored("duplicate intent id c1"))
            // Not due yet: nothing is looked at.
            #expect(restored.forgetPast(now: loadedAt + 1_000_000_000, wallNow: Self.t0 + 2_000_000_000) == 0)
            // A window after the load: "b", unchanged, forgets; "a", changed, is passed over (its
            // next packing queues it again).
            let past = Self.t0 + Self.window + 3_000_000_000
            #expect(restored.forgetPast(now: loadedAt + Self.window + 1_000_000_000, wallNow: past) == 1)
            let rested = try #require(record("b", restoredStore))
            #expect(rested.isPacked && rested.state.recentIntentIDs.isEmpty)
            #expect(record("a", restoredStore)?.state.recentIntentIDs.isEmpty == false)
            // At rest it is kept compact (names as numbers), reads back the same, and is written
            // to the state file as a StoredSession.
            #expect(rested.isCompact)
            let stored = try Navigator_V1_StoredSession(serializedBytes: try rested.stored()).core()
            #expect(stored.state == rested.state && stored.seq == rested.seq)
            #expect(rested.state.tree.top.context == ScreenContext("chat", ["conversationId": "42"]))
            // Restored once more, past the window: compact as it loads.
            persistence.flushChanged()
            restored.flushChanged()
            let again2 = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
            let reloaded = Persistence(
                database: try StateFile(directory: directory.path), store: again2, logger: Logger(label: "test"))
            #expect(try reloaded.restore(wallNow: past).restored == 2)
            #expect(record("b", again2)?.isCompact == true && record("b", again2)?.state == rested.state)
        }
    }

    @Test(
        "a session packed after a flush with nothing to remember is made compact a window later; changed in place, it is written as a StoredSession"
    )
    func compactedLater() throws {
        try withStore { store, persistence, _, directory in
            // A session that remembers no intent id: a change of its own (as a client event's).
            store.update("c") { record in
                record.state.lastServiceSeq = 3
                record.seq = 3
            }
            let live = try #require(record("c", store))
            persistence.flushChanged()
            let packedAt = MonotonicClock.now() + 31_000_000_000
            #expect(persistence.compactIdle(now: packedAt) == 1)
            #expect(record("c", store)?.isPacked == true && record("c", store)?.isCompact == false)
            // A window later nothing is past, but it is at rest: compact now.
            #expect(persistence.forgetPast(now: packedAt + Self.window + 1_000_000_000, wallNow: Self.t0) == 1)
            let rested = try #require(record("c", store))
            #expect(rested.isCompact && rested.state == live.state && rested.seq == 3)
            // Marked changed without being unpacked, it is written through the flush: the row
            // is a StoredSession that loads again (compact bytes would be quarantined).
            store.update("c") { _ in }
            #expect(record("c", store)?.isCompact == true)
            #expect(persistence.flushChanged())
            let reloaded = SessionStore(shards: 1, epoch: 1) { _ in live.state }
            let restored = Persistence(
                database: try StateFile(directory: directory.path), store: reloaded, logger: Logger(label: "test"))
            let result = try restored.restore(wallNow: Self.t0)
            #expect(result.restored == 1 && result.quarantined.isEmpty, "\(result.quarantined)")
            #expect(record("c", reloaded)?.state == live.state && record("c", reloaded)?.seq == 3)
        }
    }

    @Test("packing off keeps every session live")
    func off() throws {
        try withStore(packAfter: .zero) { store, persistence, resolver, _ in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            persistence.flushChanged()
            #expect(persistence.compactIdle(now: MonotonicClock.now() + 31_000_000_000) == 0)
            #expect(record("a", store)?.isPacked == false)
        }
    }

    @Test("restored sessions stay packed until used, with their states and parked counts")
    func restoredPacked() throws {
        try withStore { store, persistence, resolver, directory in
            _ = resolve("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "a", store, resolver)
            _ = resolve("g1", [ScreenContext("editProfile")], session: "b", store, resolver)
            persistence.flushChanged()
            let restoredStore = SessionStore(shards: 3, epoch: 1) { _ in resolver.initialState() }
            let restored = Persistence(
                database: try StateFile(directory: directory.path), store: restoredStore, logger: Logger(label: "test"))
            #expect(try restored.restore().restored == 2)
            for session in ["a", "b"] {
                let original = try #require(record(session, store))
                let loaded = try #require(record(session, restoredStore))
                #expect(loaded.isPacked)
                #expect(loaded.packedBlock != nil, "kept in its shard's arena, not in the array it was read into")
                #expect(loaded.state == original.state && loaded.seq == original.seq)
            }
            #expect(restoredStore.parkedCount == 1)
            // The expiry pass reads a packed session with nothing due and leaves it packed and
            // unchanged (a restart looks at every session with parked intents at once).
            let parked = try #require(record("b", restoredStore)?.state.parked.first)
            let notYet = SessionWork.expire("b", store: restoredStore, resolver: resolver, now: parked.expiresAt - 1)
            #expect(notYet.expired.isEmpty && notYet.parked.count == 1)
            #expect(record("b", restoredStore)?.isPacked == true)
            let shard = restoredStore.shards[restoredStore.shardIndex(of: "b")]
            #expect(!shard.dirty.withLock { $0.contains("b") })
            // Once due, it is expired as before.
            let due = SessionWork.expire("b", store: restoredStore, resolver: resolver, now: parked.expiresAt)
            #expect(due.expired.map(\.intent.id) == ["g1"] && due.parked.isEmpty)
            #expect(record("b", restoredStore)?.isPacked == false && restoredStore.parkedCount == 0)
        }
    }

    @Test("navigatord packs an idle session and serves it again: snapshot, next intent, seq")
    func service() async throws {
        let configure: (inout EngineConfiguration) -> Void = {
            // Slowed down (a sanitizer), the session must not be packed again between the intent
            // that unpacks it and the metrics read after it.
            $0.packIdleAfterSeconds = TestTiming.scaled(seconds: 1)
            $0.flushIntervalMilliseconds = 20
        }
        try await withService(workers: 1, configure) { server, endpoints in
            let store = server.store
            let metrics: @Sendable () -> String = { String(decoding: server.metrics(), as: UTF8.self) }
            let (before, packedSnapshot, reply, after, packedMetrics, unpackedMetrics) = try await onThread {
                let client = try Client(endpoints)
                _ = try client.request(
                    .intent(wireIntent("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "p")))
                let before = try client.request(.snapshot(.with { $0.session = "p" })).snapshot
                let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(10))
                while store.shards[0].records.withLock({ $0["p"]?.isPacked }) != true {
                    guard ContinuousClock.now < deadline else { throw TestFailure("session p was never packed") }
                    Thread.sleep(forTimeInterval: 0.02)
                }
                let packedSnapshot = try client.request(.snapshot(.with { $0.session = "p" })).snapshot
                let packedMetrics = metrics()
                let reply = try client.request(.intent(wireIntent("s1", [ScreenContext("settings")], session: "p")))
                return (
                    before, packedSnapshot, reply, try client.request(.snapshot(.with { $0.session = "p" })).snapshot,
                    packedMetrics, metrics()
                )
            }
            // /metrics counts it packed, with its bytes in one block; unpacked by the intent, not.
            #expect(packedMetrics.contains("navigator_sessions_packed 1"))
            #expect(packedMetrics.contains(#"navigator_packed_session_bytes{of="blocks"} 262144"#))
            #expect(!packedMetrics.contains(#"navigator_packed_session_bytes{of="sessions"} 0"#))
            #expect(unpackedMetrics.contains("navigator_sessions_packed 0"))
            #expect(unpackedMetrics.contains(#"navigator_packed_session_bytes{of="sessions"} 0"#))
            #expect(packedSnapshot == before)
            #expect(reply.resolved.batch.seq == 2)
            #expect(after.seq == 2)
            #expect(try after.tree.core().top.context.screen == "settings")
        }
    }
}

@Suite("Write-behind in chunks")
struct WriteBehindChunkTests {
    @Test("a round of changed sessions is written a chunk at a time, with the waiting replies answered in between")
    func chunks() throws {
        let directory = temporaryDirectory("navchunk")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        let (epoch, _) = try file.beginRun()
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 2, epoch: epoch) { _ in resolver.initialState() }
        let persistence = Persistence(database: file, store: store, logger: TestService.logger("chunks"))
        let chunk = Persistence.chunk
        for index in 0..<(2 * chunk + chunk / 2) { store.update("s\(index)") { $0.seq = 1 } }
        var betweens = 0
        var written: [Int] = []
        persistence.flushAndPack {
            betweens += 1
            written.append(try! Self.rows(file.path))
        }
        #expect(betweens == 2)
        #expect(written == [chunk, 2 * chunk])
        #expect(try Self.rows(file.path) == 2 * chunk + chunk / 2)
        #expect(persistence.flushChanged(atMost: chunk) == (true, false))
    }

    @Test("a round writes what was changed when it began: sessions changed meanwhile wait for the next round")
    func roundEnds() throws {
        let directory = temporaryDirectory("navround")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try StateFile(directory: directory.path)
        let (epoch, _) = try file.beginRun()
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 2, epoch: epoch) { _ in resolver.initialState() }
        let persistence = Persistence(database: file, store: store, logger: TestService.logger("round"))
        let first = 2 * Persistence.chunk + Persistence.chunk / 2
        for index in 0..<first { store.update("s\(index)") { $0.seq = 1 } }
        // Steady load: between every chunk, 1,000 more sessions change (and the first ones again).
        var betweens = 0
        persistence.flushAndPack {
            betweens += 1
            for index in 0..<1_000 { store.update("new\(betweens)-\(index)") { $0.seq = 1 } }
            store.update("s0") { $0.seq = 2 }
        }
        #expect(betweens == 2)
        #expect(try Self.rows(file.path) == first)
        #expect(store.shards.reduce(0) { $0 + $1.dirty.withLock { $0.count } } == 2_001)
        #expect(persistence.flushChanged())
        #expect(try Self.rows(file.path) == first + 2_000)
    }

    static func rows(_ path: String) throws -> Int {
        try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sessions") ?? 0 }
    }
}
