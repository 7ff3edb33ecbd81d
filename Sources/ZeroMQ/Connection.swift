#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What libzmq's stable API lacks: dropping one peer of a bound socket.
public enum Connection {
    /// Ends the TCP or IPC connection on `descriptor` (a ``Message/sourceDescriptor``, or the
    /// value of an ``MonitorEvents/accepted`` event) by `shutdown(2)`: libzmq reads end-of-file
    /// on it and terminates that peer's pipe as for any disconnect, dropping what the peer had
    /// (its subscriptions on an XPUB). The descriptor stays libzmq's: it is not closed here.
    /// The process must ignore SIGPIPE (libzmq may still write to the connection).
    ///
    /// Only a connected socket is shut down: a descriptor number whose connection has ended may
    /// already be another part's — a listening socket (shut down, its `accept` fails with
    /// EINVAL, which libzmq answers with abort()), an eventfd, a file. The caller must still make
    /// sure the connection is the one it means (a freed number is reused at once); returns
    /// whether it shut one down.
    @discardableResult
    public static func drop(descriptor: Int32) -> Bool {
        guard isOpen(descriptor: descriptor) else { return false }
        return shutdown(descriptor, Int32(SHUT_RDWR)) == 0
    }

    /// Whether `descriptor` is (still) an open, connected socket. Not proof that a message's
    /// connection is the one on it: the next connection takes a freed descriptor number at once
    /// (navigatord's egress tells connections apart with its ConnectionLedger instead).
    public static func isOpen(descriptor: Int32) -> Bool {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) == 0 }
        }
    }

    /// Makes a write to a closed connection an error instead of a signal that kills the process.
    public static func ignoreBrokenPipes() {
        _ = signal(SIGPIPE, SIG_IGN)
    }
}
