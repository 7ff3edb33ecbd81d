import Locking
import NavigatorCore
import NavigatorPort
import NavigatorWire
import SwiftProtobuf

/// One streamed session: its follow through the port, its position and kept batches
/// (``StreamHistory``), and its connections. Each event is encoded once, whatever the number of
/// connections. A connection starts with `recovered` and what it missed, or with a snapshot; one
/// that needs a snapshot (a new one that cannot resume, a reader that fell behind) waits for the
/// one it asks the follow for (``SessionUpdate/current(_:_:)``), and gets no batch meanwhile.
final class StreamedSession: Sendable {
    let session: String
    /// Which second of the heartbeat period its streams get their heartbeat in.
    let heartbeatSlot = Int.random(in: 0..<3600)

    private struct Connection {
        var queue: StreamQueue
        /// Who streams it.
        var caller: Caller
        /// Where it resumes from, until it started.
        var since: StreamPosition?
        /// It waits for a snapshot: batches are not queued to it meanwhile (the snapshot has them).
        var waiting: Bool
        /// It started from a snapshot taken at this position, ahead of the batches still coming:
        /// those up to it are not queued to it.
        var skipThrough: StreamPosition?
    }

    private struct State {
        var history: StreamHistory
        var connections: [Int: Connection] = [:]
        var nextID = 0
        var emptySince: ContinuousClock.Instant?
        var follow: (any SessionFollow)?
        /// A snapshot was asked of the follow and has not come yet.
        var snapshotAsked = false
        var ended = false
    }

    private let state: Locked<State>

    init(session: String, settings: StreamSettings) {
        self.session = session
        state = Locked(State(history: StreamHistory(size: settings.historySize, seconds: settings.historySeconds)))
    }

    /// Records the follow that feeds this session (stopped at once if the session ended).
    func following(_ follow: any SessionFollow) {
        let (keep, ask) = state.withLock { state -> (Bool, Bool) in
            guard !state.ended else { return (false, false) }
            state.follow = follow
            return (true, state.snapshotAsked)
        }
        if !keep { follow.stop() }
        // A connection that joined after the follow's first snapshot, but before the follow was
        // recorded here, asked for one then (``askSnapshot(_:)``): asked of the follow now.
        if ask { follow.resnapshot() }
    }

    /// Adds a connection; its first items are queued now if its resume position is covered,
    /// else when the next snapshot comes (asked for here, once the session is followed). Nil if
    /// the session ended.
    func join(_ queue: StreamQueue, since: StreamPosition?, as caller: Caller) -> Int? {
        let (id, ask) = state.withLock { state -> (Int?, (any SessionFollow)?) in
            guard !state.ended else { return (nil, nil) }
            let id = state.nextID
            state.nextID += 1
            state.emptySince = nil
            state.connections[id] = Connection(queue: queue, caller: caller, since: since, waiting: true)
            // Before the follow's first snapshot the connection waits for it (it is coming).
            guard state.history.position != nil else { return (id, nil) }
            if let since, let frames = state.history.resume(from: since), start(id, with: frames, &state) {
                return (id, nil)
            }
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

    /// Since when nobody streams the session; nil while somebody does (or nobody has yet).
    var idleSince: ContinuousClock.Instant? { state.withLock { $0.emptySince } }

    /// Marks the session ended if nobody streams it, in one step with that check: a connection
    /// joining after it is refused (and its subscribe starts a fresh session), one that joined
    /// before it keeps the session. True if it ended; ``end()`` then lets its follow go.
    func endIfIdle() -> Bool {
        state.withLock { state in
            guard !state.ended, state.connections.isEmpty, state.emptySince != nil else { return false }
            state.ended = true
            return true
        }
    }

    /// Whether nobody has streamed the session since `instant`.
    func idle(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { state in state.emptySince.map { $0 <= instant } ?? false }
    }

    var hasEnded: Bool { state.withLock { $0.ended } }

    /// An update from the follow (in order, one at a time).
    func receive(_ update: SessionUpdate) {
        let ask: (any SessionFollow)?
        switch update {
        case .snapshot(let position, let tree):
            let frame = Self.snapshotFrame(session: session, position: position, tree: tree)
            ask = state.withLock { state in
                state.history.startOver(at: position)
                state.snapshotAsked = false
                // Everyone starts over from it: a new start, or a resync (a new epoch).
                var overflowed = false
                for id in state.connections.keys { overflowed = !start(id, with: [frame], &state) || overflowed }
                return overflowed ? askSnapshot(&state) : nil
            }
        case .current(let position, let tree):
            let frame = Self.snapshotFrame(session: session, position: position, tree: tree)
            ask = state.withLock { state in
                state.snapshotAsked = false
                guard let held = state.history.position, held.epoch == position.epoch else {
                    // Not the epoch the session streams: a resync comes as a snapshot.
                    return nil
                }
                var overflowed = false
                for (id, connection) in state.connections where connection.waiting {
                    overflowed = !start(id, with: [frame], &state) || overflowed
                    if held.seq < position.seq { state.connections[id]?.skipThrough = position }
                }
                return overflowed ? askSnapshot(&state) : nil
            }
        case .batch(let position, let batch):
            var event = Navigator_V1_StreamEvent()
            event.batch = batch
            let frame = StreamFrame(.batch, position: position, json: (try? event.jsonUTF8Bytes()) ?? [])
            ask = state.withLock { state in
                state.history.append(frame, at: position)
                var overflowed = false
                for (id, connection) in state.connections where !connection.waiting {
                    if let skip = connection.skipThrough {
                        if skip.covers(position) { continue }
                        state.connections[id]?.skipThrough = nil
                    }
                    overflowed = !deliver(frame, to: id, &state) || overflowed
                }
                return overflowed ? askSnapshot(&state) : nil
            }
        case .rejection(let rejection):
            var event = Navigator_V1_StreamEvent()
            event.rejection = rejection
            let frame = StreamFrame(.rejection, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
            ask = state.withLock { state in
                var overflowed = false
                for (id, connection) in state.connections where !connection.waiting {
                    overflowed = !deliver(frame, to: id, &state) || overflowed
                }
                return overflowed ? askSnapshot(&state) : nil
            }
        case .ended:
            ask = nil
            end()
        }
        ask?.resnapshot()
    }

    /// Queues `frame` to connection `id`; a queue that overflows is emptied and the connection
    /// waits for a snapshot. Returns whether it took the frame.
    private func deliver(_ frame: StreamFrame, to id: Int, _ state: inout State) -> Bool {
        guard let queue = state.connections[id]?.queue, queue.push(frame) else { return true }
        state.connections[id]?.waiting = true
        state.connections[id]?.skipThrough = nil
        return false
    }

    /// Starts connection `id` with `frames` (a snapshot, or `recovered` and what it missed).
    /// Returns whether its queue took them all (else it waits for a snapshot again).
    private func start(_ id: Int, with frames: [StreamFrame], _ state: inout State) -> Bool {
        guard let connection = state.connections[id] else { return true }
        state.connections[id] = Connection(
            queue: connection.queue, caller: connection.caller, since: nil, waiting: false)
        var overflowed = false
        for frame in frames { overflowed = connection.queue.push(frame) || overflowed }
        if overflowed { state.connections[id]?.waiting = true }
        return !overflowed
    }

    /// The follow to ask for a snapshot, unless one was asked already. Before the follow is
    /// recorded (its first snapshot can come first, on the thread that follows), the ask is kept
    /// and made when it is (``following(_:)``).
    private func askSnapshot(_ state: inout State) -> (any SessionFollow)? {
        guard !state.snapshotAsked else { return nil }
        state.snapshotAsked = true
        return state.follow
    }

    /// Ends the streams of callers that may no longer follow the session (`refusal` says why):
    /// their last event, `closed`, says so. Returns how many ended.
    @discardableResult
    func revoke(_ refusal: (Caller) -> String?) -> Int {
        let callers = state.withLock { state in state.connections.mapValues { ($0.caller, $0.queue) } }
        var ended = 0
        var verdicts: [Caller: String?] = [:]
        for (_, (caller, queue)) in callers {
            let verdict = verdicts[caller] ?? refusal(caller)
            verdicts[caller] = verdict
            guard let reason = verdict else { continue }
            var event = Navigator_V1_StreamEvent()
            event.closed = "\(reason); this stream ends"
            queue.push(StreamFrame(.closed, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [], closeCode: 4003))
            ended += 1
        }
        return ended
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
