import Locking
import Logging
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Synchronization

/// The follows of sessions made in process (``NavigatorPort/follow(_:as:_:)``).
///
/// A session this instance serves is followed where its batches are made: the worker that
/// publishes a batch or a rejection hands it to the session's follows (``published(_:)``), and a
/// snapshot is read from the session store — no socket, no second copy of the tree. The follows
/// are kept by the session's shard, so a worker takes only its own shard's lock. A session
/// another instance serves (several instances) is followed through that instance's sockets
/// (``RemoteFollows``), as a shell would. A follow goes with its session: one whose session moves
/// away (its partition lost or handed over) continues through the instance that serves it now,
/// one whose session comes here continues here, and one whose peer is lost is placed again —
/// each time with a snapshot of the new epoch.
final class SessionFollows: Sendable {
    let store: SessionStore
    /// Several instances: how sessions served elsewhere are followed; nil with one instance.
    let remote: RemoteFollows?
    let logger: Logger
    /// Follows of sessions served here, by the session's shard.
    private let local: [FollowShard]
    /// Follows through other instances, by session (to bring home when a partition comes here).
    private let remoteFollows = Locked<[String: [EngineFollow]]>([:])
    /// Follows of sessions served here: the publishers' one-load check.
    private let localCount = Atomic<Int>(0)
    /// Set by ``stopAll(_:)``: a follow placed afterwards ends at once.
    private let closed = Atomic<Bool>(false)

    init(store: SessionStore, remote: RemoteFollows?, logger: Logger) {
        self.store = store
        self.remote = remote
        self.logger = logger
        local = store.shards.map { _ in FollowShard() }
    }

    /// Follows `session`, delivering to `receive`.
    func follow(_ session: String, _ receive: @escaping @Sendable (SessionUpdate) -> Void) -> EngineFollow {
        let follow = EngineFollow(session: session, receive: receive, follows: self)
        place(follow)
        return follow
    }

    /// The follows of one shard of sessions (a class: a `Mutex` cannot be kept in an array).
    final class FollowShard: Sendable {
        let follows = Locked<[String: [EngineFollow]]>([:])
    }

    private func shard(_ session: String) -> FollowShard { local[store.shardIndex(of: session)] }

    /// Starts `follow` where its session is served now: here, or through another instance.
    /// Ownership may change between the look and the registration; whichever comes second sees
    /// the other (``stoppedServing(_:)`` scans the registrations, and this looks again after
    /// registering), so a follow never stays where its session is not served.
    ///
    /// Placements of one follow can overlap (a partition changing hands moves it while the
    /// first is under way): each has its number (``EngineFollow/beginPlacement()``), and only
    /// the latest starts the follow. An earlier one leaves the registrations alone: whatever
    /// placed the follow again took the follow out of its table first (``move(_:)``'s callers,
    /// ``EngineFollow/lost(_:attempt:)``), so the one left there is the later placement's. A
    /// placement that finds the follow stopped takes its own back (the stop may have come
    /// before it registered).
    fileprivate func place(_ follow: EngineFollow) {
        guard !closed.load(ordering: .acquiring) else { return follow.end(Self.stopping) }
        guard !follow.hasEnded else { return }
        let session = follow.session
        let placement = follow.beginPlacement()
        if store.notServed(session) == nil || remote == nil {
            shard(session).follows.withLock { $0[session, default: []].append(follow) }
            localCount.add(1, ordering: .relaxed)
            // Registered first: a batch published meanwhile is either in the snapshot, or comes
            // after it (and the follow takes what continues the snapshot).
            if follow.startLocally(store, placement: placement), remote != nil, store.notServed(session) != nil,
                removeLocal(follow)
            {
                follow.move(self)
            }
        } else {
            remoteFollows.withLock { $0[session, default: []].append(follow) }
            guard let attempt = follow.awaitRemote(placement: placement) else {
                if follow.hasEnded { removeRemote(follow) }  // else placed again meanwhile
                return
            }
            remote!.start(follow, attempt: attempt)
            if store.notServed(session) == nil, removeRemote(follow) { follow.move(self) }
        }
        if closed.load(ordering: .acquiring) { follow.end(Self.stopping) }
    }

    static let stopping = FollowEnd(.stopping, "navigatord is stopping")

    /// Forgets `follow` as one of a session served here; false if it was not.
    @discardableResult
    fileprivate func removeLocal(_ follow: EngineFollow) -> Bool {
        let removed = shard(follow.session).follows.withLock { local in Self.remove(follow, from: &local) }
        if removed { localCount.subtract(1, ordering: .relaxed) }
        return removed
    }

    /// Forgets `follow` as one through another instance; false if it was not.
    @discardableResult
    fileprivate func removeRemote(_ follow: EngineFollow) -> Bool {
        remoteFollows.withLock { remote in Self.remove(follow, from: &remote) }
    }

    private static func remove(_ follow: EngineFollow, from table: inout [String: [EngineFollow]]) -> Bool {
        guard var list = table[follow.session], let index = list.firstIndex(where: { $0 === follow }) else {
            return false
        }
        list.remove(at: index)
        table[follow.session] = list.isEmpty ? nil : list
        return true
    }

    private func localFollows(of session: String) -> [EngineFollow]? {
        guard localCount.load(ordering: .relaxed) > 0 else { return nil }
        return shard(session).follows.withLock { $0[session] }
    }

    /// A batch a worker published (after the store holds it).
    func published(_ batch: Batch) {
        guard let follows = localFollows(of: batch.session) else { return }
        let position = StreamPosition(epoch: batch.epoch, seq: batch.seq)
        let message = batch.message
        for follow in follows { follow.deliver(position, message, store) }
    }

    /// A rejection a worker (or the intake) published.
    func published(_ rejection: Navigator_V1_Rejection) {
        guard let follows = localFollows(of: rejection.session) else { return }
        for follow in follows { follow.deliver(rejection) }
    }

    /// This instance began serving these partitions: their sessions' follows through other
    /// instances continue here.
    func startedServing(_ partitions: Set<Int32>) {
        guard let ownership = store.ownership else { return }
        let coming = remoteFollows.withLock { remote -> [EngineFollow] in
            let sessions = remote.keys.filter { partitions.contains(ownership.partition(of: $0)) }
            return sessions.flatMap { remote.removeValue(forKey: $0) ?? [] }
        }
        for follow in coming { follow.move(self) }
    }

    /// This instance stopped serving these partitions: their sessions' follows go on through the
    /// instance that serves them now.
    func stoppedServing(_ partitions: Set<Int32>) {
        guard let ownership = store.ownership, remote != nil else { return }
        var moving: [EngineFollow] = []
        for shard in local {
            moving += shard.follows.withLock { local -> [EngineFollow] in
                let sessions = local.keys.filter { partitions.contains(ownership.partition(of: $0)) }
                return sessions.flatMap { local.removeValue(forKey: $0) ?? [] }
            }
        }
        guard !moving.isEmpty else { return }
        localCount.subtract(moving.count, ordering: .relaxed)
        for follow in moving { follow.move(self) }
    }

    /// Follows of sessions served here, and through other instances.
    var counts: (local: Int, remote: Int) { (localCount.load(ordering: .relaxed), remote?.count ?? 0) }

    /// Ends every follow, and every one placed later (the service stops).
    func stopAll(_ reason: String) async {
        closed.store(true, ordering: .releasing)
        var all: [EngineFollow] = []
        for shard in local {
            all += shard.follows.withLock { local -> [EngineFollow] in
                defer { local = [:] }
                return local.values.flatMap { $0 }
            }
        }
        localCount.store(0, ordering: .relaxed)
        all += remoteFollows.withLock { remote -> [EngineFollow] in
            defer { remote = [:] }
            return remote.values.flatMap { $0 }
        }
        for follow in all { follow.end(FollowEnd(.stopping, reason)) }
        await remote?.close(reason)
    }
}

/// What a follow's receiver holds, and what a batch does to it: delivered when it continues,
/// skipped when the receiver has it already, or, after a discontinuity (a new epoch, a seq
/// skipped), a new start from a snapshot.
struct FollowCursor: Equatable, Sendable {
    /// Where the receiver is (nil before its first snapshot).
    private(set) var position: StreamPosition?

    enum Step: Equatable {
        case deliver
        case skip
        case startOver
    }

    /// The receiver got a snapshot at `position`.
    mutating func snapshot(_ position: StreamPosition) { self.position = position }

    /// What to do with a batch at `next`.
    mutating func batch(_ next: StreamPosition) -> Step {
        guard let held = position else { return .skip }  // the snapshot to come has it
        if held.isFollowed(by: next) {
            position = next
            return .deliver
        }
        return held.covers(next) ? .skip : .startOver
    }
}

/// One follow: what its receiver holds, where its updates come from now, and the updates waiting
/// to reach the receiver.
///
/// Updates are decided under the follow's lock, in the order they happen, and queued; they reach
/// the receiver outside the lock, one at a time, by whichever thread holds the delivering turn
/// (``flush()``). So the receiver may call back (``resnapshot()``, ``stop()``) from its `receive`,
/// and a worker never waits for a receiver that another thread is serving.
final class EngineFollow: SessionFollow {
    let session: String
    private let receive: @Sendable (SessionUpdate) -> Void
    private let follows: SessionFollows

    enum Source {
        case none
        case local
        /// A follow through another instance is being set up (attempt number).
        case pendingRemote(Int)
        /// Through another instance; `stop` ends that follow.
        case remote(Int, stop: @Sendable () -> Void)
    }

    private struct State {
        var source = Source.none
        var cursor = FollowCursor()
        var ended = false
        /// Followed through another instance: the tree at the cursor (its follower's mirror,
        /// shared), for a snapshot asked for.
        var remoteTree: ScreenTree?
        /// Attempts to follow through another instance; consecutive ones that brought no
        /// snapshot (``lost(_:attempt:)``).
        var attempts = 0
        var failedAttempts = 0
        /// Placements begun (``SessionFollows/place(_:)``): only the latest may start the follow.
        var placements = 0
        var outbox: [SessionUpdate] = []
        /// A thread is delivering the outbox.
        var delivering = false
    }

    private let state = Locked(State())

    init(session: String, receive: @escaping @Sendable (SessionUpdate) -> Void, follows: SessionFollows) {
        self.session = session
        self.receive = receive
        self.follows = follows
    }

    var hasEnded: Bool { state.withLock { $0.ended } }

    /// Delivers the updates waiting, unless another thread is delivering them (it takes these
    /// too before it stops).
    private func flush() {
        let turn = state.withLock { state -> Bool in
            guard !state.delivering, !state.outbox.isEmpty else { return false }
            state.delivering = true
            return true
        }
        guard turn else { return }
        while true {
            let updates = state.withLock { state -> [SessionUpdate] in
                guard !state.outbox.isEmpty else {
                    state.delivering = false
                    return []
                }
                defer { state.outbox = [] }
                return state.outbox
            }
            guard !updates.isEmpty else { return }
            for update in updates { receive(update) }
        }
    }

    /// Queues the store's snapshot of the session as `kind` (a new start, or what was asked for).
    private func queueSnapshot(_ store: SessionStore, startOver: Bool, _ state: inout State) {
        let record = store.read(session)
        let position = StreamPosition(epoch: store.epoch(of: session), seq: record.seq)
        if startOver {
            state.cursor.snapshot(position)
            state.outbox.append(.snapshot(position, record.state.tree))
        } else {
            state.outbox.append(.current(position, record.state.tree))
        }
    }

    /// A placement begins: its number, which ``startLocally(_:placement:)`` and
    /// ``awaitRemote(placement:)`` compare with the latest.
    func beginPlacement() -> Int {
        state.withLock { state in
            state.placements += 1
            return state.placements
        }
    }

    /// Takes the snapshot from the store and delivers it (a session served here); false if the
    /// follow ended (its registration here taken back) or was placed again meanwhile.
    func startLocally(_ store: SessionStore, placement: Int) -> Bool {
        let started = state.withLock { state -> Bool in
            guard !state.ended, state.placements == placement else { return false }
            state.source = .local
            // The cursor moves on with this instance's batches now: a tree kept from an earlier
            // follow through another instance would no longer match it (``resnapshot()``).
            state.remoteTree = nil
            queueSnapshot(store, startOver: true, &state)
            return true
        }
        guard started else {
            if hasEnded { follows.removeLocal(self) }  // else placed again meanwhile (see place)
            return false
        }
        flush()
        return true
    }

    /// A batch published here: delivered if it continues what the receiver holds, dropped if it
    /// holds it already, else replaced by the store's snapshot.
    fileprivate func deliver(_ position: StreamPosition, _ batch: Navigator_V1_CommandBatch, _ store: SessionStore) {
        state.withLock { state in
            guard !state.ended, case .local = state.source else { return }
            switch state.cursor.batch(position) {
            case .deliver: state.outbox.append(.batch(position, batch))
            case .skip: break
            case .startOver: queueSnapshot(store, startOver: true, &state)
            }
        }
        flush()
    }

    fileprivate func deliver(_ rejection: Navigator_V1_Rejection) {
        state.withLock { state in
            guard !state.ended, state.cursor.position != nil else { return }
            state.outbox.append(.rejection(rejection))
        }
        flush()
    }

    /// Marks the follow as being set up through another instance; returns the attempt's number,
    /// which the updates and the end of that attempt carry. Nil if the follow ended or was
    /// placed again since `placement` began.
    func awaitRemote(placement: Int) -> Int? {
        state.withLock { state in
            guard !state.ended, state.placements == placement else { return nil }
            state.attempts += 1
            state.source = .pendingRemote(state.attempts)
            return state.attempts
        }
    }

    /// Records that attempt `attempt`'s updates now come through another instance; false if the
    /// follow ended or moved meanwhile (then `stop` should be called).
    func follow(remotely stop: @escaping @Sendable () -> Void, attempt: Int) -> Bool {
        state.withLock { state in
            guard !state.ended, case .pendingRemote(attempt) = state.source else { return false }
            state.source = .remote(attempt, stop: stop)
            return true
        }
    }

    /// An update of attempt `attempt` through another instance's follower (``RemoteFollows``),
    /// which keeps the Clone rule itself; `tree` is its mirror after it.
    ///
    /// Taken while the attempt is still being set up too: its follower runs on the connection's
    /// thread from the moment it is handed over, and its first snapshot can come back before
    /// ``follow(remotely:attempt:)`` records the attempt as made. Dropped then, the snapshot was
    /// never asked for again (the follower had it) and the stream stayed without one.
    func deliverRemote(_ update: SessionUpdate, tree: ScreenTree? = nil, attempt: Int) {
        state.withLock { state in
            guard !state.ended else { return }
            switch state.source {
            case .remote(attempt, _), .pendingRemote(attempt): break
            default: return  // another attempt's, or the follow moved
            }
            switch update {
            case .snapshot(let position, let snapshot), .current(let position, let snapshot):
                state.cursor.snapshot(position)
                state.remoteTree = snapshot
                state.failedAttempts = 0
                state.outbox.append(.snapshot(position, snapshot))
            case .batch(let position, _):
                // Its follower delivers batches in order after a snapshot (or resyncs first).
                guard state.cursor.batch(position) == .deliver else { return }
                state.remoteTree = tree
                state.outbox.append(update)
            case .rejection:
                guard state.cursor.position != nil else { return }
                state.outbox.append(update)
            case .ended:
                return
            }
        }
        flush()
    }

    /// Consecutive attempts through other instances that brought no snapshot, before a follow
    /// ends.
    static let maxAttempts = 10

    /// Attempt `attempt` through another instance ended (that instance stopped or cannot be
    /// reached): after a pause the follow is placed again where the session is served then —
    /// here, or through another instance. After ``maxAttempts`` that brought no snapshot, it ends.
    func lost(_ reason: String, attempt: Int) {
        let (failed, registered) = state.withLock { state -> (Int?, Bool) in
            guard !state.ended else { return (nil, true) }
            switch state.source {
            case .pendingRemote(attempt), .remote(attempt, _): break
            default: return (nil, false)  // it moved meanwhile: where it is now stays as it is
            }
            state.source = .none
            state.failedAttempts += 1
            return (state.failedAttempts, true)
        }
        if registered { follows.removeRemote(self) }
        guard let failed else { return }
        guard failed < Self.maxAttempts else {
            return end(
                FollowEnd(
                    .unreachable, "\(reason) (\(failed) attempts to follow session \(session) through another instance)"
                ))
        }
        let follows = self.follows
        Task {
            try? await Task.sleep(for: .milliseconds(200 * failed))
            follows.place(self)
        }
    }

    /// The session changed instances: follow it where it is served now (a follow through another
    /// instance is stopped first).
    fileprivate func move(_ follows: SessionFollows) {
        let (stillOn, stop) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.ended else { return (false, nil) }
            defer { state.source = .none }
            if case .remote(_, let stop) = state.source { return (true, stop) }
            return (true, nil)
        }
        stop?()
        if stillOn { follows.place(self) }
    }

    /// Ends the follow, telling the receiver why: the last update it gets.
    func end(_ reason: FollowEnd) {
        let stop = state.withLock { state -> (@Sendable () -> Void)?? in
            guard !state.ended else { return .none }
            state.ended = true
            state.outbox.append(.ended(reason))
            if case .remote(_, let stop) = state.source { return .some(stop) }
            return .some(nil)
        }
        guard let stop else { return }
        flush()
        stop?()
    }

    func resnapshot() {
        let store = follows.store
        state.withLock { state in
            guard !state.ended else { return }
            switch state.source {
            case .local:
                queueSnapshot(store, startOver: false, &state)
            case .remote, .pendingRemote:
                // The attempt's snapshot may have come before it was recorded (deliverRemote);
                // before its first, the tree is the previous attempt's, at the cursor's position.
                if let position = state.cursor.position, let tree = state.remoteTree {
                    state.outbox.append(.current(position, tree))
                }
            case .none:
                break  // a snapshot comes once it is placed
            }
        }
        flush()
    }

    func stop() {
        let (wasLocal, remoteStop) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.ended else { return (false, nil) }
            state.ended = true
            state.outbox = []
            switch state.source {
            case .local: return (true, nil)
            case .remote(_, let stop): return (false, stop)
            case .none, .pendingRemote: return (false, nil)
            }
        }
        if wasLocal { follows.removeLocal(self) }
        follows.removeRemote(self)
        remoteStop?()
    }
}
