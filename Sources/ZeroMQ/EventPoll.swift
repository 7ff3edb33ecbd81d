import CZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// An epoll(7) set of plain descriptors (not ZeroMQ sockets), for a thread that reads many of
/// them: a wake-up costs the descriptors that are ready, not all of them. Linux only.
public final class EventPoll {
    private let fd: Int32
    private var ready: [epoll_event]

    /// Fails with the system's reason when no epoll instance can be had.
    public init(capacity: Int = 1024) throws(ZeroMQError) {
        fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw ZeroMQError(code: .init(rawValue: errno), function: "epoll_create1") }
        ready = Array(repeating: epoll_event(), count: max(1, capacity))
    }

    deinit { close(fd) }

    /// Watches `descriptor` for input; `token` comes back from ``wait(milliseconds:)``.
    public func add(_ descriptor: Int32, token: UInt64) throws(ZeroMQError) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = token
        guard epoll_ctl(fd, EPOLL_CTL_ADD, descriptor, &event) == 0 else {
            throw ZeroMQError(code: .init(rawValue: errno), function: "epoll_ctl")
        }
    }

    /// Stops watching `descriptor`.
    public func remove(_ descriptor: Int32) { _ = epoll_ctl(fd, EPOLL_CTL_DEL, descriptor, nil) }

    /// The tokens of the descriptors ready to read, waiting up to `milliseconds` for one.
    public func wait(milliseconds: Int32) -> [UInt64] {
        let count = epoll_wait(fd, &ready, Int32(ready.count), milliseconds)
        guard count > 0 else { return [] }
        return ready[0..<Int(count)].map { $0.data.u64 }
    }
}
