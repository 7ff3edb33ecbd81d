import Locking

/// A socket that several threads use, one at a time, under a lock.
///
/// libzmq sockets are not thread-safe, but a socket may move between threads with a full memory
/// barrier between one thread's use and the next (zmq(7)); the lock is that barrier. Used where a
/// hand-off thread would cost more than waiting for the lock: navigatord's workers publish onto
/// the commands XPUB directly instead of waking a thread per batch.
///
/// Waiting for the socket: poll ``fileDescriptor`` (outside the lock), then read what is there
/// under the lock until ``PollEvents/readable`` is gone. Any use of the socket may consume the
/// descriptor's signal, so a thread that uses it must check what is waiting afterwards
/// (``send(_:framesPerMessage:)`` and ``processCommands()`` return it) and tell the reader.
public final class SharedSocket: Sendable {
    private let state: Locked<Held>
    /// ZMQ_FD, read once at creation (it does not change while the socket is open).
    public let fileDescriptor: Int32

    private struct Held: ~Copyable {
        // The lock guards every use of the socket; it never leaves ``withSocket(_:)``.
        nonisolated(unsafe) var socket: Socket?
    }

    public init(_ context: Context, type: SocketType) throws(ZeroMQError) {
        let socket = try Socket(context, type: type)
        fileDescriptor = try socket.get(.fileDescriptor)
        state = Locked(Held(socket: socket))
    }

    /// Runs `body` with the socket under the lock; nil once ``close()`` has run.
    public func withSocket<R, E: Error>(_ body: (Socket) throws(E) -> R) throws(E) -> R? {
        try state.withLock { (held) throws(E) -> R? in
            guard let socket = held.socket else { return nil }
            return try body(socket)
        }
    }

    /// Sends the messages in `frames` in order (`more` on all but the last frame of each message,
    /// whose frame count is `framesPerMessage`), their contents moved, under one taking of the lock;
    /// returns the socket's ``PollEvents`` afterwards, or nil (nothing sent) once it is closed.
    public func send(_ frames: [Message], framesPerMessage: Int) throws(ZeroMQError) -> PollEvents? {
        try withSocket { (socket) throws(ZeroMQError) -> PollEvents in
            // Process what the socket was told first (a new peer, its subscriptions): a send
            // itself does so at most once a millisecond, so without this a message could miss
            // a subscriber whose subscription had already arrived.
            _ = try Self.events(socket)
            for (index, frame) in frames.enumerated() {
                try socket.send(frame, more: index % framesPerMessage != framesPerMessage - 1)
            }
            return try Self.events(socket)
        }
    }

    /// Makes the socket process what it was told (new peers, their subscriptions, ...) and
    /// returns what it is ready for then; nil once it is closed.
    public func processCommands() throws(ZeroMQError) -> PollEvents? {
        try withSocket { (socket) throws(ZeroMQError) -> PollEvents in try Self.events(socket) }
    }

    /// ZMQ_EVENTS, which processes the socket's pending commands.
    private static func events(_ socket: Socket) throws(ZeroMQError) -> PollEvents {
        PollEvents(rawValue: Int16(truncatingIfNeeded: try socket.get(.events)))
    }

    /// Closes the socket; later uses find none. Further calls do nothing.
    public func close() {
        state.withLock { held in
            held.socket?.close()
            held.socket = nil
        }
    }
}
