import Locking
import Synchronization
import ZeroMQ

/// What a worker resolves its shard's sessions with — its state (parked sessions, landings,
/// traces) and its sockets — under a lock, so that worker 0 may resolve an intent of another
/// worker's shard on its own thread while that worker sleeps.
///
/// At a moderate rate that spares an intent the hand-over: a bundle of one intent sent inproc
/// and the other worker woken to take it (0.7 timeslices and ~40 µs an intent at 2,000/s over
/// two workers; BENCHMARKS.md, "Where the time goes"). Under load the hand-over stays: worker 0
/// resolves inline only while its reads of the intents socket find little waiting, and only
/// while nothing of the intents socket waits for the other worker (every bundle sent to it
/// taken, none pending), so a session's intents keep their order: an intent resolved inline
/// came after everything handed over before it had been resolved.
///
/// A worker holds its own desk's lock from the moment it wakes until it sleeps again; worker 0
/// takes another's only if it is free (never waits for it), so the two cannot wait on each
/// other.
final class WorkerDesk: Sendable {
    /// The worker's own, while it runs.
    struct Held: @unchecked Sendable {
        // Unchecked: the sockets and state are used only under the desk's lock (a full memory
        // barrier between one thread's use and the next, which is what libzmq asks of a socket
        // that changes threads).
        var state: WorkerLoop.WorkerState
        let sockets: WorkerLoop.Sockets
        let loop: WorkerLoop
    }

    private let held = Locked<Held?>(nil)
    /// Bundles of intents worker 0 sent to this worker, and those the worker has taken from its
    /// inbox: equal when nothing of the intents socket waits for it.
    private let sent = Atomic<Int>(0)
    private let taken = Atomic<Int>(0)

    init() {}

    /// The worker starts working with `state` and `sockets`.
    func open(_ held: sending Held) {
        self.held.withLock { $0 = held }
    }

    /// The worker ends: nobody may use its sockets any more (they close with it).
    func close() {
        held.withLock { $0 = nil }
    }

    /// `body` with the worker's state and sockets, under the lock (the worker's own turn).
    func withHeld<R, E: Error>(_ body: (inout Held) throws(E) -> R) throws(E) -> R? {
        try held.withLock { (held) throws(E) -> R? in
            guard held != nil else { return nil }
            return try body(&held!)
        }
    }

    /// Bundles worker 0 sent this worker that it has not taken yet.
    var bundlesWaiting: Int { sent.load(ordering: .relaxed) - taken.load(ordering: .acquiring) }

    /// Worker 0 sent this worker a bundle.
    func noteSent() { sent.add(1, ordering: .relaxed) }

    /// The worker took a bundle from its inbox (and resolved it).
    func noteTaken() { taken.add(1, ordering: .releasing) }

    /// Resolves an intent of this worker's shard on the calling thread (worker 0's) if the worker
    /// sleeps and nothing of the intents socket waits for it; false (nothing done) if not.
    func resolveIfIdle(session: String, frame: Message, payload: Message, client: String) throws -> Bool {
        guard bundlesWaiting == 0 else { return false }
        let done = try held.withLockIfAvailable { (held) throws -> Bool in
            guard held != nil else { return false }
            try held!.loop.resolveInline(session: session, frame: frame, payload: payload, client: client, &held!)
            return true
        }
        return done == true
    }
}
