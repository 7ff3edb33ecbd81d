import CZeroMQ
import Locking
import Synchronization

/// A libzmq context: the I/O threads and the registry of inproc endpoints that sockets share.
///
/// Unlike sockets, a context is safe to use from any thread (libzmq guarantees it), so this type is
/// `Sendable`. Each ``Socket`` keeps its context alive; the context is terminated when the last
/// reference goes away or when ``terminate()`` is called.
///
/// Shutting down is two steps, as in libzmq: ``shutdown()`` makes every blocking call on every
/// socket of the context return ``ZeroMQError/Code/terminated`` at once, so the threads that own
/// the sockets can close them; ``terminate()`` then waits for those sockets to close.
public final class Context: @unchecked Sendable {
    // @unchecked: `handle` is only ever passed to libzmq's context functions, which are documented
    // thread-safe; `terminated` is guarded by a Mutex.
    @usableFromInline let handle: UnsafeMutableRawPointer
    private let terminated = Locked(false)

    /// Creates a context.
    /// - Parameters:
    ///   - ioThreads: libzmq I/O threads (one is enough for about a gigabyte a second).
    ///   - maxSockets: the most sockets the context may hold, or libzmq's default (1023).
    ///   - blocky: `false` (the default): terminating the context never waits forever for unsent
    ///     messages; every ``Socket`` sets its own linger (``Socket/defaultLinger``, 500 ms).
    ///     `true` keeps libzmq's legacy infinite linger for sockets that do not set one.
    public init(ioThreads: Int32 = 1, maxSockets: Int32? = nil, blocky: Bool = false) throws(ZeroMQError) {
        let handle = try ZMQ.pointer("zmq_ctx_new") { zmq_ctx_new() }
        do {
            _ = try ZMQ.call("zmq_ctx_set", detail: "ZMQ_IO_THREADS") { zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) }
            if let maxSockets {
                _ = try ZMQ.call("zmq_ctx_set", detail: "ZMQ_MAX_SOCKETS") {
                    zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, maxSockets)
                }
            }
            _ = try ZMQ.call("zmq_ctx_set", detail: "ZMQ_BLOCKY") { zmq_ctx_set(handle, ZMQ_BLOCKY, blocky ? 1 : 0) }
        } catch {
            zmq_ctx_term(handle)
            throw error
        }
        self.handle = handle
    }

    /// Makes every blocking operation on this context's sockets, now or later, fail with
    /// ``ZeroMQError/Code/terminated``. Safe to call from any thread, any number of times.
    public func shutdown() {
        terminated.withLock { done in
            if !done { zmq_ctx_shutdown(handle) }
        }
    }

    /// A new socket of the context, or ETERM once ``terminate()`` began: libzmq frees the context
    /// when it terminates, and a socket asked of it then (a thread started earlier that sends a
    /// stop marker late, say) would be EFAULT or a read of freed memory. Creation and the start
    /// of termination take turns: a socket made first is one termination waits for.
    func makeSocket(_ type: Int32) throws(ZeroMQError) -> UnsafeMutableRawPointer {
        let handle = self.handle
        // As an address: a pointer is not Sendable out of the lock.
        let socket = try terminated.withLock { (done: inout Bool) throws(ZeroMQError) -> UInt in
            guard !done else {
                throw ZeroMQError(
                    code: .terminated, function: "zmq_socket", detail: "the context was terminated already")
            }
            return UInt(bitPattern: try ZMQ.pointer("zmq_socket") { zmq_socket(handle, type) })
        }
        return UnsafeMutableRawPointer(bitPattern: socket)!
    }

    /// Terminates the context: waits until every socket has been closed (by the threads that own
    /// them), then releases the context. Retries `EINTR`. Further calls do nothing.
    ///
    /// Call ``shutdown()`` first when other threads may be blocked on sockets of this context.
    public func terminate() throws(ZeroMQError) {
        let handle = self.handle
        let wasTerminated = terminated.withLock { done in
            let was = done
            done = true
            return was
        }
        guard !wasTerminated else { return }
        _ = try ZMQ.call("zmq_ctx_term") { zmq_ctx_term(handle) }
    }

    deinit {
        // Sockets hold a strong reference to their context, so by now every socket is closed and
        // zmq_ctx_term cannot wait on one.
        try? terminate()
    }
}
