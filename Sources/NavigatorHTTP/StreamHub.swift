import Foundation
import Logging
import NIOCore
import NavigatorCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import SwiftProtobuf
import Synchronization

/// Settings of the HTTP session streams.
public struct StreamSettings: Sendable, Hashable {
    /// Batches kept per streamed session for resuming, at most.
    public var historySize = 64
    /// How long a batch is kept for resuming, and how long a session stays followed after its
    /// last stream closed (a client that reconnects within it gets only what it missed).
    public var historySeconds = 120
    /// Events queued per connection; a reader that falls further behind gets a snapshot.
    public var queueSize = 64
    /// Stream connections open at once, on this instance.
    public var maxStreams = 100_000
    /// A heartbeat is written to a stream idle for this long.
    public var heartbeatSeconds = 15

    public init() {}
}

/// The HTTP session streams of this instance: for each session streamed, one follow of it
/// through the ``NavigatorPort`` (the engine serves it in process), a short history of its
/// batches, and the connections streaming it. Events are encoded once per session, whatever the
/// number of connections; the hub keeps no tree of its own — a connection that needs a snapshot
/// (a new one that cannot resume, a reader that fell behind) gets the one the engine takes.
final class StreamHub: Sendable {
    let settings: StreamSettings
    let logger: Logger
    private let port: any NavigatorPort
    private let sessions = Mutex<[String: StreamedSession]>([:])
    private let open = Atomic<Int>(0)
    private let closing = Atomic<Bool>(false)

    init(settings: StreamSettings, port: any NavigatorPort, logger: Logger) {
        self.settings = settings
        self.port = port
        self.logger = logger
    }

    /// Ends every stream and takes no new one (the service is stopping).
    func shutDown() {
        closing.store(true, ordering: .releasing)
        let all = sessions.withLock { sessions -> [StreamedSession] in
            defer { sessions = [:] }
            return Array(sessions.values)
        }
        for session in all { session.end() }
    }

    static let stoppingError = HTTPAPI.APIError(.shuttingDown, "navigatord is stopping and opens no new stream; retry")

    /// Stream connections open now.
    var connections: Int { open.load(ordering: .relaxed) }

    /// Sessions streamed (followed) now.
    var streamedSessions: Int { sessions.withLock { $0.count } }

    /// Opens a stream of `session` for `caller`, resuming from `since` if given. Its queue's
    /// first items are a snapshot, or `recovered` and the batches missed.
    func subscribe(_ session: String, since: StreamPosition?, as caller: Caller) throws(HTTPAPI.APIError)
        -> StreamSubscription
    {
        guard !closing.load(ordering: .acquiring) else { throw Self.stoppingError }
        if let refusal = port.refusal(toFollow: session, by: caller) {
            throw HTTPAPI.APIError(refusal.code, refusal.message)
        }
        guard open.add(1, ordering: .relaxed).newValue <= settings.maxStreams else {
            open.subtract(1, ordering: .relaxed)
            throw HTTPAPI.APIError(
                .overloaded,
                "this instance streams \(settings.maxStreams) connections already (maxStreams); expected fewer — retry later or on another instance"
            )
        }
        let queue = StreamQueue(capacity: settings.queueSize)
        while true {
            let (streamed, fresh) = sessions.withLock { sessions -> (StreamedSession, Bool) in
                if let streamed = sessions[session] { return (streamed, false) }
                let streamed = StreamedSession(session: session, settings: settings)
                sessions[session] = streamed
                return (streamed, true)
            }
            if fresh {
                do {
                    streamed.following(
                        try port.follow(session, as: caller) { [weak streamed] update in streamed?.receive(update) })
                } catch {
                    sessions.withLock { if $0[session] === streamed { $0[session] = nil } }
                    streamed.end()
                    open.subtract(1, ordering: .relaxed)
                    throw HTTPAPI.APIError(error.code, error.message)
                }
            }
            // A session whose follow ended meanwhile is replaced by a fresh one.
            guard let id = streamed.join(queue, since: since) else {
                sessions.withLock { if $0[session] === streamed { $0[session] = nil } }
                continue
            }
            return StreamSubscription(hub: self, streamed: streamed, id: id, queue: queue, caller: caller)
        }
    }

    fileprivate func leave(_ streamed: StreamedSession, id: Int) {
        streamed.leave(id)
        open.subtract(1, ordering: .relaxed)
    }

    /// Heartbeats to idle streams, and sessions nobody has streamed for `historySeconds`
    /// forgotten; runs until cancelled, then closes every stream.
    func maintain() async {
        let period = Duration.seconds(max(1, settings.heartbeatSeconds))
        var nextHeartbeat = ContinuousClock.now + period
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(min(1000, Int(period.components.seconds) * 1000)))
            let now = ContinuousClock.now
            let all = sessions.withLock { Array($0.values) }
            if now >= nextHeartbeat {
                for streamed in all { streamed.heartbeat() }
                nextHeartbeat = now + period
            }
            let idleFor = Duration.seconds(settings.historySeconds)
            for streamed in all where streamed.idle(since: now - idleFor) || streamed.hasEnded {
                let removed = sessions.withLock { sessions -> Bool in
                    guard sessions[streamed.session] === streamed,
                        streamed.idle(since: now - idleFor) || streamed.hasEnded
                    else { return false }
                    sessions[streamed.session] = nil
                    return true
                }
                if removed { streamed.end() }
            }
        }
        shutDown()
    }
}

/// One open stream: its queue, and leaving its session when it ends.
final class StreamSubscription: Sendable {
    private let hub: StreamHub
    private let streamed: StreamedSession
    private let id: Int
    let queue: StreamQueue
    /// Who opened it (WebSocket requests are asked as this caller).
    let caller: Caller
    private let left = Atomic<Bool>(false)
    /// The session streamed.
    var session: String { streamed.session }

    fileprivate init(hub: StreamHub, streamed: StreamedSession, id: Int, queue: StreamQueue, caller: Caller) {
        self.hub = hub
        self.streamed = streamed
        self.id = id
        self.queue = queue
        self.caller = caller
    }

    /// Secure mode: at `expiry` the stream gets its last event, `closed`, saying the token expired.
    func expire(at expiry: Date?, on loop: any EventLoop) -> Scheduled<Void>? {
        guard let expiry else { return nil }
        let queue = self.queue
        return loop.scheduleTask(in: .milliseconds(Self.milliseconds(until: expiry))) {
            _ = queue.push(HTTPAPI.expiredFrame)
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
        hub.leave(streamed, id: id)
    }

    deinit { close() }
}

/// One streamed session: its follow through the port, the position and history of its batches,
/// and its connections.
final class StreamedSession: Sendable {
    let session: String
    let settings: StreamSettings

    private struct Connection {
        var queue: StreamQueue
        /// Where it resumes from; nil once it started (or to start with a snapshot).
        var since: StreamPosition?
        /// It waits for a snapshot (new, or it fell behind): batches are not queued to it
        /// meanwhile (the snapshot has them).
        var waiting: Bool
    }

    private struct State {
        /// The position of the last snapshot or batch received.
        var position: StreamPosition?
        /// Batches of the current epoch, in seq order, contiguous, ending at `position`.
        var history: [StreamFrame] = []
        var connections: [Int: Connection] = [:]
        var nextID = 0
        var emptySince: ContinuousClock.Instant?
        var follow: (any SessionFollow)?
        /// A snapshot was asked of the follow and has not come yet.
        var snapshotAsked = false
        var ended = false
    }

    private let state = Mutex(State())

    init(session: String, settings: StreamSettings) {
        self.session = session
        self.settings = settings
    }

    /// Records the follow that feeds this session (stopped at once if the session ended).
    func following(_ follow: any SessionFollow) {
        let keep = state.withLock { state -> Bool in
            guard !state.ended else { return false }
            state.follow = follow
            return true
        }
        if !keep { follow.stop() }
    }

    /// Adds a connection; its first items are queued now if its resume position is covered,
    /// else when the next snapshot comes (asked for here). Nil if the session ended.
    func join(_ queue: StreamQueue, since: StreamPosition?) -> Int? {
        let (id, ask) = state.withLock { state -> (Int?, (any SessionFollow)?) in
            guard !state.ended else { return (nil, nil) }
            let id = state.nextID
            state.nextID += 1
            state.emptySince = nil
            state.connections[id] = Connection(queue: queue, since: since, waiting: true)
            // Before the first snapshot the connection waits for it (it is coming).
            guard let position = state.position else { return (id, nil) }
            if start(id, at: position, &state) { return (id, nil) }
            return (id, askSnapshot(&state))
        }
        ask?.resnapshot()
        return id
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

    var hasEnded: Bool { state.withLock { $0.ended } }

    /// An update from the follow (on the engine's thread, in order).
    func receive(_ update: SessionUpdate) {
        switch update {
        case .snapshot(let position, let tree):
            let frame = Self.snapshotFrame(session: session, position: position, tree: tree)
            let asks = state.withLock { state -> [any SessionFollow] in
                let moved = state.position != position
                state.position = position
                state.snapshotAsked = false
                // The snapshot has what the history had: it starts over from here.
                if moved { state.history = [] }
                var ask = false
                for (id, connection) in state.connections {
                    if connection.waiting {
                        if !start(id, at: position, &state, snapshot: frame) { ask = true }
                    } else if moved {
                        // A resync (a new epoch, batches that did not continue): everyone.
                        ask = deliver(frame, to: id, &state) || ask
                    }
                }
                return ask ? askSnapshot(&state).map { [$0] } ?? [] : []
            }
            for follow in asks { follow.resnapshot() }
        case .batch(let position, let batch):
            var event = Navigator_V1_StreamEvent()
            event.batch = batch
            let frame = StreamFrame(.batch, position: position, json: (try? event.jsonUTF8Bytes()) ?? [])
            let asks = state.withLock { state -> [any SessionFollow] in
                state.position = position
                state.history.append(frame)
                trim(&state.history)
                var ask = false
                for (id, connection) in state.connections where !connection.waiting {
                    ask = deliver(frame, to: id, &state) || ask
                }
                return ask ? askSnapshot(&state).map { [$0] } ?? [] : []
            }
            for follow in asks { follow.resnapshot() }
        case .rejection(let rejection):
            var event = Navigator_V1_StreamEvent()
            event.rejection = rejection
            let frame = StreamFrame(.rejection, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
            let asks = state.withLock { state -> [any SessionFollow] in
                var ask = false
                for (id, connection) in state.connections where !connection.waiting {
                    ask = deliver(frame, to: id, &state) || ask
                }
                return ask ? askSnapshot(&state).map { [$0] } ?? [] : []
            }
            for follow in asks { follow.resnapshot() }
        case .ended:
            end()
        }
    }

    /// Queues `frame` to connection `id`; a queue that overflowed is emptied and the connection
    /// waits for a snapshot. Returns whether one must be asked for.
    private func deliver(_ frame: StreamFrame, to id: Int, _ state: inout State) -> Bool {
        guard let queue = state.connections[id]?.queue, queue.push(frame) else { return false }
        state.connections[id]?.waiting = true
        return true
    }

    /// Queues a waiting connection's first items at `position`: `recovered` and what it missed
    /// when its `since` is still covered, else `snapshot` if there is one. Returns whether it
    /// started (false: it goes on waiting for a snapshot).
    @discardableResult
    private func start(_ id: Int, at position: StreamPosition, _ state: inout State, snapshot: StreamFrame? = nil)
        -> Bool
    {
        guard let connection = state.connections[id] else { return true }
        if let since = connection.since, since.epoch == position.epoch, since.seq <= position.seq {
            let missed = state.history.filter { ($0.position?.seq ?? 0) > since.seq }
            // Covered when nothing was missed, or the history holds every batch after `since`.
            if since.seq == position.seq || missed.first?.position?.seq == since.seq + 1 {
                var event = Navigator_V1_StreamEvent()
                event.recovered = .with {
                    $0.epoch = since.epoch
                    $0.seq = since.seq
                    $0.missed = UInt32(missed.count)
                }
                state.connections[id] = Connection(queue: connection.queue, since: nil, waiting: false)
                var overflowed = connection.queue.push(
                    StreamFrame(.recovered, position: since, json: (try? event.jsonUTF8Bytes()) ?? []))
                for frame in missed { overflowed = connection.queue.push(frame) || overflowed }
                if overflowed { state.connections[id]?.waiting = true }
                return !overflowed
            }
        }
        guard let snapshot else { return false }
        state.connections[id] = Connection(queue: connection.queue, since: nil, waiting: false)
        if connection.queue.push(snapshot) {
            state.connections[id]?.waiting = true
            return false
        }
        return true
    }

    /// The follow to ask for a snapshot, unless one was asked already.
    private func askSnapshot(_ state: inout State) -> (any SessionFollow)? {
        guard !state.snapshotAsked, let follow = state.follow else { return nil }
        state.snapshotAsked = true
        return follow
    }

    func heartbeat() {
        let queues = state.withLock { $0.connections.values.map(\.queue) }
        for queue in queues { queue.pushHeartbeat() }
    }

    /// Ends the follow and every stream.
    func end() {
        let (queues, follow) = state.withLock { state -> ([StreamQueue], (any SessionFollow)?) in
            state.ended = true
            defer { state.follow = nil }
            return (state.connections.values.map(\.queue), state.follow)
        }
        follow?.stop()
        for queue in queues { queue.close() }
    }

    private func trim(_ history: inout [StreamFrame]) {
        if history.count > settings.historySize { history.removeFirst(history.count - settings.historySize) }
        let oldest = ContinuousClock.now - .seconds(settings.historySeconds)
        if let keep = history.firstIndex(where: { $0.at >= oldest }), keep > 0 { history.removeFirst(keep) }
    }

    static func snapshotFrame(session: String, position: StreamPosition, tree: ScreenTree) -> StreamFrame {
        var event = Navigator_V1_StreamEvent()
        event.snapshot = .with {
            $0.session = session
            $0.seq = position.seq
            $0.epoch = position.epoch
            $0.tree = Navigator_V1_ScreenTree(tree)
        }
        return StreamFrame(.snapshot, position: position, json: (try? event.jsonUTF8Bytes()) ?? [])
    }
}
