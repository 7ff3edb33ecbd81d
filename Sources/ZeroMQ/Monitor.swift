import CZeroMQ

/// Socket life-cycle events reported by `zmq_socket_monitor`.
public struct MonitorEvents: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let connected = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECTED))
    public static let connectDelayed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECT_DELAYED))
    public static let connectRetried = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CONNECT_RETRIED))
    public static let listening = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_LISTENING))
    public static let bindFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_BIND_FAILED))
    public static let accepted = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ACCEPTED))
    public static let acceptFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ACCEPT_FAILED))
    public static let closed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CLOSED))
    public static let closeFailed = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_CLOSE_FAILED))
    public static let disconnected = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_DISCONNECTED))
    public static let monitorStopped = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_MONITOR_STOPPED))
    public static let handshakeFailedNoDetail = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
    public static let handshakeSucceeded = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_SUCCEEDED))
    public static let handshakeFailedProtocol = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL))
    public static let handshakeFailedAuth = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
    public static let handshakeFailed: MonitorEvents = [
        .handshakeFailedNoDetail, .handshakeFailedProtocol, .handshakeFailedAuth,
    ]
    public static let all = MonitorEvents(rawValue: UInt32(ZMQ_EVENT_ALL))

    public var description: String {
        let names: [(MonitorEvents, String)] = [
            (.connected, "connected"), (.connectDelayed, "connect-delayed"), (.connectRetried, "connect-retried"),
            (.listening, "listening"), (.bindFailed, "bind-failed"), (.accepted, "accepted"),
            (.acceptFailed, "accept-failed"), (.closed, "closed"), (.closeFailed, "close-failed"),
            (.disconnected, "disconnected"), (.monitorStopped, "monitor-stopped"),
            (.handshakeFailedNoDetail, "handshake-failed"), (.handshakeSucceeded, "handshake-succeeded"),
            (.handshakeFailedProtocol, "handshake-failed-protocol"), (.handshakeFailedAuth, "handshake-failed-auth"),
        ]
        let matching = names.filter { contains($0.0) }.map(\.1)
        return matching.isEmpty ? "event(0x\(String(rawValue, radix: 16)))" : matching.joined(separator: "|")
    }
}

/// One event read from a monitor socket.
public struct MonitorEvent: Sendable, Hashable {
    public var event: MonitorEvents
    /// The event's value: a file descriptor, an errno, a retry interval or a protocol error code.
    public var value: UInt32
    public var endpoint: String
}

extension Socket {
    /// Starts publishing this socket's `events` on a PAIR socket bound at `endpoint` (inproc).
    /// Connect a ``SocketType/pair`` socket there and read with ``receiveMonitorEvent()``.
    public func monitor(_ endpoint: String, events: MonitorEvents = .all) throws(ZeroMQError) {
        let handle = self.handle
        _ = try ZMQ.call("zmq_socket_monitor", detail: endpoint) {
            zmq_socket_monitor(handle, endpoint, Int32(bitPattern: events.rawValue))
        }
    }

    /// Reads one event from a PAIR socket connected to a monitor endpoint (honours the receive
    /// timeout). Frames: 6 bytes (event as uint16, value as uint32, native order), then the endpoint.
    public func receiveMonitorEvent() throws(ZeroMQError) -> MonitorEvent {
        let frames = try receiveMultipart()
        guard frames.count == 2, frames[0].count == 6 else {
            throw ZeroMQError(
                code: .invalidArgument, function: "zmq_socket_monitor", detail: "unexpected monitor frame layout")
        }
        let (event, value) = frames[0].withUnsafeBytes { raw in
            (
                raw.loadUnaligned(fromByteOffset: 0, as: UInt16.self),
                raw.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
            )
        }
        return MonitorEvent(event: MonitorEvents(rawValue: UInt32(event)), value: value, endpoint: frames[1].string)
    }
}
