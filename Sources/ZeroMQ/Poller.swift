import CZeroMQ

/// What a socket is ready for.
public struct PollEvents: OptionSet, Sendable, Hashable {
    public var rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }

    /// A message can be received without blocking.
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
    /// An error condition on a plain file descriptor.
    public static let error = PollEvents(rawValue: Int16(ZMQ_POLLERR))
}

/// Waits on several sockets (and file descriptors) at once (`zmq_poll`).
///
/// Like the sockets it holds, a poller belongs to one thread.
public struct Poller {
    private var items: [zmq_pollitem_t] = []
    private var sockets: [Socket?] = []  // keeps each polled socket alive while the poller exists

    public init() {}

    /// Adds a socket and returns its index for ``events(at:)``.
    @discardableResult
    public mutating func add(_ socket: Socket, for events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: -1, events: events.rawValue, revents: 0))
        sockets.append(socket)
        return items.count - 1
    }

    /// Takes a socket out (before it is closed); the items after it move down one place, so
    /// indices from ``add(_:for:)`` taken before no longer hold for them. False if it was not in.
    @discardableResult
    public mutating func remove(_ socket: Socket) -> Bool {
        guard let index = sockets.firstIndex(where: { $0 === socket }) else { return false }
        items.remove(at: index)
        sockets.remove(at: index)
        return true
    }

    /// Adds a plain file descriptor (an eventfd, a pipe, a TCP socket of another library).
    @discardableResult
    public mutating func add(fileDescriptor: Int32, for events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        sockets.append(nil)
        return items.count - 1
    }

    /// Waits until at least one item is ready or `timeout` passes (`nil` = no limit, `.zero` =
    /// just look) and returns how many are ready. A context shutdown throws
    /// ``ZeroMQError/Code/terminated``.
    @discardableResult
    public mutating func poll(timeout: Duration?) throws(ZeroMQError) -> Int {
        let milliseconds: Int = timeout.map { Int($0.zmqMilliseconds) } ?? -1
        let count = Int32(items.count)
        return Int(
            try items.withUnsafeMutableBufferPointer { (buffer) throws(ZeroMQError) in
                try ZMQ.call("zmq_poll") { zmq_poll(buffer.baseAddress, count, milliseconds) }
            })
    }

    /// What item `index` was found ready for by the last ``poll(timeout:)``.
    public func events(at index: Int) -> PollEvents {
        PollEvents(rawValue: items[index].revents)
    }

    public var count: Int { items.count }
}
