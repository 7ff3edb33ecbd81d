import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The process's open-file limit, which bounds HTTP connections: each is a file descriptor, and
/// ZeroMQ's sockets, its I/O threads' pipes and the store need theirs too.
public enum FileLimit {
    /// Raises the soft limit of open files to the hard limit (a process may, unprivileged) and
    /// returns the soft limit now in force.
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur >= rlim_t(Int32.max) ? Int(Int32.max) : Int(limit.rlim_cur)
    }

    /// File descriptors kept for everything but HTTP connections, out of `limit`: 1,024, or a
    /// quarter of a smaller limit.
    public static func reserve(of limit: Int) -> Int { min(1024, limit / 4) }

    /// The most HTTP connections a process with `limit` open files may be configured for.
    public static func connectionCapacity(of limit: Int) -> Int { max(1, limit - reserve(of: limit)) }
}

/// Counts the HTTP connections open and turns away the one over the limit: it is answered
/// `503 Service Unavailable` (`Retry-After: 1`) and closed before anything of it is read, so a
/// crowd of idle connections cannot take the file descriptors the service needs.
final class ConnectionLimit: Sendable {
    let maximum: Int
    private let open = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)

    init(maximum: Int) { self.maximum = maximum }

    /// Connections open now.
    var count: Int { open.load(ordering: .relaxed) }

    /// Connections turned away so far.
    var turnedAway: Int { refused.load(ordering: .relaxed) }

    /// Takes `channel` in if there is room (it is counted until it closes); else answers it 503,
    /// closes it and returns false.
    func admit(_ channel: any Channel) -> Bool {
        guard open.add(1, ordering: .relaxed).newValue <= maximum else {
            open.subtract(1, ordering: .relaxed)
            refused.add(1, ordering: .relaxed)
            let refusal = HTTPAPI.APIError(
                .overloaded,
                "this instance has \(maximum) HTTP connections open already (maxConnections); retry later or on another instance",
                status: 503)
            // Once the channel is active (the initializer runs before), then lingering: the
            // client's request, unread, must not turn the close into a reset that loses this.
            let response = ByteBuffer(bytes: refusal.reply.closingResponse)
            channel.eventLoop.execute {
                LingeringClose.start(channel, after: channel.writeAndFlush(response))
            }
            return false
        }
        channel.closeFuture.whenComplete { [self] _ in open.subtract(1, ordering: .relaxed) }
        return true
    }
}
