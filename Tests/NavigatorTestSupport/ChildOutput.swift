import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a child process writes to a pipe, read by a thread of its own with blocking reads until
/// the end of the stream.
///
/// Not `FileHandle.readabilityHandler`: on Linux, tearing its dispatch read source down while
/// other threads set up and tear down theirs leaves a freed epoll note behind in libdispatch,
/// and the dispatch manager thread later crashes the whole test process in
/// `_dispatch_event_loop_drain` (swift-corelibs-libdispatch#949; seen here as a SIGSEGV with no
/// failing test). A blocking read never registers the descriptor with libdispatch.
public final class ChildOutput: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var ended = false
    }

    private let state = Locked(State())

    /// Starts reading `handle` (the read end of the child's pipe, ``ChildProcess/pipe()``). The
    /// parent's copy of the write end must be closed once the child runs, or the end of the
    /// stream never comes.
    public init(reading handle: FileHandle) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = read(handle.fileDescriptor, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                self.state.withLock { $0.bytes += buffer[0..<count] }
            }
            // The handle (and so its descriptor) lives until the loop is done with it.
            withExtendedLifetime(handle) { self.state.withLock { $0.ended = true } }
        }
        thread.name = "test-child-output"
        thread.start()
    }

    /// Everything read so far.
    public var text: String { state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }

    /// Whether the stream has ended (the reading thread is done).
    public var ended: Bool { state.withLock { $0.ended } }

    /// Waits until the stream has ended, at most `timeout`; says whether it did.
    @discardableResult
    public func waitForEnd(timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !ended {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// The same, for callers that are not async.
    @discardableResult
    public func waitForEndBlocking(timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !ended {
            guard ContinuousClock.now < deadline else { return false }
            usleep(5_000)
        }
        return true
    }
}
