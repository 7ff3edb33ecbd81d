import Foundation
import Logging
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine

/// The semantic fuzzer (issue 20): random sequences of intents, client events (random syncs of
/// random trees, pushes, presents, dismissals, conditions, stale ones), expiry passes, route-map
/// reloads, flushes, packing and restarts, driven through the service's own session step
/// (``SessionWork``), store and state file. After every step it checks that the tree invariant
/// holds within the limits, that packing round-trips, and that a mirror applying the published
/// batches by the README's rule equals the service's tree; after every restart, that everything
/// loaded as it was.
///
/// `FUZZ_STEPS` and `FUZZ_SEED` override the suite's 10,000 steps with seed 20; the long run is
/// `scripts/fuzz-semantic.sh`.
@Suite("Semantic fuzzer")
struct SemanticFuzzTests {
    @Test("random steps through resolver, store, state file and restarts keep every promise")
    func fuzz() async throws {
        let environment = ProcessInfo.processInfo.environment
        let steps = environment["FUZZ_STEPS"].flatMap(Int.init) ?? 10_000
        let seed = environment["FUZZ_SEED"].flatMap(UInt64.init) ?? 20
        print("semantic fuzzer: \(steps) steps, seed \(seed)")
        // On a thread of its own: minutes of work must not hold one of the few threads every
        // other test's async work (the services' HTTP handlers among it) runs on.
        let (failure, tally) = try await onThread { () throws -> (String?, [String: Int]) in
            var world = try FuzzWorld(seed: seed)
            defer { world.remove() }
            for step in 0..<steps {
                do {
                    try world.step()
                } catch {
                    return ("seed \(seed), step \(step): \(error)\n\(world.lastAction)", world.tally)
                }
                if steps >= 100_000, step % 100_000 == 0, step > 0 {
                    print("semantic fuzzer: \(step) steps")
                    fflush(nil)  // a long run shows its progress as it goes, not at its end (all streams)
                }
            }
            return (nil, world.tally)
        }
        if let failure {
            Issue.record(Comment(rawValue: failure))
            return
        }
        print("semantic fuzzer: \(steps) steps passed (seed \(seed)); \(tally.sorted { $0.key < $1.key })")
        #expect(tally["intent resolved", default: 0] > 0)
        #expect(tally["event applied", default: 0] > 0)
        #expect(tally["restart", default: 0] > 0)
    }
}

struct FuzzFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A shell's mirror: the tree and position it got by the Clone pattern.
struct FuzzMirror {
    var tree: ScreenTree
    var seq: UInt64
    var epoch: UInt64
}

struct FuzzWorld {
    var random: FuzzRandom
    let directory: URL
    var store: SessionStore
    var persistence: Persistence
    let resolvers: [Resolver]
    var current = 0
    /// The resolver in use, as the service holds it: new sessions start from its map.
    let holder: ResolverHolder
    var mirrors: [String: FuzzMirror] = [:]
    var now: Int64 = 1_800_000_000_000_000_000
    var counter = 0
    var tally: [String: Int] = [:]
    var lastAction = ""
    /// Each intent's arrays, handed back once it is followed, as a worker does.
    var buffers = ResolutionBuffers()
    var batchList: [SessionWork.Publishable] = []
    let sessions = ["s0", "s1", "s2", "s3", "s4", "s5"]
    let maxSessions = 5  // one fewer than the names: the session limit is hit too

    static var options: Resolver.Options {
        var options = Resolver.Options()
        options.maxParked = 6
        options.maxConditions = 4
        options.maxConditionKeyBytes = 16
        options.limits = TreeLimits(maxModals: 4, maxStackDepth: 8, maxTabs: 6, maxInfoEntries: 4, maxTextBytes: 64)
        options.defaultTTL = 5_000_000_000
        options.dedupCapacity = 32
        return options
    }

    init(seed: UInt64) throws {
        random = FuzzRandom(state: seed)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "navfuzz-\(seed)-\(UUID().uuidString.prefix(8))")
        var reloaded = RouteMap.demo
        reloaded.tabs[3] = RouteMap.TabSpec(name: "me", root: "myProfile")
        for (name, spec) in reloaded.screens where spec.homeTab == "profile" {
            var changed = spec
            changed.homeTab = "me"
            reloaded.screens[name] = changed
        }
        reloaded.screens["paymentReceipt"] = nil
        resolvers = [
            try Resolver(map: .demo, options: Self.options), try Resolver(map: reloaded, options: Self.options),
        ]
        holder = ResolverHolder(resolvers[0], source: "fuzz")
        (store, persistence) = try Self.open(directory, holder: holder)
    }

    static func open(_ directory: URL, holder: ResolverHolder) throws -> (SessionStore, Persistence) {
        let file = try StateFile(directory: directory.path)
        let (epoch, _) = try file.beginRun()
        let store = SessionStore(shards: 2, epoch: epoch) { _ in holder.resolver.initialState() }
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        let persistence = Persistence(database: file, store: store, packAfter: .seconds(1), logger: logger)
        let (_, quarantined) = try persistence.restore()
        guard quarantined.isEmpty else { throw FuzzFailure("sessions quarantined at a restart: \(quarantined)") }
        return (store, persistence)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    var resolver: Resolver { resolvers[current] }

    mutating func count(_ what: String) { tally[what, default: 0] += 1 }

    // MARK: Steps

    mutating func step() throws {
        now += Int64(random.below(50)) * 1_000_000
        let session = sessions[random.below(sessions.count)]
        let roll = random.below(100)
        switch roll {
        case 0..<45: try intent(session)
        case 45..<80: try event(session)
        case 80..<86:
            now += Int64(random.below(8_000)) * 1_000_000
            try expire()
        case 86..<91:
            lastAction = "flush"
            guard persistence.flushChanged() else { throw FuzzFailure("a flush failed") }
        case 91..<94:
            lastAction = "flush and pack"
            guard persistence.flushChanged() else { throw FuzzFailure("a flush failed") }
            persistence.compactIdle(now: MonotonicClock.now() + 10_000_000_000)
            count("pack")
        case 94..<96: try restart()
        case 96..<98:
            current = 1 - current
            holder.replace(with: resolvers[current], source: "fuzz \(current)")
            // A session with no batch yet has the new map's initial tree, with nothing published:
            // its shells resync (README, "Route maps").
            for session in sessions where store.read(session).seq == 0 { try resync(session) }
            lastAction = "reload to map \(current)"
            count("reload")
        default: try resync(session)
        }
        // The session stepped on; after a step that touches them all, every one.
        try check(roll < 80 ? [session] : sessions)
    }

    mutating func intent(_ session: String) throws {
        counter += 1
        let map = resolver.map
        let names = map.screens.keys.sorted() + ["nowhere"]
        let length = [1, 1, 1, 2, 3].randomElement(using: &random)!
        var path: [ScreenContext] = []
        for _ in 0..<length {
            let name = names.randomElement(using: &random)!
            var info: [String: String] = [:]
            for (key, spec) in (map.screens[name]?.info ?? [:]).sorted(by: { $0.key < $1.key })
            where spec.required || random.chance(3) {
                info[key] = value(spec.type)
            }
            if random.chance(30) { info["bogus"] = "1" }
            path.append(ScreenContext(name, info))
        }
        var intent = Intent(
            id: random.chance(15) ? "dup-\(counter % 4)" : "i\(counter)", session: session, target: .path(path),
            priority: Intent.Priority.allCases.randomElement(using: &random)!,
            ttlMilliseconds: random.chance(3) ? UInt32(random.below(5_000)) : 0)
        if random.chance(6) {
            intent.setConditions = [
                ["authenticated", "premium", "c\(random.below(9))"].randomElement(using: &random)!: Bool.random(
                    using: &random)
            ]
        }
        if random.chance(6) { intent.waitForReady = true }
        if random.chance(40) {
            intent.target = .url(["app://chat/7", "app://me/edit", "app://nowhere"].randomElement(using: &random)!)
        }
        lastAction = "intent \(intent.id) to \(session): \(intent.target)"
        var change = SessionWork.resolve(
            intent, store: store, resolver: resolver, maxSessions: maxSessions, now: now, buffers: &buffers,
            batches: &batchList)
        count("intent \(Navigator_V1_Outcome(change.resolution.outcome).label)")
        try follow(session, change.batches)
        change.batches = []
        batchList.removeAll(keepingCapacity: true)  // as a worker does (WorkerState.recycle)
        change.own = nil
        change.releasedBatches = []
        buffers.recycle(&change.resolution)
    }

    func value(_ type: InfoType) -> String {
        var random = self.random
        switch type {
        case .int: return String(random.below(4) + 1)
        case .string: return ["r1", "r2"].randomElement(using: &random)!
        case .uuid: return "00000000-0000-4000-8000-00000000000\(random.below(3))"
        case .bool: return Bool.random(using: &random) ? "yes" : "0"
        case .oneOf(let values): return values.randomElement(using: &random)!
        }
    }

    mutating func event(_ session: String) throws {
        let record = store.read(session)
        let tree = record.state.tree
        let ids = tree.stacks.flatMap(\.screens).map(\.id) + tree.modals.map(\.id)
        counter += 1
        let fresh = NodeID.client(UInt64(counter) * 4)
        let event: ClientEvent
        switch random.below(11) {
        case 0: event = .poppedTo(random.chance(5) ? NodeID(rawValue: 999) : ids.randomElement(using: &random)!)
        case 1: event = .dismissedTo(random.chance(3) ? nil : tree.modals.map(\.id).randomElement(using: &random))
        case 2: event = .tabSelected((tree.tabNames + ["nope"]).randomElement(using: &random)!)
        case 3:
            let screen = Screen(id: random.chance(8) ? NodeID(rawValue: 5) : fresh, ScreenContext("settings"))
            event = .pushed(screen, onto: random.chance(8) ? .modal(NodeID(rawValue: 77)) : tree.topStack)
        case 4:
            event = .presented(
                Modal(
                    id: fresh, style: .sheet,
                    stack: [Screen(id: .client(fresh.rawValue & ~NodeID.clientBit + 1), ScreenContext("login"))]))
        case 5, 6: event = .sync(syncedTree(from: tree))
        case 7: event = .conditions(["authenticated": Bool.random(using: &random), "k\(random.below(6))": true])
        case 8: event = random.chance(2) ? .ready() : .suspended
        case 9: event = .ack(record.seq)
        default: event = .sync(tree)
        }
        // The shell's position: its mirror's, now and then an older one or none.
        let mirror = mirrors[session] ?? FuzzMirror(tree: resolver.initialState().tree, seq: 0, epoch: store.epoch)
        var (lastSeq, epoch) = (mirror.seq, mirror.epoch)
        if random.chance(6) { lastSeq = lastSeq > 0 ? UInt64(random.below(Int(lastSeq))) : 0 }
        if random.chance(10) { (lastSeq, epoch) = (0, 0) }
        lastAction = "event \(event) to \(session) at \(epoch):\(lastSeq)\non:\n\(tree.outline)"
        var change = SessionWork.apply(
            event, session: session, lastSeq: lastSeq, epoch: epoch, store: store, resolver: resolver,
            maxSessions: maxSessions, now: now, buffers: &buffers)
        if let error = change.result.error {
            count("event refused \(error.code.rawValue)")
            guard store.read(session).state == record.state else {
                throw FuzzFailure("a refused event (\(error)) changed the session")
            }
        } else {
            count("event applied")
        }
        try follow(session, change.batches)
        change.batches = []
        change.releasedBatches = []
        buffers.recycle(&change.result)
    }

    /// A random valid tree made from `tree`: screens moved between stacks, some dropped, client
    /// screens added, modals dropped or added, info changed.
    mutating func syncedTree(from tree: ScreenTree) -> ScreenTree {
        var pool = tree.stacks.flatMap(\.screens)
        pool.shuffle(using: &random)
        counter += 1
        var next = UInt64(counter) * 16
        func clientScreen() -> Screen {
            next += 1
            return Screen(
                id: .client(next),
                ScreenContext(
                    ["settings", "login", "home"].randomElement(using: &random)!,
                    random.chance(2) ? ["a": "\(random.below(3))"] : [:]))
        }
        func take() -> Screen {
            if pool.isEmpty || random.chance(4) { return clientScreen() }
            return pool.removeLast()
        }
        let root: Root
        switch tree.root {
        case .tabs(let bar):
            let tabs = bar.tabs.map { tab in
                Tab(name: tab.name, stack: (0...random.below(3)).map { _ in take() })
            }
            root = .tabs(TabBar(tabs: tabs, selected: tabs.randomElement(using: &random)!.name))
        case .stack:
            root = .stack((0...random.below(3)).map { _ in take() })
        }
        var modals: [Modal] = []
        for modal in tree.modals where !random.chance(3) {
            modals.append(Modal(id: modal.id, style: modal.style, stack: (0...random.below(2)).map { _ in take() }))
        }
        if random.chance(3) {
            next += 1
            modals.append(Modal(id: .client(next), style: .popover, stack: [take()]))
        }
        return (try? ScreenTree(root: root, modals: modals)) ?? tree
    }

    mutating func expire() throws {
        lastAction = "expiry pass at \(now)"
        for session in sessions {
            let (expired, _) = SessionWork.expire(session, store: store, resolver: resolver, now: now)
            tally["expired", default: 0] += expired.count
        }
    }

    /// A clean restart: everything flushed, then a new store loads the file; each session must
    /// be as it was, in the same epoch.
    mutating func restart() throws {
        lastAction = "restart"
        guard persistence.flushChanged() else { throw FuzzFailure("the flush before a restart failed") }
        persistence.stop()
        try persistence.database.markCleanStop()
        let before = sessions.map { store.read($0) }
        let epoch = store.epoch
        (store, persistence) = try Self.open(directory, holder: holder)
        guard store.epoch == epoch else { throw FuzzFailure("a clean restart changed the epoch") }
        for (session, old) in zip(sessions, before) {
            let new = store.read(session)
            guard new.state == old.state, new.seq == old.seq else {
                throw FuzzFailure(
                    "\(session) did not load as it was: seq \(old.seq) -> \(new.seq)\nbefore: \(old.state)\nafter: \(new.state)"
                )
            }
        }
        count("restart")
    }

    /// The shell takes a snapshot (as on a reconnect).
    mutating func resync(_ session: String) throws {
        lastAction = "resync \(session)"
        let record = store.read(session)
        mirrors[session] = FuzzMirror(tree: record.state.tree, seq: record.seq, epoch: store.epoch)
    }

    /// A shell following `session` receives `batches`, by the README's rule.
    mutating func follow(_ session: String, _ batches: [SessionWork.Publishable]) throws {
        var mirror = mirrors[session] ?? FuzzMirror(tree: resolver.initialState().tree, seq: 0, epoch: store.epoch)
        for (batch, _) in batches {
            guard batch.epoch == mirror.epoch, batch.seq == mirror.seq + 1 else {
                throw FuzzFailure("batch \(batch.epoch):\(batch.seq) after \(mirror.epoch):\(mirror.seq) with no loss")
            }
            do {
                // As a shell gets it: the hand-written encoding, read by SwiftProtobuf.
                try mirror.tree.apply(try Navigator_V1_CommandBatch(serializedBytes: batch.encoded()).coreCommands())
            } catch {
                throw FuzzFailure(
                    "batch \(batch.seq) does not apply to the mirror: \(error)\nmirror:\n\(mirror.tree.outline)")
            }
            mirror.seq = batch.seq
        }
        mirrors[session] = mirror
    }

    /// The invariant within the limits, packing round-trips, the mirror equals.
    func check(_ checked: [String]) throws {
        for session in checked {
            let record = store.read(session)
            let tree = record.state.tree
            let size: TreeSize
            do {
                size = try tree.checkInvariant()
            } catch {
                throw FuzzFailure("\(session) breaks the invariant: \(error)\n\(tree.outline)")
            }
            if let (_, message) = size.excess(resolver.options.limits).first {
                throw FuzzFailure("\(session) is beyond a limit: \(message)")
            }
            guard record.state.parked.count <= resolver.options.maxParked else {
                throw FuzzFailure("\(session) has \(record.state.parked.count) parked intents")
            }
            let repacked = try SessionStore.Record(packed: try record.stored())
            guard repacked.state == record.state, repacked.seq == record.seq else {
                throw FuzzFailure("\(session) does not round-trip through its packed form")
            }
            if let mirror = mirrors[session] {
                guard mirror.tree.root == tree.root, mirror.tree.modals == tree.modals, mirror.seq == record.seq else {
                    throw FuzzFailure(
                        "\(session): the mirror (seq \(mirror.seq)) differs from the service (seq \(record.seq))\nmirror:\n\(mirror.tree.outline)\nservice:\n\(tree.outline)"
                    )
                }
            }
        }
    }
}
