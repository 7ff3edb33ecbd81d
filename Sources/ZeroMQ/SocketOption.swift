import CZeroMQ

/// A typed libzmq socket option: `try socket.set(.sendHighWaterMark, 1000)`,
/// `try socket.get(.lastEndpoint)`.
public struct SocketOption<Value: SocketOptionValue>: Sendable {
    public let code: Int32
    public let name: String

    public init(code: Int32, name: String) {
        self.code = code
        self.name = name
    }
}

extension SocketOption where Value == Int32 {
    /// ZMQ_SNDHWM: queued outbound messages per peer before PUSH/DEALER block and PUB drops (0 = no limit).
    public static var sendHighWaterMark: Self { .init(code: ZMQ_SNDHWM, name: "ZMQ_SNDHWM") }
    /// ZMQ_RCVHWM: queued inbound messages per peer (0 = no limit).
    public static var receiveHighWaterMark: Self { .init(code: ZMQ_RCVHWM, name: "ZMQ_RCVHWM") }
    /// ZMQ_RECONNECT_IVL: milliseconds before a dropped connection is made again (-1: never).
    public static var reconnectInterval: Self { .init(code: ZMQ_RECONNECT_IVL, name: "ZMQ_RECONNECT_IVL") }
    /// ZMQ_FD: a file descriptor that becomes readable when the socket has commands to process
    /// (read-only). Edge-like: after it signals, read ``events`` until the socket has nothing
    /// more; any call on the socket may consume its signal.
    public static var fileDescriptor: Self { .init(code: ZMQ_FD, name: "ZMQ_FD") }
    /// ZMQ_EVENTS: ``PollEvents`` raw value of what the socket is ready for now; processes the
    /// socket's pending commands (read-only).
    public static var events: Self { .init(code: ZMQ_EVENTS, name: "ZMQ_EVENTS") }
}

extension SocketOption where Value == Int64 {
    /// ZMQ_MAXMSGSIZE: a peer sending a larger message is disconnected (-1 = no limit).
    public static var maxMessageSize: Self { .init(code: ZMQ_MAXMSGSIZE, name: "ZMQ_MAXMSGSIZE") }
}

extension SocketOption where Value == Bool {
    /// ZMQ_IMMEDIATE: queue messages only to completed connections.
    public static var immediate: Self { .init(code: ZMQ_IMMEDIATE, name: "ZMQ_IMMEDIATE") }
    /// ZMQ_ROUTER_MANDATORY: a ROUTER send to an unknown routing id fails with EHOSTUNREACH
    /// instead of being dropped silently (write-only).
    public static var routerMandatory: Self { .init(code: ZMQ_ROUTER_MANDATORY, name: "ZMQ_ROUTER_MANDATORY") }
    /// ZMQ_XPUB_VERBOSE: pass every subscription message up, not only new topics (write-only).
    public static var xpubVerbose: Self { .init(code: ZMQ_XPUB_VERBOSE, name: "ZMQ_XPUB_VERBOSE") }
    /// ZMQ_XPUB_VERBOSER: pass every subscription and every unsubscription message up, those
    /// made for a peer that went away included (write-only).
    public static var xpubVerboser: Self { .init(code: ZMQ_XPUB_VERBOSER, name: "ZMQ_XPUB_VERBOSER") }
    /// ZMQ_XPUB_MANUAL: subscriptions are passed up and take effect only when the application
    /// sets ``subscribe`` (or ``unsubscribe``) right after receiving one (write-only).
    public static var xpubManual: Self { .init(code: ZMQ_XPUB_MANUAL, name: "ZMQ_XPUB_MANUAL") }
    /// ZMQ_XPUB_NODROP: at a subscriber's high-water mark, fail with EAGAIN instead of dropping (write-only).
    public static var xpubNoDrop: Self { .init(code: ZMQ_XPUB_NODROP, name: "ZMQ_XPUB_NODROP") }
    /// ZMQ_CURVE_SERVER: act as a CURVE server (needs ``curveSecretKey``).
    public static var curveServer: Self { .init(code: ZMQ_CURVE_SERVER, name: "ZMQ_CURVE_SERVER") }
    /// ZMQ_RCVMORE: whether the last frame received has more frames after it (read-only).
    public static var receiveMore: Self { .init(code: ZMQ_RCVMORE, name: "ZMQ_RCVMORE") }
}

extension SocketOption where Value == Duration? {
    /// ZMQ_LINGER: how long unsent messages are kept after close (`nil` = until sent).
    public static var linger: Self { .init(code: ZMQ_LINGER, name: "ZMQ_LINGER") }
    /// ZMQ_SNDTIMEO: how long a blocking send waits before failing with EAGAIN (`nil` = forever).
    public static var sendTimeout: Self { .init(code: ZMQ_SNDTIMEO, name: "ZMQ_SNDTIMEO") }
    /// ZMQ_RCVTIMEO: how long a blocking receive waits before failing with EAGAIN (`nil` = forever).
    public static var receiveTimeout: Self { .init(code: ZMQ_RCVTIMEO, name: "ZMQ_RCVTIMEO") }
}

extension SocketOption where Value == Duration {
    /// ZMQ_HEARTBEAT_IVL: send a ZMTP PING this often (zero = off).
    public static var heartbeatInterval: Self { .init(code: ZMQ_HEARTBEAT_IVL, name: "ZMQ_HEARTBEAT_IVL") }
    /// ZMQ_HEARTBEAT_TIMEOUT: close the connection when no traffic arrives this long after a PING.
    public static var heartbeatTimeout: Self { .init(code: ZMQ_HEARTBEAT_TIMEOUT, name: "ZMQ_HEARTBEAT_TIMEOUT") }
    /// ZMQ_HEARTBEAT_TTL: tells the peer to time out after this long without traffic (0.1 s resolution).
    public static var heartbeatTTL: Self { .init(code: ZMQ_HEARTBEAT_TTL, name: "ZMQ_HEARTBEAT_TTL") }
}

extension SocketOption where Value == [UInt8] {
    /// ZMQ_SUBSCRIBE: add a prefix filter to a SUB/XSUB socket (write-only).
    public static var subscribe: Self { .init(code: ZMQ_SUBSCRIBE, name: "ZMQ_SUBSCRIBE") }
    /// ZMQ_UNSUBSCRIBE: remove a prefix filter (write-only).
    public static var unsubscribe: Self { .init(code: ZMQ_UNSUBSCRIBE, name: "ZMQ_UNSUBSCRIBE") }
    /// ZMQ_ROUTING_ID: the identity a ROUTER peer sees for this socket (1 to 255 bytes, not starting with 0).
    public static var routingID: Self { .init(code: ZMQ_ROUTING_ID, name: "ZMQ_ROUTING_ID") }
}

extension SocketOption where Value == String {
    /// ZMQ_LAST_ENDPOINT: the last endpoint bound or connected, with the real port (read-only).
    public static var lastEndpoint: Self { .init(code: ZMQ_LAST_ENDPOINT, name: "ZMQ_LAST_ENDPOINT") }
    /// ZMQ_CURVE_PUBLICKEY: this socket's long-term public key, Z85 (40 characters).
    public static var curvePublicKey: Self { .init(code: ZMQ_CURVE_PUBLICKEY, name: "ZMQ_CURVE_PUBLICKEY") }
    /// ZMQ_CURVE_SECRETKEY: this socket's long-term secret key, Z85.
    public static var curveSecretKey: Self { .init(code: ZMQ_CURVE_SECRETKEY, name: "ZMQ_CURVE_SECRETKEY") }
    /// ZMQ_CURVE_SERVERKEY: the server's public key a CURVE client expects, Z85.
    public static var curveServerKey: Self { .init(code: ZMQ_CURVE_SERVERKEY, name: "ZMQ_CURVE_SERVERKEY") }
    /// ZMQ_ZAP_DOMAIN: the authentication domain passed to a ZAP handler.
    public static var zapDomain: Self { .init(code: ZMQ_ZAP_DOMAIN, name: "ZMQ_ZAP_DOMAIN") }
}

extension Socket {
    /// Sets an option. A wrong value (for example a key that is not 40 Z85 characters) throws
    /// ``ZeroMQError/Code/invalidArgument`` naming the option.
    public func set<Value>(_ option: SocketOption<Value>, _ value: Value) throws(ZeroMQError) {
        try value.write(to: self, option.code, option.name)
    }

    /// Reads an option. Write-only options throw ``ZeroMQError/Code/invalidArgument``.
    public func get<Value>(_ option: SocketOption<Value>) throws(ZeroMQError) -> Value {
        try Value.read(from: self, option.code, option.name)
    }

    func setRaw(_ code: Int32, _ name: String, _ bytes: UnsafeRawBufferPointer) throws(ZeroMQError) {
        let handle = self.handle
        _ = try ZMQ.call("zmq_setsockopt", detail: name) {
            zmq_setsockopt(handle, code, bytes.baseAddress, bytes.count)
        }
    }

    /// Reads an option into `buffer` and returns how many bytes libzmq wrote.
    func getRaw(_ code: Int32, _ name: String, _ buffer: UnsafeMutableRawBufferPointer) throws(ZeroMQError) -> Int {
        let handle = self.handle
        var size = buffer.count
        _ = try ZMQ.call("zmq_getsockopt", detail: name) { zmq_getsockopt(handle, code, buffer.baseAddress, &size) }
        return size
    }
}

/// A type libzmq options can hold; conversions live in one place each.
public protocol SocketOptionValue: Sendable {
    static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> Self
    func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError)
}

/// The C integer options (`int`, `int64_t`) read and write their bytes as they are.
public protocol IntegerSocketOptionValue: SocketOptionValue, FixedWidthInteger {}

extension IntegerSocketOptionValue {
    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> Self {
        var value: Self = 0
        _ = try withUnsafeMutableBytes(of: &value) { (buffer) throws(ZeroMQError) in
            try socket.getRaw(code, name, buffer)
        }
        return value
    }

    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        var value = self
        try withUnsafeBytes(of: &value) { (buffer) throws(ZeroMQError) in try socket.setRaw(code, name, buffer) }
    }
}

extension Int32: IntegerSocketOptionValue {}
extension Int64: IntegerSocketOptionValue {}

extension Bool: SocketOptionValue {
    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> Bool {
        try Int32.read(from: socket, code, name) != 0
    }

    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        try Int32(self ? 1 : 0).write(to: socket, code, name)
    }
}

extension Duration: SocketOptionValue {
    /// libzmq takes whole milliseconds as an int.
    var zmqMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }

    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> Duration {
        .milliseconds(try Int32.read(from: socket, code, name))
    }

    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        try zmqMilliseconds.write(to: socket, code, name)
    }
}

extension Optional: SocketOptionValue where Wrapped == Duration {
    /// `nil` is libzmq's -1 (infinite).
    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> Duration? {
        let value = try Int32.read(from: socket, code, name)
        return value < 0 ? nil : .milliseconds(value)
    }

    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        try (self?.zmqMilliseconds ?? -1).write(to: socket, code, name)
    }
}

extension Array: SocketOptionValue where Element == UInt8 {
    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> [UInt8] {
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 1)
        defer { raw.deallocate() }
        let buffer = UnsafeRawBufferPointer(rebasing: raw.prefix(try socket.getRaw(code, name, raw)))
        return Array(buffer)
    }

    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        try withFrameBytes { (buffer) throws(ZeroMQError) in try socket.setRaw(code, name, buffer) }
    }
}

extension String: SocketOptionValue {
    /// Read as a NUL-terminated string (libzmq returns Z85 text for CURVE keys in this form).
    public static func read(from socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) -> String {
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 1)
        defer { raw.deallocate() }
        let buffer = UnsafeRawBufferPointer(rebasing: raw.prefix(try socket.getRaw(code, name, raw)))
        let text = buffer.prefix { $0 != 0 }
        return String(decoding: text, as: UTF8.self)
    }

    /// Written as its UTF-8 bytes without a terminator.
    public func write(to socket: Socket, _ code: Int32, _ name: String) throws(ZeroMQError) {
        try withFrameBytes { (buffer) throws(ZeroMQError) in try socket.setRaw(code, name, buffer) }
    }
}
