import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Synchronization

/// The follows of sessions made in process (``NavigatorPort/follow(_:as:_:)``).
///
/// A session this instance serves is followed where its batches are made: the worker that
/// publishes a batch or a rejection hands it to the session's follows (``published(_:)``), and a
/// snapshot is read from the session store — no socket, no second copy of the tree. A session
/// another instance serves (several instances) is followed through that instance's sockets
/// (``RemoteFollows``), as a shell would. A follow goes with its session: one whose session moves
/// away (its partition lost or handed over) continues through the instance that serves it now,
/// one whose session comes here continues here, and one whose peer is lost is placed again —
/// each time with a snapshot of the new epoch.
///
/// Either way a follow delivers one consistent sequence (``EngineFollow``): a snapshot first,
/// then only the batches that continue it; anything else makes it take a new snapshot.
final class SessionFollows: Sendable {
    let store: SessionStore
    /// Several instances: how sessions served elsewhere are followed; nil with one instance.
    let remote: RemoteFollows?
    let logger: Logger
    private let local = Mutex<[String: [EngineFollow]]>([:])
    /// Follows through other instances, by session (to bring home when a partition comes here).
    private let remoteFollows = Mutex<[String: [EngineFollow]]>([:])
    /// Follows of sessions served here: the publishers' one-load check.
    private let localCount = Atomic<Int>(0)
    private let counter = Atomic<Int>(0)

    init(store: SessionStore, remote: RemoteFollows?, logger: Logger) {
        self.store = store
        self.remote = remote
        self.logger = logger
    }

    /// Follows `session`, delivering to `receive`.
    func follow(_ session: String, _ receive: @escaping @Sendable (SessionUpdate) -> Void) -> EngineFollow {
        let follow = EngineFollow(
            id: counter.wrappingAdd(1, ordering: .relaxed).newValue, session: session, receive: receive, follows: self)
        place(follow)
        return follow
    }

    /// Starts `follow` where its session is served now: here, or through another instance.
    fileprivate func place(_ follow: EngineFollow) {
        guard !follow.hasEnded else { return }
        if store.notServed(follow.session) == nil || remote == nil {
            local.withLock { $0[follow.session, default: []].append(follow) }
            localCount.add(1, ordering: .relaxed)
            // Registered first: a batch published meanwhile is either in the snapshot, or comes
            // after it (and the follow takes what continues the snapshot).
            follow.startLocally(store)
        } else {
            remoteFollows.withLock { $0[follow.session, default: []].append(follow) }
            remote!.start(follow)
        }
    }

    /// Forgets `follow` as one through another instance (it stopped, or moves).
    fileprivate func removeRemote(_ follow: EngineFollow) {
        remoteFollows.withLock { remote in
            guard var list = remote[follow.session], let index = list.firstIndex(where: { $0 === follow }) else {
                return
            }
            list.remove(at: index)
            remote[follow.session] = list.isEmpty ? nil : list
        }
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

    fileprivate func removeLocal(_ follow: EngineFollow) {
        let removed = local.withLock { local -> Bool in
            guard var list = local[follow.session], let index = list.firstIndex(where: { $0 === follow }) else {
                return false
            }
            list.remove(at: index)
            local[follow.session] = list.isEmpty ? nil : list
            return true
        }
        if removed { localCount.subtract(1, ordering: .relaxed) }
    }

    private func localFollows(of session: String) -> [EngineFollow]? {
        guard localCount.load(ordering: .relaxed) > 0 else { return nil }
        return local.withLock { $0[session] }
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

    /// This instance stopped serving these partitions: their sessions' follows go on through the
    /// instance that serves them now.
    func stoppedServing(_ partitions: Set<Int32>) {
        guard let ownership = store.ownership, remote != nil else { return }
        let moving = local.withLock { local -> [EngineFollow] in
            let sessions = local.keys.filter { partitions.contains(ownership.partition(of: $0)) }
            return sessions.flatMap { local.removeValue(forKey: $0) ?? [] }
        }
        guard !moving.isEmpty else { return }
        localCount.subtract(moving.count, ordering: .relaxed)
        for follow in moving { follow.move(self) }
    }

    /// Follows of sessions served here, and through other instances.
    var counts: (local: Int, remote: Int) { (localCount.load(ordering: .relaxed), remote?.count ?? 0) }

    /// Ends every follow (the service stops).
    func stopAll(_ reason: String) async {
        var all = local.withLock { local -> [EngineFollow] in
            defer { local = [:] }
            return local.values.flatMap { $0 }
        }
        all += remoteFollows.withLock { remote -> [EngineFollow] in
            defer { remote = [:] }
            return remote.values.flatMap { $0 }
        }
        localCount.store(0, ordering: .relaxed)
        for follow in all { follow.end(reason) }
        await remote?.close(reason)
    }
}

/// One follow: the position its receiver holds, and where its updates come from now.
final class EngineFollow: SessionFollow {
    let id: Int
    let session: String
    private let receive: @Sendable (SessionUpdate) -> Void
    private let follows: SessionFollows

    enum Source {
        case local
        /// Through another instance; `stop` ends that follow.
        case remote(stop: @Sendable () -> Void)
        case none
    }

    private struct State {
        var source = Source.none
        /// What the receiver holds (nil before its first snapshot).
        var position: StreamPosition?
        /// Followed through another instance: the tree at `position` (its follower's mirror,
        /// shared), for a snapshot asked for.
        var remoteTree: ScreenTree?
        /// Attempts to follow through another instance since the last snapshot (``lost(_:)``).
        var attempts = 0
        var ended = false
    }

    // Held while an update is delivered, so updates reach the receiver one at a time, in order.
    private let state = Mutex(State())
    /// A snapshot was asked for (``resnapshot()``) and not yet delivered: whoever holds the lock
    /// delivers it as soon as it can — the receiver may ask from inside its `receive`.
    private let snapshotWanted = Atomic<Bool>(false)

    fileprivate init(
        id: Int, session: String, receive: @escaping @Sendable (SessionUpdate) -> Void, follows: SessionFollows
    ) {
        self.id = id
        self.session = session
        self.receive = receive
        self.follows = follows
    }

    /// Takes the snapshot from the store and delivers it (a session served here).
    fileprivate func startLocally(_ store: SessionStore) {
        let started = state.withLock { state -> Bool in
            guard !state.ended else { return false }
            state.source = .local
            snapshot(store, &state)
            return true
        }
        guard started else { return follows.removeLocal(self) }  // it stopped meanwhile
        serveWanted()
    }

    var hasEnded: Bool { state.withLock { $0.ended } }

    private func snapshot(_ store: SessionStore, _ state: inout State) {
        let record = store.read(session)
        let position = StreamPosition(epoch: store.epoch(of: session), seq: record.seq)
        state.position = position
        receive(.snapshot(position, record.state.tree))
    }

    /// A batch published here: delivered if it continues what the receiver holds; a batch it
    /// holds already is dropped; after a discontinuity (a new epoch, a seq skipped) the receiver
    /// gets the store's snapshot instead.
    fileprivate func deliver(_ position: StreamPosition, _ batch: Navigator_V1_CommandBatch, _ store: SessionStore) {
        state.withLock { state in
            guard !state.ended, case .local = state.source, let held = state.position else { return }
            if held.isFollowed(by: position) {
                state.position = position
                receive(.batch(position, batch))
            } else if !held.covers(position) {
                snapshot(store, &state)
            }
        }
        serveWanted()
    }

    fileprivate func deliver(_ rejection: Navigator_V1_Rejection) {
        state.withLock { state in
            guard !state.ended, state.position != nil else { return }
            receive(.rejection(rejection))
        }
        serveWanted()
    }

    /// An update from another instance's follower (``RemoteFollows``), which keeps the Clone
    /// rule itself: snapshots and batches are passed on as they come, batches that the receiver
    /// holds dropped; `tree` is the follower's mirror after it.
    func deliverRemote(_ update: SessionUpdate, tree: ScreenTree? = nil) {
        if case .ended(let reason) = update { return end(reason) }
        state.withLock { state in
            guard !state.ended, case .remote = state.source else { return }
            switch update {
            case .snapshot(let position, let tree):
                state.position = position
                state.remoteTree = tree
                state.attempts = 0
            case .batch(let position, _):
                guard let held = state.position, !held.covers(position) else { return }
                state.position = position
                state.remoteTree = tree
            case .rejection:
                guard state.position != nil else { return }
            case .ended:
                return
            }
            receive(update)
        }
        serveWanted()
    }

    /// Records that updates now come from another instance; false if the follow ended meanwhile
    /// (then `stop` should be called).
    func follow(remotely stop: @escaping @Sendable () -> Void) -> Bool {
        let taken = state.withLock { state -> Bool in
            guard !state.ended else { return false }
            state.source = .remote(stop: stop)
            return true
        }
        if !taken { follows.removeRemote(self) }
        return taken
    }

    /// The session changed instances: follow it where it is served now (a follow through another
    /// instance stops that one first).
    fileprivate func move(_ follows: SessionFollows) {
        let (stillOn, stop) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.ended else { return (false, nil) }
            defer { state.source = .none }
            if case .remote(let stop) = state.source { return (true, stop) }
            return (true, nil)
        }
        stop?()
        if stillOn { follows.place(self) }
    }

    /// Consecutive attempts to follow through another instance that ended before a snapshot.
    static let maxAttempts = 10

    /// The follow through another instance ended (that instance stopped or cannot be reached):
    /// after a pause, it is placed again where the session is served then — here, or through
    /// another instance. After ``maxAttempts`` attempts that brought no snapshot it ends.
    func lost(_ reason: String) {
        let attempt = state.withLock { state -> Int? in
            guard !state.ended, case .remote = state.source else { return nil }
            state.source = .none
            state.attempts += 1
            return state.attempts
        }
        follows.removeRemote(self)
        guard let attempt else { return }
        guard attempt < Self.maxAttempts else {
            return end("\(reason) (\(attempt) attempts to follow session \(session) through another instance)")
        }
        let follows = self.follows
        Task {
            try? await Task.sleep(for: .milliseconds(200 * attempt))
            follows.place(self)
        }
    }

    /// Ends the follow, telling the receiver why: the last update it gets (told outside the lock,
    /// so that it may stop the follow from its `receive`).
    func end(_ reason: String) {
        let (ended, stop) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.ended else { return (false, nil) }
            state.ended = true
            if case .remote(let stop) = state.source { return (true, stop) }
            return (true, nil)
        }
        guard ended else { return }
        receive(.ended(reason))
        stop?()
    }

    func resnapshot() {
        snapshotWanted.store(true, ordering: .releasing)
        serveWanted()
    }

    /// Delivers the snapshot asked for, unless an update is being delivered right now: then its
    /// deliverer does, once it let go of the lock (every delivery ends by calling this).
    private func serveWanted() {
        let store = follows.store
        while snapshotWanted.load(ordering: .acquiring) {
            let served: Void? = state.withLockIfAvailable { state in
                guard snapshotWanted.exchange(false, ordering: .acquiringAndReleasing), !state.ended else { return }
                switch state.source {
                case .local:
                    snapshot(store, &state)
                case .remote:
                    if let position = state.position, let tree = state.remoteTree {
                        receive(.snapshot(position, tree))
                    }
                case .none:
                    break  // moving: a snapshot comes once it is placed
                }
            }
            if served == nil { return }
        }
    }

    func stop() {
        let (wasLocal, remoteStop) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.ended else { return (false, nil) }
            state.ended = true
            switch state.source {
            case .local: return (true, nil)
            case .remote(let stop): return (false, stop)
            case .none: return (false, nil)
            }
        }
        if wasLocal { follows.removeLocal(self) }
        if remoteStop != nil { follows.removeRemote(self) }
        remoteStop?()
    }
}
