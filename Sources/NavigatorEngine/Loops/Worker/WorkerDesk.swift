import Locking
import Synchronization
import ZeroMQ

/// What a worker resolves its shard's sessions with — its state (parked sessions, landings,
/// traces) and the sockets it publishes and replies on — under a lock, so that worker 0 may
/// resolve an intent of another worker's shard on its own thread while that worker sleeps.
///
/// At a moderate rate that spares an intent the hand-over: a bundle of one intent sent inproc
/// and a second thread woken to take it (docs/benchmarks-history.md, "Fewer wake-ups per
/// intent"). Under load the hand-over stays: worker 0 resolves in place only while its read of
/// the intents socket has found little, and only while no intents message for that worker
/// waits — none in its own pending bundle, none sent and not yet taken (``intentsWaiting``,
/// counted by every sender: worker 0's intake and the requests thread). So a session's intents
/// keep their order: one resolved in place never overtakes one handed over before it.
///
/// A worker holds its own desk's lock for each turn of its loop, from after its wait to before
/// the next; worker 0 takes another's only if it is free (never waits for it), and nobody but
/// worker 0 takes worker 0's, so no two threads wait on each other.
final class WorkerDesk: Sendable {
    /// The worker's own, while it runs.
    struct Held: @unchecked Sendable {
        // Unchecked: the state, and the sockets worker 0 may use in the worker's place (its
        // publisher's, its replies PUSH), are used under the desk's lock only — a full memory
        // barrier between one thread's use and the next, which is what libzmq asks of a socket
        // that changes threads. The worker's inbox is read by the worker alone.
        var state: WorkerLoop.WorkerState
        let sockets: WorkerLoop.Sockets
        let loop: WorkerLoop

        /// ``WorkerLoop/resolveInline(session:frame:payload:client:_:_:)`` with this worker's
        /// state and sockets, in place.
        mutating func resolveInline(session: String, frame: Message, payload: Message, client: String) throws {
            try loop.resolveInline(session: session, frame: frame, payload: payload, client: client, &state, sockets)
        }
    }

    /// The worker's Held while it works. `open` says so without reading `held`: testing the
    /// optional for nil loaded a copy of all of it (a retain and a release of each reference
    /// in the worker's state) every turn; `held!` reads it in place.
    private struct Slot {
        var open = false
        var held: Held?
    }

    private let slot = Locked<Slot>(Slot())
    /// Intents messages sent to this worker's inbox (worker 0's bundles, the requests thread's
    /// intents made in process or forwarded by another instance), each counted before it is
    /// sent; and those the worker has taken. Equal: no intent waits for the worker.
    private let sent = Atomic<Int>(0)
    private let taken = Atomic<Int>(0)

    init() {}

    /// The worker starts working with `state` and `sockets`.
    func open(_ held: sending Held) {
        slot.withLock {
            $0.held = held
            $0.open = true
        }
    }

    /// The worker ends: nobody may use its sockets any more (they close with it).
    func close() {
        slot.withLock {
            $0.open = false
            $0.held = nil
        }
    }

    /// `body` with the worker's state and sockets, under the lock (the worker's own turn).
    func withHeld<R, E: Error>(_ body: (inout Held) throws(E) -> R) throws(E) -> R? {
        try slot.withLock { (slot) throws(E) -> R? in
            guard slot.open else { return nil }
            return try body(&slot.held!)
        }
    }

    /// Intents messages sent to this worker that it has not taken yet (an over-count while a
    /// send is under way or failed: never an under-count, which could let an intent overtake).
    var intentsWaiting: Int { sent.load(ordering: .acquiring) - taken.load(ordering: .acquiring) }

    /// Sends an intents message to this worker with `send` (false: its queue is full, nothing
    /// sent), counted before it goes.
    func send(_ send: () throws -> Bool) rethrows -> Bool {
        sent.add(1, ordering: .releasing)
        let done: Bool
        do {
            done = try send()
        } catch {
            sent.subtract(1, ordering: .releasing)
            throw error
        }
        if !done { sent.subtract(1, ordering: .releasing) }
        return done
    }

    /// The worker took an intents message from its inbox (and resolved it).
    func noteTaken() { taken.add(1, ordering: .releasing) }

    /// Resolves an intent of this worker's shard on the calling thread (worker 0's) if the worker
    /// sleeps and nothing of the intents socket waits for it; false (nothing done) if not.
    func resolveIfIdle(session: String, frame: Message, payload: Message, client: String) throws -> Bool {
        guard intentsWaiting == 0 else { return false }
        let done = try slot.withLockIfAvailable { (slot) throws -> Bool in
            guard slot.open else { return false }
            try slot.held!.resolveInline(session: session, frame: frame, payload: payload, client: client)
            return true
        }
        return done == true
    }
}
