import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine

/// The worker's pure step, tested like a reducer: given a session's record and an intent or a
/// client event, exactly these batches (seqs, causes, tree versions, epoch), this record after,
/// and nothing else. No sockets: ``SessionWork`` is what the worker runs under the shard lock.
@Suite("SessionWork: the pure step from a resolution to numbered batches")
struct SessionWorkTests {
    static let epoch: UInt64 = 7
    let resolver: Resolver
    let store: SessionStore

    init() throws {
        let resolver = try Resolver(map: .demo)
        self.resolver = resolver
        store = SessionStore(shards: 2, epoch: Self.epoch) { _ in resolver.initialState() }
    }

    /// A batch as these tests compare it: (seq, cause, tree version, intent id, commands).
    struct Shape: Equatable, CustomStringConvertible {
        var seq: UInt64
        var cause: Navigator_V1_BatchCause
        var version: UInt64
        var intent: String
        var commands: Int
        var description: String { "#\(seq) \(cause) v\(version) \(intent.isEmpty ? "-" : intent) ×\(commands)" }
    }

    func shapes(_ batches: [SessionWork.Publishable]) -> [Shape] {
        batches.map {
            #expect($0.batch.epoch == Self.epoch)
            #expect($0.batch.session == "s")
            return Shape(
                seq: $0.batch.seq, cause: $0.batch.cause, version: $0.batch.treeVersion, intent: $0.batch.intentID,
                commands: $0.batch.commands.count)
        }
    }

    func resolve(_ intent: Intent, maxSessions: Int = 100) -> SessionWork.IntentChange {
        SessionWork.resolve(intent, store: store, resolver: resolver, maxSessions: maxSessions, now: 1_000)
    }

    func apply(_ event: ClientEvent, lastSeq: UInt64, epoch: UInt64 = epoch) -> SessionWork.EventChange {
        SessionWork.apply(
            event, session: "s", lastSeq: lastSeq, epoch: epoch, store: store, resolver: resolver, maxSessions: 100,
            now: 2_000)
    }

    static let chat42 = ScreenContext("chat", ["conversationId": "42"])

    @Test(
        "a worker takes an intent's arrays back once it is published: the next intent's commands are written where the last one's were"
    )
    func workerRecycles() {
        var state = WorkerLoop.WorkerState(
            maps: ResolverHolder(resolver, source: "test").snapshot, traceBudget: TraceBudget(perSecond: 1))
        // As WorkerLoop.resolve returns an intent once its batches are published: the resolution
        // and its own batch, which shares its commands.
        // `state` passed, not captured: a captured variable is checked for exclusive access as a
        // whole, and its buffers and its batches are two accesses at once.
        func resolved(_ intent: Intent, _ state: inout WorkerLoop.WorkerState) -> WorkerLoop.Resolved {
            let change = SessionWork.resolve(
                intent, store: store, resolver: resolver, maxSessions: 100, now: 1_000, buffers: &state.buffers,
                batches: &state.batches)
            return WorkerLoop.Resolved(resolution: change.resolution, batch: change.own, expiresAt: change.expiresAt)
        }
        var first = resolved(.show(Self.chat42, id: "i1"), &state)
        #expect(first.batch?.commands.isEmpty == false)
        // The batches are listed in the worker's own array, its room kept from intent to intent.
        #expect(state.batches.count == 1 && state.batches.first?.batch.seq == first.batch?.seq)
        let list = state.batches.withUnsafeBufferPointer { $0.baseAddress }
        let address = first.resolution.commands.withUnsafeBufferPointer { $0.baseAddress }
        state.recycle(&first)
        #expect(first.batch == nil && first.resolution.commands.isEmpty)
        let second = resolved(.show(ScreenContext("chat", ["conversationId": "43"]), id: "i2"), &state)
        #expect(second.batch?.commands.isEmpty == false)
        #expect(second.resolution.commands.withUnsafeBufferPointer { $0.baseAddress } == address)
        #expect(state.batches.count == 1 && state.batches.first?.batch.seq == second.batch?.seq)
        #expect(state.batches.withUnsafeBufferPointer { $0.baseAddress } == list)
    }
    static let call = ScreenContext("incomingCall", ["callId": "6f1c7b1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f"])

    @Test("a resolved intent on a new session: batch 1, the intent's, at the tree's version after it")
    func resolvedIntent() {
        let change = resolve(.show(Self.chat42, id: "i1"))
        #expect(Navigator_V1_Outcome(change.resolution.outcome) == .resolved)
        // selectTab(chats), push(chat): two commands that change the tree, version 0 -> 2.
        #expect(shapes(change.batches) == [Shape(seq: 1, cause: .intent, version: 2, intent: "i1", commands: 2)])
        #expect(change.own?.seq == 1)
        #expect(change.releasedBatches.isEmpty && change.parked.isEmpty && change.expiresAt == 0)
        let record = store.read("s")
        #expect(record.seq == 1)
        #expect(record.state.lastServiceSeq == 1)
        #expect(record.state.tree.version == 2)
    }

    @Test("an intent without commands publishes nothing and leaves seq and version alone")
    func intentWithoutCommands() {
        _ = resolve(.show(Self.chat42, id: "i1"))
        let change = resolve(.show(Self.chat42, id: "i1"))  // the same id again: a duplicate
        #expect(change.resolution.commands.isEmpty)
        #expect(change.batches.isEmpty && change.own == nil)
        let record = store.read("s")
        #expect(record.seq == 1 && record.state.tree.version == 2 && record.state.lastServiceSeq == 1)
    }

    @Test("a guarded screen: the redirect is the intent's own batch, cause guard, and the intent parks")
    func guardRedirect() {
        let change = resolve(.show(ScreenContext("editProfile"), id: "edit"))
        #expect(Navigator_V1_Outcome(change.resolution.outcome) == .parked)
        #expect(shapes(change.batches) == [Shape(seq: 1, cause: .guard, version: 1, intent: "edit", commands: 1)])
        #expect(change.parked.map(\.intent.id) == ["edit"])
        #expect(change.expiresAt == change.parked[0].expiresAt && change.expiresAt > 1_000)
        #expect(store.read("s").state.lastServiceSeq == 1)
    }

    @Test("an event that releases parked intents: the echo, then one batch per release, each at its own version")
    func releasesAfterEcho() throws {
        // The call is presented (batch 1); two chats park behind it.
        let presented = resolve(.show(Self.call, id: "call"))
        #expect(shapes(presented.batches).map(\.seq) == [1])
        let callVersion = store.read("s").state.tree.version
        #expect(Navigator_V1_Outcome(resolve(.show(Self.chat42, id: "c42")).resolution.outcome) == .parked)
        let thread = ScreenContext("thread", ["conversationId": "42", "threadId": "7"])
        #expect(Navigator_V1_Outcome(resolve(.show(thread, id: "t7")).resolution.outcome) == .parked)
        #expect(store.read("s").seq == 1)

        // The user dismisses the call: the echo (batch 2, for the session's other shells), then
        // the chat (3) and the thread (4), in the order they parked.
        let change = apply(.dismissedTo(nil), lastSeq: 1)
        #expect(change.result.error == nil)
        let batches = shapes(change.batches)
        #expect(batches.map(\.seq) == [2, 3, 4])
        #expect(batches.map(\.cause) == [.clientEvent, .release, .release])
        #expect(batches.map(\.intent) == ["", "c42", "t7"])
        // Each batch's version is the tree's after it: dismissing is one change, then the chat's
        // commands, then the thread's; the last is the session's version now.
        let chatCommands = UInt64(batches[1].commands)
        let threadCommands = UInt64(batches[2].commands)
        #expect(
            batches.map(\.version) == [
                callVersion + 1, callVersion + 1 + chatCommands, callVersion + 1 + chatCommands + threadCommands,
            ])
        let record = store.read("s")
        #expect(record.seq == 4 && change.seq == 4)
        #expect(record.state.tree.version == batches[2].version)
        // Releases are the service's changes; the echo only repeats what a shell did.
        #expect(record.state.lastServiceSeq == 4)
        #expect(change.releasedBatches.map { $0?.seq } == [3, 4])
        #expect(change.parked.isEmpty)
    }

    @Test("an echo alone does not move lastServiceSeq: the shell's next event, made at the echo, is not stale")
    func echoKeepsLastServiceSeq() {
        _ = resolve(.show(Self.chat42, id: "i1"))
        let tab = apply(.tabSelected("home"), lastSeq: 1)
        #expect(shapes(tab.batches) == [Shape(seq: 2, cause: .clientEvent, version: 3, intent: "", commands: 1)])
        #expect(store.read("s").state.lastServiceSeq == 1)
        let again = apply(.tabSelected("chats"), lastSeq: 1)
        #expect(again.result.error == nil)
        #expect(shapes(again.batches).map(\.seq) == [3])
    }

    @Test("a stale event is refused with the session's seq, and the record stays as it was")
    func staleEvent() {
        _ = resolve(.show(Self.chat42, id: "i1"))
        let before = store.read("s")
        let change = apply(.tabSelected("home"), lastSeq: 0, epoch: Self.epoch)
        #expect(change.result.error?.code == .staleEvent)
        #expect(change.batches.isEmpty && change.seq == 1)
        let after = store.read("s")
        #expect(after.seq == before.seq && after.state == before.state)
        // Another epoch's seq is stale too.
        #expect(apply(.tabSelected("home"), lastSeq: 1, epoch: Self.epoch + 1).result.error?.code == .staleEvent)
    }

    @Test("an invalid event changes nothing, not even the seq")
    func invalidEvent() {
        _ = resolve(.show(Self.chat42, id: "i1"))
        let change = apply(.poppedTo(NodeID(rawValue: 999)), lastSeq: 1)
        #expect(change.result.error?.code == .invalidEvent)
        #expect(change.batches.isEmpty && change.seq == 1)
        #expect(store.read("s").state.tree.version == 2)
    }

    @Test("beyond maxSessions a new session is refused and not created; an existing one goes on")
    func sessionLimit() {
        _ = SessionWork.resolve(
            .show(Self.chat42, id: "other", session: "t"), store: store, resolver: resolver, maxSessions: 1, now: 1)
        let refused = resolve(.show(Self.chat42, id: "i1"), maxSessions: 1)
        guard case .rejected(let error) = refused.resolution.outcome else {
            Issue.record("expected a rejection, got \(refused.resolution.outcome)")
            return
        }
        #expect(error.code == .limitExceeded)
        #expect(refused.batches.isEmpty)
        #expect(store.sessionCount == 1)
        let existing = SessionWork.resolve(
            .show(ScreenContext("settings"), id: "t2", session: "t"), store: store, resolver: resolver,
            maxSessions: 1, now: 1)
        #expect(existing.own?.seq == 2)
    }
}
