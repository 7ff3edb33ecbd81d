import Locking
import NIOCore
import NavigatorWire

/// One event of an HTTP session stream, encoded once and shared by every connection that
/// streams the session.
struct StreamFrame: Sendable {
    enum Kind: String, Sendable {
        case snapshot, batch, rejection, recovered, heartbeat
        /// WebSocket: the answer to a request the client sent (never dropped for a snapshot).
        case reply
        /// The stream ends (a bearer token expired, its client may no longer follow the session),
        /// and why; the last frame written.
        case closed
    }

    let kind: Kind
    /// The session's position after this event (snapshot, batch; recovered: the position resumed
    /// from); nil for events that move nothing.
    let position: StreamPosition?
    /// The event as a Server-Sent Event: `id:` (the position), `event:` (the kind) and `data:`
    /// (the JSON); a heartbeat is a comment line, which EventSource ignores. Shared, not copied,
    /// by every connection that writes it.
    let serverSentEvent: ByteBuffer
    /// Where the JSON lies in `serverSentEvent`.
    private let jsonStart: Int
    private let jsonCount: Int
    /// When it was made (history ages out by it).
    let at: ContinuousClock.Instant
    /// `closed`: the WebSocket close code that follows it (4001: the token expired; 4003: the
    /// client may no longer follow the session).
    let closeCode: UInt16

    init(
        _ kind: Kind, position: StreamPosition?, json: [UInt8], at: ContinuousClock.Instant = .now,
        closeCode: UInt16 = 4001
    ) {
        self.kind = kind
        self.closeCode = closeCode
        self.position = position
        self.at = at
        var bytes = ByteBuffer()
        if kind == .heartbeat {
            bytes.writeString(": heartbeat\n\n")
            jsonStart = 0
            jsonCount = 0
        } else {
            bytes.reserveCapacity(json.count + 64)
            if let position { bytes.writeString("id: \(position)\n") }
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

    /// Replies to the client's requests and the closing frame: never dropped for a snapshot.
    var isKept: Bool { kind == .reply || kind == .closed }
}

/// What one stream connection has still to write, bounded: a reader that falls `capacity`
/// events behind loses them (``push(_:)`` says so, and its session queues it a snapshot
/// instead), so a slow client never grows the service's memory. Replies to the client's own
/// requests and the closing frame are never dropped.
final class StreamQueue: Sendable {
    private struct State {
        var items: [StreamFrame] = []
        var closed = false
        /// Times the reader fell behind.
        var overflows = 0
        /// The reader, told when there is something to take.
        var notify: (@Sendable () -> Void)?
        /// The reader was told and has not yet found the queue empty: no need to tell it again.
        var notified = false
    }

    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds a frame; returns true if the queue was full: what it held is dropped (replies and
    /// the closing frame kept) and the reader needs a snapshot.
    @discardableResult
    func push(_ frame: StreamFrame) -> Bool {
        let (notify, overflowed) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
            guard !state.closed else { return (nil, false) }
            var overflowed = false
            if state.items.count >= capacity {
                state.items = state.items.filter(\.isKept) + (frame.isKept ? [frame] : [])
                state.overflows += 1
                overflowed = true
            } else {
                state.items.append(frame)
            }
            guard !state.notified, let notify = state.notify else { return (nil, overflowed) }
            state.notified = true
            return (notify, overflowed)
        }
        notify?()
        return overflowed
    }

    /// What ``poll()`` finds.
    enum Polled {
        case frame(StreamFrame)
        case empty
        case closed
    }

    /// For the reader: `notify` is called (from any thread) when frames come after ``poll()``
    /// found the queue empty, and once when the queue closes. It is called once now, for what is
    /// queued already.
    func setNotify(_ notify: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.notify = state.closed ? nil : notify
            state.notified = true
        }
        notify()
    }

    /// The next frame without waiting; `empty` re-arms the notification.
    func poll() -> Polled {
        state.withLock { state in
            if !state.items.isEmpty { return .frame(state.items.removeFirst()) }
            if state.closed { return .closed }
            state.notified = false
            return .empty
        }
    }

    /// A heartbeat, only when nothing else is waiting to be written.
    func pushHeartbeat() {
        let idle = state.withLock { $0.items.isEmpty && !$0.closed }
        if idle { push(.heartbeat) }
    }

    /// Ends the stream: ``poll()`` answers `closed` at once (what is queued is dropped).
    func close() {
        let notify = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.closed else { return nil }
            state.closed = true
            state.items = []
            defer { state.notify = nil }
            return state.notify
        }
        notify?()
    }

    var overflows: Int { state.withLock { $0.overflows } }

    /// Whether the queue was closed.
    var isClosed: Bool { state.withLock { $0.closed } }

    /// Frames waiting to be written.
    var count: Int { state.withLock { $0.items.count } }
}
