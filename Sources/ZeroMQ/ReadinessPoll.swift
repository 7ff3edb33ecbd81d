import CZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sleeps on the descriptors libzmq signals its sockets with (`ZMQ_FD`), in one poll(2), for a
/// thread that reads its sockets until they have nothing.
///
/// `zmq_poll` asks every socket for `ZMQ_EVENTS` before it sleeps and again when it wakes, and
/// each such question is a poll(2) of the socket's mailbox and a getpid(2) of libzmq's fork
/// check (docs/benchmarks-history.md, "Fewer wake-ups per intent"). Here a wake-up costs one
/// poll(2), and only the sockets whose descriptor fired are read.
///
/// What makes it sound: a socket's descriptor becomes readable when a command reaches its
/// mailbox, and a message arriving on a pipe its reader had found empty is such a command. A
/// non-blocking receive that finds nothing has processed the mailbox's commands and looked at
/// the pipes again after them, leaving each pipe marked empty. So a socket
/// read until a receive found nothing (``read(_:drained:)``) signals its descriptor when the next
/// message comes, and may be slept on; one whose reader stopped early (a batch limit) may hold
/// messages without a signal, so ``wait(milliseconds:)`` does not sleep until it is drained again.
/// A context's shutdown also reaches every mailbox: the next receive throws `ETERM`.
///
/// Only for sockets the thread only receives on: a send processes commands too and could take
/// the signal. Like the sockets it watches, it belongs to one thread.
public struct ReadinessPoll {
    private var descriptors: [pollfd]
    private var sockets: [Socket]  // kept alive while watched
    /// Whether the socket was read until a receive found nothing, since the last wait.
    private var empty: [Bool]

    /// Watches `sockets` (each one's `ZMQ_FD`, read once: it does not change while it is open),
    /// each first taken as not drained.
    public init(_ sockets: [Socket]) throws(ZeroMQError) {
        self.sockets = sockets
        descriptors = []
        for socket in sockets {
            descriptors.append(pollfd(fd: try socket.get(.fileDescriptor), events: Int16(POLLIN), revents: 0))
        }
        empty = Array(repeating: false, count: sockets.count)
    }

    /// Notes how a read of socket `index` ended: `drained`, a receive found nothing; otherwise
    /// the reader stopped early, and the socket counts as fired at the next wait.
    public mutating func read(_ index: Int, drained: Bool) { empty[index] = drained }

    /// Waits up to `milliseconds` (-1: no limit) for a watched socket's descriptor to fire; only
    /// looks while a socket is not drained (it counts as fired). Afterwards ``fired(_:)`` says
    /// which sockets to read; a fired socket counts as not drained until ``read(_:drained:)``.
    public mutating func wait(milliseconds: Int32) throws(ZeroMQError) {
        let timeout = empty.allSatisfy { $0 } ? milliseconds : 0
        let count = nfds_t(descriptors.count)
        while true {
            let (result, code) = descriptors.withUnsafeMutableBufferPointer { buffer in
                let result = poll(buffer.baseAddress, count, timeout)
                return (result, result < 0 ? errno : 0)
            }
            if result >= 0 { break }
            if code == EINTR { continue }
            throw ZeroMQError(code: .init(rawValue: code), function: "poll")
        }
        for index in descriptors.indices {
            if !empty[index] { descriptors[index].revents |= Int16(POLLIN) }
            if fired(index) { empty[index] = false }
        }
    }

    /// Whether socket `index` may have something to read after the last wait: its descriptor
    /// fired, or it was not drained before.
    public func fired(_ index: Int) -> Bool {
        descriptors[index].revents & Int16(POLLIN | POLLERR | POLLHUP | POLLNVAL) != 0
    }
}
