import NIOCore
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
    /// The event as a Server-Sent Event: `id:` (the position), `event:` (the kind) and `data:`
    /// (the JSON); a heartbeat is a comment line, which EventSource ignores. Shared, not copied,
    /// by every connection that writes it.
    let serverSentEvent: ByteBuffer
    /// Where the JSON lies in `serverSentEvent`.
    private let jsonStart: Int
    private let jsonCount: Int
    /// When it was made (history ages out by it).
    let at: ContinuousClock.Instant

    init(_ kind: Kind, position: (epoch: UInt64, seq: UInt64)?, json: [UInt8], at: ContinuousClock.Instant = .now) {
        self.kind = kind
        self.position = position
        self.at = at
        var bytes = ByteBuffer()
        if kind == .heartbeat {
            bytes.writeString(": heartbeat\n\n")
            jsonStart = 0
            jsonCount = 0
        } else {
            bytes.reserveCapacity(json.count + 64)
            if let position { bytes.writeString("id: \(position.epoch):\(position.seq)\n") }
            bytes.writeString("event: \(kind.rawValue)\ndata: ")
            jsonStart = bytes.writerIndex
            jsonCount = json.count
            bytes.writeBytes(json)
            bytes.writeString("\n\n")
        }
        serverSentEvent = bytes
    }

    static let heartbeat = StreamFrame(.heartbeat, position: nil, json: [])

    /// The `navigator.v1.StreamEvent` in protobuf's JSON mapping (empty for a heartbeat), as a
    /// slice of `serverSentEvent` (no copy): a WebSocket text message.
    var jsonBytes: ByteBuffer { serverSentEvent.getSlice(at: jsonStart, length: jsonCount) ?? ByteBuffer() }

    /// `epoch:seq`, the SSE id and what a client resumes from.
    var id: String? { position.map { "\($0.epoch):\($0.seq)" } }

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
        /// A reader that polls (``setNotify(_:)``): told when there is something to take.
        var notify: (@Sendable () -> Void)?
        /// The reader was told and has not yet found the queue empty: no need to tell it again.
        var notified = false
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds an item; beyond the capacity everything queued is replaced by one `snapshotNow`.
    func push(_ item: Item) {
        let (waiter, notify) = state.withLock {
            state -> (CheckedContinuation<Item?, Never>?, (@Sendable () -> Void)?) in
            guard !state.closed else { return (nil, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, nil)
            }
            if state.items.count >= capacity {
                // Replies to the client's own requests are kept (at most `maxReplies` wait).
                state.items = state.items.filter(Self.isReply) + [.snapshotNow] + (Self.isReply(item) ? [item] : [])
                state.overflows += 1
            } else {
                state.items.append(item)
            }
            guard !state.notified, let notify = state.notify else { return (nil, nil) }
            state.notified = true
            return (nil, notify)
        }
        waiter?.resume(returning: item)
        notify?()
    }

    /// What ``poll()`` finds.
    enum Polled {
        case item(Item)
        case empty
        case closed
    }

    /// For a reader that is told rather than waits: `notify` is called (from any thread) when
    /// items come after ``poll()`` found the queue empty, and once when the queue closes. It is
    /// called once now, for what is queued already.
    func setNotify(_ notify: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.notify = state.closed ? nil : notify
            state.notified = true
        }
        notify()
    }

    /// The next item without waiting; `empty` re-arms the notification.
    func poll() -> Polled {
        state.withLock { state in
            if !state.items.isEmpty { return .item(state.items.removeFirst()) }
            if state.closed { return .closed }
            state.notified = false
            return .empty
        }
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
        let (waiter, notify) = state.withLock {
            state -> (CheckedContinuation<Item?, Never>?, (@Sendable () -> Void)?) in
            guard !state.closed else { return (nil, nil) }
            state.closed = true
            state.items = []
            defer {
                state.waiter = nil
                state.notify = nil
            }
            return (state.waiter, state.notify)
        }
        waiter?.resume(returning: nil)
        notify?()
    }

    var overflows: Int { state.withLock { $0.overflows } }

    /// Whether the queue was closed.
    var isClosed: Bool { state.withLock { $0.closed } }
}
