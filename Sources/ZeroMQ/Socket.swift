import CZeroMQ

/// A libzmq socket, owned by the thread that created it.
///
/// libzmq sockets are not thread-safe, so this class is deliberately not `Sendable`: create it on
/// the thread that uses it (see ``DedicatedThread``) and let it die there. It keeps its
/// ``Context`` alive and closes the socket in `deinit`.
public final class Socket {
    public let type: SocketType
    public let context: Context
    @usableFromInline let handle: UnsafeMutableRawPointer
    private var isClosed = false

    /// Creates a socket with a linger of ``defaultLinger``.
    public init(_ context: Context, type: SocketType) throws(ZeroMQError) {
        self.context = context
        self.type = type
        handle = try context.makeSocket(type.rawValue)
        try set(.linger, Self.defaultLinger)
    }

    /// Every socket's linger unless set otherwise: 500 ms. Not zero: libzmq 4.3.4 aborts the
    /// process ("Resource temporarily unavailable (src/session_base.cpp:260)") when a socket
    /// closed with linger 0 in the middle of sending multipart messages over TCP meets its peer's
    /// disconnect (`session_base_t::clean_pipes`, unfixed upstream, issue #3442). Measured with a
    /// C loop of 10,000 connect/send/close rounds: 40 to 657 aborts per 10,000 with linger 0
    /// (PUSH, DEALER, XPUB, ROUTER), 52 per 7,370 with 10 ms, none with 500 ms. Closing never
    /// waits for it; terminating the context waits at most this long for unsent messages.
    public static let defaultLinger: Duration = .milliseconds(500)

    deinit { close() }

    /// Closes the socket now; `deinit` does it otherwise. Unsent messages are kept for the
    /// socket's ``SocketOption/linger`` period by libzmq. Further calls do nothing.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        zmq_close(handle)  // fails only with ENOTSOCK, which the flag rules out
    }

    /// Binds to an endpoint (`tcp://127.0.0.1:7401`, `tcp://127.0.0.1:*`, `ipc:///path`,
    /// `inproc://name`). Read the port chosen for `*` from ``lastEndpoint``.
    public func bind(_ endpoint: String) throws(ZeroMQError) {
        _ = try ZMQ.call("zmq_bind", detail: endpoint) { zmq_bind(handle, endpoint) }
    }

    public func connect(_ endpoint: String) throws(ZeroMQError) {
        _ = try ZMQ.call("zmq_connect", detail: endpoint) { zmq_connect(handle, endpoint) }
    }

    /// Stops listening on an endpoint bound earlier (for a wildcard bind, pass ``lastEndpoint``).
    public func unbind(_ endpoint: String) throws(ZeroMQError) {
        _ = try ZMQ.call("zmq_unbind", detail: endpoint) { zmq_unbind(handle, endpoint) }
    }

    public func disconnect(_ endpoint: String) throws(ZeroMQError) {
        _ = try ZMQ.call("zmq_disconnect", detail: endpoint) { zmq_disconnect(handle, endpoint) }
    }

    /// The endpoint of the last bind or connect, with the actual port for a `*` bind.
    public var lastEndpoint: String {
        get throws(ZeroMQError) { try get(.lastEndpoint) }
    }

    /// Subscribes a SUB or XSUB socket to messages whose first frame starts with `prefix`.
    public func subscribe(_ prefix: String) throws(ZeroMQError) {
        try set(.subscribe, Array(prefix.utf8))
    }

    public func unsubscribe(_ prefix: String) throws(ZeroMQError) {
        try set(.unsubscribe, Array(prefix.utf8))
    }
}

@available(*, unavailable, message: "a ZeroMQ socket belongs to the thread that created it")
extension Socket: Sendable {}
