import CZeroMQ
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An operating-system thread of its own, for work that blocks (a ZeroMQ socket loop) and so must
/// never run on Swift concurrency's cooperative pool, which has one thread per core.
public final class DedicatedThread: Sendable {
    private let thread: pthread_t
    private let joined = Locked(false)

    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept by Linux).
    public init(name: String, _ body: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable {
            // @unchecked: written once before the thread starts, read once by that thread.
            let name: String
            let body: @Sendable () -> Void
            init(name: String, body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
        #if canImport(Darwin)
            var handle: pthread_t? = nil
        #else
            var handle = pthread_t()
        #endif
        let result = pthread_create(
            &handle, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                czmq_set_thread_name(String(box.name.utf8.prefix(15))!)
                box.body()
                return nil
            }, box)
        precondition(result == 0, "pthread_create failed with \(result)")
        #if canImport(Darwin)
            thread = handle!
        #else
            thread = handle
        #endif
    }

    /// Waits for the thread to finish. Later calls return at once; never call it from the thread
    /// itself.
    public func join() {
        joined.withLock { done in
            guard !done else { return }
            pthread_join(thread, nil)
            done = true
        }
    }

    /// Lets the thread end on its own without being joined; `join()` then returns at once.
    public func detach() {
        joined.withLock { done in
            guard !done else { return }
            pthread_detach(thread)
            done = true
        }
    }

    /// A thread whose owner let go of it without joining or detaching it is detached: its
    /// resources are freed when it ends (ThreadSanitizer reported it as leaked).
    deinit {
        joined.withLock { done in
            if !done { pthread_detach(thread) }
        }
    }

    /// Runs `body` on a new thread and resumes the caller with its result, without ever blocking
    /// the caller's executor.
    public static func run<T: Sendable>(
        name: String, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = DedicatedThread(name: name) {
                continuation.resume(with: Result { try body() })
            }
            thread.detach()
        }
    }
}
