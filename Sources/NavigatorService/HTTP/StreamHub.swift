import Foundation
import Logging
import NIOCore
import NavigatorClient
import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import Synchronization

/// Settings of the HTTP session streams.
struct StreamSettings: Sendable {
    /// Batches kept per streamed session for resuming, at most.
    var historySize = 64
    /// How long a batch is kept for resuming, and how long a session stays followed after its
    /// last stream closed (a client that reconnects within it gets only what it missed).
    var historySeconds = 120
    /// Events queued per connection; a reader that falls further behind gets a snapshot.
    var queueSize = 64
    /// Stream connections open at once, on this instance.
    var maxStreams = 100_000
    /// A heartbeat is written to a stream idle for this long.
    var heartbeatSeconds = 15
    /// Sessions one client connection to the service follows (2 topics each, batches and
    /// rejections: the service's `maxSubscriptionsPerPeer` bounds it).
    var sessionsPerConnection = 3_000
}

/// The HTTP session streams of this instance: for each session streamed, one follower of the
/// session through the service's own commands socket (a mirror kept by the Clone pattern, so it
/// follows the session across restarts, failovers and to the instance that serves it), a short
/// history of its batches, and the connections streaming it. Batches are encoded once per
/// session, whatever the number of connections.
final class StreamHub: Sendable {
    let settings: StreamSettings
    let logger: Logger
    private let endpoints: @Sendable () async throws -> ServiceEndpoints
    private let pool: FollowerPool
    private let channels = Mutex<[String: Channel]>([:])
    private let open = Atomic<Int>(0)

    init(settings: StreamSettings, logger: Logger, endpoints: @escaping @Sendable () async throws -> ServiceEndpoints) {
        self.settings = settings
        self.logger = logger
        self.endpoints = endpoints
        self.pool = FollowerPool(capacity: settings.sessionsPerConnection, endpoints: endpoints)
    }

    private let closing = Atomic<Bool>(false)

    /// Ends every stream and takes no new one (the service is stopping).
    func shutDown() {
        closing.store(true, ordering: .releasing)
        let all = channels.withLock { channels -> [Channel] in
            defer { channels = [:] }
            return Array(channels.values)
        }
        for channel in all { channel.fail("navigatord is stopping") }
    }

    static let stoppingError = HTTPAPI.APIError(.shuttingDown, "navigatord is stopping and opens no new stream; retry")

    /// Stream connections open now.
    var connections: Int { open.load(ordering: .relaxed) }

    /// Opens a stream of `session`, resuming from `since` if given. The queue's first items are
    /// a snapshot, or `recovered` and the batches missed.
    func subscribe(_ session: String, since: (epoch: UInt64, seq: UInt64)?) async throws -> StreamSubscription {
        guard !closing.load(ordering: .acquiring) else {
            throw Self.stoppingError
        }
        guard open.add(1, ordering: .relaxed).newValue <= settings.maxStreams else {
            open.subtract(1, ordering: .relaxed)
            throw HTTPAPI.APIError(
                .overloaded,
                "this instance streams \(settings.maxStreams) connections already (maxStreams); expected fewer — retry later or on another instance"
            )
        }
        let queue = StreamQueue(capacity: settings.queueSize)
        let (channel, fresh) = channels.withLock { channels -> (Channel, Bool) in
            if let channel = channels[session] { return (channel, false) }
            let channel = Channel(session: session, settings: settings)
            channels[session] = channel
            return (channel, true)
        }
        let id = channel.join(queue, since: since)
        if fresh {
            do {
                let (connection, slot) = try await pool.take()
                channel.follow(
                    connection, release: { [pool] in pool.give(back: slot) },
                    ended: { [weak self] reason in self?.ended(session, channel, reason) })
            } catch {
                channels.withLock { if $0[session] === channel { $0[session] = nil } }
                channel.fail("navigatord's sockets cannot be reached: \(error)")
                open.subtract(1, ordering: .relaxed)
                throw error
            }
        }
        return StreamSubscription(hub: self, channel: channel, id: id, queue: queue)
    }

    fileprivate func leave(_ channel: Channel, id: Int) {
        channel.leave(id)
        open.subtract(1, ordering: .relaxed)
    }

    /// A channel's follower ended (the service could not give a snapshot in time, or the hub is
    /// closing): its connections are closed (clients reconnect) and it is forgotten.
    private func ended(_ session: String, _ channel: Channel, _ reason: String) {
        channels.withLock { if $0[session] === channel { $0[session] = nil } }
        logger.notice(
            "a session stream's follower ended; its streams are closed and their clients reconnect",
            metadata: ["session": "\(LogText(session))", "reason": "\(LogText(reason))"])
    }

    /// Heartbeats to idle streams, and sessions nobody has streamed for `historySeconds`
    /// forgotten; runs until cancelled, then closes every stream.
    func maintain() async {
        let period = Duration.seconds(max(1, settings.heartbeatSeconds))
        var nextHeartbeat = ContinuousClock.now + period
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(min(1000, Int(period.components.seconds) * 1000)))
            let now = ContinuousClock.now
            let all = channels.withLock { Array($0.values) }
            if now >= nextHeartbeat {
                for channel in all { channel.heartbeat() }
                nextHeartbeat = now + period
            }
            let idleFor = Duration.seconds(settings.historySeconds)
            for channel in all where channel.idle(since: now - idleFor) {
                let removed = channels.withLock { channels -> Bool in
                    guard channels[channel.session] === channel, channel.idle(since: now - idleFor) else {
                        return false
                    }
                    channels[channel.session] = nil
                    return true
                }
                if removed { channel.stop() }
            }
        }
        shutDown()
        await pool.close()
    }
}

/// One open stream: its queue, and leaving the channel when it ends.
final class StreamSubscription: Sendable {
    private let hub: StreamHub
    private let channel: Channel
    private let id: Int
    let queue: StreamQueue
    private let left = Atomic<Bool>(false)
    /// The session streamed.
    var session: String { channel.session }

    fileprivate init(hub: StreamHub, channel: Channel, id: Int, queue: StreamQueue) {
        self.hub = hub
        self.channel = channel
        self.id = id
        self.queue = queue
    }

    /// The next frame to write: what was queued, or the snapshot for a reader that fell behind.
    func next() async -> StreamFrame? {
        while true {
            switch await queue.next() {
            case .frame(let frame): return frame
            case .snapshotNow: if let frame = snapshotNow() { return frame }
            case nil: return nil
            }
        }
    }

    /// The session as it is now, for a reader that fell behind (nil before the first snapshot).
    func snapshotNow() -> StreamFrame? { channel.snapshotFor(queue) }

    /// What ``poll()`` finds.
    enum Polled {
        case frame(StreamFrame)
        case empty
        case closed
    }

    /// The next frame to write without waiting (a reader that fell behind gets the snapshot), for
    /// the pipeline's stream handlers; `empty` re-arms the queue's notification.
    func poll() -> Polled {
        while true {
            switch queue.poll() {
            case .item(.frame(let frame)): return .frame(frame)
            case .item(.snapshotNow): if let frame = snapshotNow() { return .frame(frame) }
            case .empty: return .empty
            case .closed: return .closed
            }
        }
    }

    /// Secure mode: at `expiry` the stream gets its last event, `closed`, saying the token expired.
    func expire(at expiry: Date?, on loop: any EventLoop) -> Scheduled<Void>? {
        guard let expiry else { return nil }
        let queue = self.queue
        return loop.scheduleTask(in: .milliseconds(Self.milliseconds(until: expiry))) {
            queue.push(.frame(HTTPAPI.expiredFrame))
        }
    }

    /// Milliseconds from now to `date`, within 0 and twice a token's longest lifetime (the
    /// claims were checked already; this keeps the arithmetic safe whatever the date).
    static func milliseconds(until date: Date) -> Int64 {
        let milliseconds = date.timeIntervalSinceNow * 1000
        guard milliseconds.isFinite, milliseconds > 0 else { return 0 }
        return Int64(min(milliseconds, AccessToken.maxLifetime * 2000))
    }

    func close() {
        guard !left.exchange(true, ordering: .relaxed) else { return }
        queue.close()
        hub.leave(channel, id: id)
    }

    deinit { close() }
}

/// One streamed session.
final class Channel: Sendable {
    let session: String
    let settings: StreamSettings

    private struct Live {
        var tree: ScreenTree
        var epoch: UInt64
        var seq: UInt64
    }

    private struct State {
        var live: Live?
        /// Batches of the live epoch, in seq order, contiguous, ending at `live.seq`.
        var history: [StreamFrame] = []
        var connections: [Int: (queue: StreamQueue, since: (epoch: UInt64, seq: UInt64)?)] = [:]
        var nextID = 0
        var emptySince: ContinuousClock.Instant?
        /// The follow through the service's own commands socket, and giving its place back.
        var following: (connection: NavigatorConnection, following: Following, release: @Sendable () -> Void)?
        /// Why the follow ended, if it ended by itself.
        var followEnded: String?
        var ended = false
    }

    private let state = Mutex(State())

    init(session: String, settings: StreamSettings) {
        self.session = session
        self.settings = settings
    }

    /// Adds a connection; if the session's position is known, its first items are queued now,
    /// else when the first snapshot comes.
    func join(_ queue: StreamQueue, since: (epoch: UInt64, seq: UInt64)?) -> Int {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.connections[id] = (queue, since)
            state.emptySince = nil
            if state.ended {
                queue.close()
            } else if state.live != nil {
                start(queue, since: since, &state)
            }
            return id
        }
    }

    func leave(_ id: Int) {
        state.withLock { state in
            state.connections[id] = nil
            if state.connections.isEmpty { state.emptySince = .now }
        }
    }

    /// Whether nobody has streamed the session since `instant`.
    func idle(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { state in state.emptySince.map { $0 <= instant } ?? false }
    }

    /// Starts following the session on `connection`: its events come on the connection's I/O
    /// thread (no task per session).
    func follow(
        _ connection: NavigatorConnection, release: @escaping @Sendable () -> Void,
        ended: @escaping @Sendable (String) -> Void
    ) {
        // The pool's place is given back once, whichever way the follow ends.
        let once = Once()
        let release: @Sendable () -> Void = { if once.first() { release() } }
        let following = connection.follow(
            .session(session), audit: false, onEvent: { [weak self] event in self?.receive(event) },
            onEnd: { [weak self] error in
                guard let self else { return release() }
                let reason = error.map { "\($0)" } ?? "the follower stopped"
                let mine = state.withLock { state in
                    state.followEnded = reason
                    defer { state.following = nil }
                    return state.following != nil
                }
                // Not yet recorded: `follow` sees `followEnded` and ends it.
                guard mine else { return }
                release()
                ended(reason)
                fail(reason)
            })
        // The follow may have ended already (its `onEnd` found nothing recorded), or the channel
        // failed meanwhile (the hub is stopping): then it is not kept.
        let (endedItself, channelEnded) = state.withLock { state -> (String?, Bool) in
            if state.followEnded != nil || state.ended { return (state.followEnded, state.ended) }
            state.following = (connection, following, release)
            return (nil, false)
        }
        guard endedItself != nil || channelEnded else { return }
        connection.unfollow(following)
        release()
        if let endedItself, !channelEnded {
            ended(endedItself)
            fail(endedItself)
        }
    }

    private func receive(_ event: SessionEvent) {
        switch event {
        case .snapshot(let session, let seq, let epoch, let tree):
            let frame = Self.snapshotFrame(session: session, epoch: epoch, seq: seq, tree: tree)
            state.withLock { state in
                let first = state.live == nil
                state.live = Live(tree: tree, epoch: epoch, seq: seq)
                // A resync may have skipped batches: the history no longer reaches the present.
                state.history = []
                for (_, connection) in state.connections {
                    if first {
                        start(connection.queue, since: connection.since, &state)
                    } else {
                        connection.queue.push(.frame(frame))
                    }
                }
            }
        case .batch(let batch, let header, let tree):
            var event = Navigator_V1_StreamEvent()
            event.batch = batch
            let frame = StreamFrame(
                .batch, position: (header.epoch, header.seq), json: (try? event.jsonUTF8Bytes()) ?? [])
            state.withLock { state in
                state.live = Live(tree: tree, epoch: header.epoch, seq: header.seq)
                state.history.append(frame)
                trim(&state.history)
                for (_, connection) in state.connections { connection.queue.push(.frame(frame)) }
            }
        case .rejection:
            let frame = StreamFrame(.rejection, position: nil, json: (try? event.streamEvent.jsonUTF8Bytes()) ?? [])
            state.withLock { state in
                for (_, connection) in state.connections { connection.queue.push(.frame(frame)) }
            }
        case .gap, .resync, .audit, .published:
            break  // a snapshot follows a gap or resync; audit records are not streamed
        }
    }

    /// Queues a new connection's first items: `recovered` and what it missed when `since` is
    /// still covered, else a snapshot. Called with the state locked and `live` set.
    private func start(_ queue: StreamQueue, since: (epoch: UInt64, seq: UInt64)?, _ state: inout State) {
        guard let live = state.live else { return }
        if let since, since.epoch == live.epoch, since.seq <= live.seq {
            let missed = state.history.filter { ($0.position?.seq ?? 0) > since.seq }
            // Covered when nothing was missed, or the history holds every batch after `since`.
            if since.seq == live.seq || missed.first?.position?.seq == since.seq + 1 {
                var event = Navigator_V1_StreamEvent()
                event.recovered = .with {
                    $0.epoch = since.epoch
                    $0.seq = since.seq
                    $0.missed = UInt32(missed.count)
                }
                queue.push(
                    .frame(
                        StreamFrame(.recovered, position: since, json: (try? event.jsonUTF8Bytes()) ?? [])))
                for frame in missed { queue.push(.frame(frame)) }
                return
            }
        }
        queue.push(.frame(Self.snapshotFrame(session: session, epoch: live.epoch, seq: live.seq, tree: live.tree)))
    }

    /// The snapshot for a reader that fell behind: the session as it is now; batches still
    /// queued that it already holds are dropped.
    func snapshotFor(_ queue: StreamQueue) -> StreamFrame? {
        state.withLock { state -> StreamFrame? in
            guard let live = state.live else { return nil }
            queue.dropCovered(epoch: live.epoch, seq: live.seq)
            return Self.snapshotFrame(session: session, epoch: live.epoch, seq: live.seq, tree: live.tree)
        }
    }

    func heartbeat() {
        let queues = state.withLock { $0.connections.values.map(\.queue) }
        for queue in queues { queue.pushHeartbeat() }
    }

    /// Ends the follower and every stream.
    func fail(_ reason: String) {
        let (queues, following) = state.withLock { state in
            state.ended = true
            defer { state.following = nil }
            return (state.connections.values.map(\.queue), state.following)
        }
        if let following {
            following.connection.unfollow(following.following)
            following.release()
        }
        for queue in queues { queue.close() }
    }

    /// Stops following (nobody streams the session any more).
    func stop() { fail("nobody streams the session") }

    private func trim(_ history: inout [StreamFrame]) {
        if history.count > settings.historySize { history.removeFirst(history.count - settings.historySize) }
        let oldest = ContinuousClock.now - .seconds(settings.historySeconds)
        if let keep = history.firstIndex(where: { $0.at >= oldest }), keep > 0 { history.removeFirst(keep) }
    }

    static func snapshotFrame(session: String, epoch: UInt64, seq: UInt64, tree: ScreenTree) -> StreamFrame {
        var event = Navigator_V1_StreamEvent()
        event.snapshot = .with {
            $0.session = session
            $0.seq = seq
            $0.epoch = epoch
            $0.tree = Navigator_V1_ScreenTree(tree)
        }
        return StreamFrame(.snapshot, position: (epoch, seq), json: (try? event.jsonUTF8Bytes()) ?? [])
    }
}

/// Client connections to the service's own sockets for the followers, each following at most
/// `capacity` sessions (the service drops a subscriber holding more than
/// `maxSubscriptionsPerPeer` topics). One connection is opened at a time: takers that find no
/// room wait for it, so a burst of new sessions opens one connection, not one each (opening one
/// only starts its thread and sockets: the wait is short, and if it fails every taker waiting
/// gets its error; the next take tries again).
final class FollowerPool: Sendable {
    let capacity: Int
    private let endpoints: @Sendable () async throws -> ServiceEndpoints

    private enum Phase {
        /// No connection is being opened.
        case ready
        /// A connection is being opened; takers wait for it.
        case opening(Task<Void, any Error>)
        /// Closed: nothing is taken or opened any more.
        case closed
    }

    private struct State {
        var slots: [(connection: NavigatorConnection, used: Int)] = []
        var phase = Phase.ready
        /// Connections opened and not yet closed.
        var live = 0
    }

    private let state = Mutex(State())

    init(capacity: Int, endpoints: @escaping @Sendable () async throws -> ServiceEndpoints) {
        self.capacity = max(1, capacity)
        self.endpoints = endpoints
    }

    /// Connections opened and not yet closed.
    var connections: Int { state.withLock { $0.live } }

    private enum Found {
        case slot(NavigatorConnection, Int)
        case opening(Task<Void, any Error>)
        case closed
    }

    /// A connection with room for one more follower, and its slot to give back.
    func take() async throws -> (NavigatorConnection, Int) {
        while true {
            let found = state.withLock { state -> Found in
                switch state.phase {
                case .closed:
                    return .closed
                case .opening(let opening):
                    if let slot = Self.room(&state, capacity) { return slot }
                    return .opening(opening)
                case .ready:
                    if let slot = Self.room(&state, capacity) { return slot }
                    // Its body waits for this lock to be released before it looks at the state.
                    let opening = Task { try await self.open() }
                    state.phase = .opening(opening)
                    return .opening(opening)
                }
            }
            switch found {
            case .slot(let connection, let index): return (connection, index)
            case .opening(let opening): try await opening.value
            case .closed: throw StreamHub.stoppingError
            }
        }
    }

    private static func room(_ state: inout State, _ capacity: Int) -> Found? {
        guard let index = state.slots.firstIndex(where: { $0.used < capacity }) else { return nil }
        state.slots[index].used += 1
        return .slot(state.slots[index].connection, index)
    }

    /// Opens one more connection and makes it a slot; closes it at once if the pool closed
    /// meanwhile (``close()`` waits for that).
    private func open() async throws {
        let opened: Result<NavigatorConnection, any Error>
        do {
            opened = .success(try await NavigatorConnection(endpoints: try await endpoints(), timeout: .seconds(5)))
        } catch {
            opened = .failure(error)
        }
        let kept = state.withLock { state -> Bool in
            if case .success = opened { state.live += 1 }
            guard case .opening = state.phase else { return false }
            state.phase = .ready
            if case .success(let connection) = opened { state.slots.append((connection, 0)) }
            return true
        }
        let connection = try opened.get()
        guard kept else {
            await connection.close()
            state.withLock { $0.live -= 1 }
            throw StreamHub.stoppingError
        }
    }

    func give(back slot: Int) {
        state.withLock { state in if slot < state.slots.count { state.slots[slot].used -= 1 } }
    }

    /// Closes every connection, the one being opened included, and takes no more.
    func close() async {
        let (all, opening) = state.withLock { state -> ([NavigatorConnection], Task<Void, any Error>?) in
            let opening: Task<Void, any Error>? = if case .opening(let opening) = state.phase { opening } else { nil }
            state.phase = .closed
            defer { state.slots = [] }
            return (state.slots.map(\.connection), opening)
        }
        for connection in all { await connection.close() }
        state.withLock { $0.live -= all.count }
        _ = try? await opening?.value
    }
}

/// True the first time only.
final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}
