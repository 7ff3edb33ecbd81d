import Synchronization

/// One event of an HTTP session stream, encoded once and shared by every connection that
/// streams the session.
struct StreamFrame: Sendable {
    enum Kind: String, Sendable {
        case snapshot, batch, rejection, recovered, heartbeat
        /// WebSocket: the answer to a request the client sent (never dropped for a snapshot).
        case reply
        /// The stream ends (a bearer token expired), and why; the last frame written.
        case closed
    }

    let kind: Kind
    /// The session's position after this event (snapshot, batch; recovered: the position resumed
    /// from); nil for events that move nothing.
    let position: (epoch: UInt64, seq: UInt64)?
    /// A `navigator.v1.StreamEvent` in protobuf's JSON mapping (empty for a heartbeat).
    let json: [UInt8]
    /// When it was made (history ages out by it).
    let at: ContinuousClock.Instant

    init(_ kind: Kind, position: (epoch: UInt64, seq: UInt64)?, json: [UInt8], at: ContinuousClock.Instant = .now) {
        self.kind = kind
        self.position = position
        self.json = json
        self.at = at
    }

    static let heartbeat = StreamFrame(.heartbeat, position: nil, json: [])

    /// `epoch:seq`, the SSE id and what a client resumes from.
    var id: String? { position.map { "\($0.epoch):\($0.seq)" } }

    /// As a Server-Sent Event: `id:` (the position), `event:` (the kind) and `data:` (the JSON);
    /// a heartbeat is a comment line, which EventSource ignores.
    var serverSentEvent: [UInt8] {
        if kind == .heartbeat { return Array(": heartbeat\n\n".utf8) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(json.count + 64)
        if let id { bytes += Array("id: \(id)\n".utf8) }
        bytes += Array("event: \(kind.rawValue)\ndata: ".utf8)
        bytes += json
        bytes += [0x0A, 0x0A]
        return bytes
    }

    /// Parses `epoch:seq` (a Last-Event-ID or `since`).
    static func position(_ text: String) -> (epoch: UInt64, seq: UInt64)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let epoch = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
        return (epoch, seq)
    }
}

/// What one stream connection has still to write, bounded: a reader that falls `capacity`
/// events behind loses them and gets a snapshot instead (``Item/snapshotNow``), so a slow
/// client never grows the service's memory.
final class StreamQueue: Sendable {
    enum Item: Sendable {
        case frame(StreamFrame)
        /// The reader fell behind: write the session's snapshot as it is now.
        case snapshotNow
    }

    private struct State {
        var items: [Item] = []
        var waiter: CheckedContinuation<Item?, Never>?
        var closed = false
        /// Times the reader fell behind.
        var overflows = 0
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds an item; beyond the capacity everything queued is replaced by one `snapshotNow`.
    func push(_ item: Item) {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            guard !state.closed else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if state.items.count >= capacity {
                // Replies to the client's own requests are kept (at most `maxReplies` wait).
                state.items = state.items.filter(Self.isReply) + [.snapshotNow] + (Self.isReply(item) ? [item] : [])
                state.overflows += 1
            } else {
                state.items.append(item)
            }
            return nil
        }
        waiter?.resume(returning: item)
    }

    /// Replies waiting to be written, at most: a client that sends requests but reads nothing
    /// is not read from further (``pushReply(_:)`` waits).
    static let maxReplies = 8

    /// Replies and the closing frame are never dropped for a snapshot.
    static func isReply(_ item: Item) -> Bool {
        if case .frame(let frame) = item { frame.kind == .reply || frame.kind == .closed } else { false }
    }

    /// Queues the answer to a request, waiting while `maxReplies` are not written yet; false
    /// once the queue is closed.
    func pushReply(_ frame: StreamFrame) async -> Bool {
        while true {
            let (room, closed) = state.withLock { state in
                (state.items.count { Self.isReply($0) } < Self.maxReplies, state.closed)
            }
            if closed { return false }
            if room { break }
            try? await Task.sleep(for: .milliseconds(5))
        }
        push(.frame(frame))
        return true
    }

    /// A heartbeat, only when nothing else is waiting to be written.
    func pushHeartbeat() {
        let idle = state.withLock { $0.items.isEmpty && !$0.closed }
        if idle { push(.frame(.heartbeat)) }
    }

    /// The next item, waiting for one; nil once closed.
    func next() async -> Item? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Item?, Never>) in
            let ready = state.withLock { state -> Item?? in
                if !state.items.isEmpty { return .some(state.items.removeFirst()) }
                if state.closed { return .some(nil) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Items left with a position at or before `seq` of `epoch` are dropped (a snapshot just
    /// written has them).
    func dropCovered(epoch: UInt64, seq: UInt64) {
        state.withLock { state in
            state.items.removeAll { item in
                guard case .frame(let frame) = item, frame.kind == .batch, let position = frame.position else {
                    return false
                }
                return position.epoch == epoch && position.seq <= seq
            }
        }
    }

    /// Ends the stream: `next()` answers nil at once (what is queued is dropped).
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<Item?, Never>? in
            state.closed = true
            state.items = []
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    var overflows: Int { state.withLock { $0.overflows } }
}
