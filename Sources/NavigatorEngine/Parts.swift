import Locking
import Logging
import ServiceLifecycle
import Synchronization
import ZeroMQ

/// navigatord's parts as swift-service-lifecycle services, run by one `ServiceGroup` (see
/// ``Engine/run()``): started in dependency order — ZAP (secure mode), flush, egress, the workers
/// (worker 0, which reads the intents socket, last), requests, and last the gate — and stopped
/// in reverse. A part that fails throws, and
/// the group then shuts the others down gracefully.

/// Counts the parts that have opened their sockets; when all have, the service is ready.
final class PartsReady: Sendable {
    private let state = Locked<(opened: Int, ended: Bool, waiters: [CheckedContinuation<Bool, Never>])>((0, false, []))
    let expected: Int

    init(expected: Int) { self.expected = expected }

    /// One more part has opened; returns whether it was the last.
    @discardableResult
    func opened() -> Bool {
        let (last, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Bool, Never>]) in
            state.opened += 1
            guard state.opened == expected else { return (false, []) }
            defer { state.waiters = [] }
            return (true, state.waiters)
        }
        for waiter in waiters { waiter.resume(returning: true) }
        return last
    }

    /// The group ended (before or after every part opened): nobody waits any longer.
    func ended() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: false) }
    }

    /// Whether every part opened at some point.
    var wasReady: Bool { state.withLock { $0.opened == expected } }

    /// Waits until every part has opened (true) or the group ended first (false).
    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Bool? in
                if state.opened == expected { return true }
                if state.ended { return false }
                state.waiters.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}

/// How the stop went: which parts had to be cancelled past the shutdown bound, and whether each
/// had been asked to stop by then (the one that was is the part that did not end in time; the
/// others were still waiting for their turn).
final class ShutdownRecord: Sendable {
    private let cut = Locked<[String]>([])
    func markCut(_ part: String, stopping: Bool) {
        cut.withLock { $0.append(stopping ? "\(part) (stopping)" : "\(part) (not yet asked to stop)") }
    }
    var wasCut: Bool { cut.withLock { !$0.isEmpty } }
    /// The parts cancelled, in the order they were.
    var parts: [String] { cut.withLock { $0 } }
}

/// One socket loop as a part: `run()` opens its sockets and starts its thread (a bind error
/// throws), then waits for the thread to end and for its turn in the group's shutdown. Graceful
/// shutdown runs `stop` (a stop marker, for the loops that take work in); the others end on their
/// own once the parts after them have.
/// Cancellation (past the shutdown bound) shuts the context down, which ends every loop. A loop
/// that failed makes `run()` throw its failure.
struct LoopPart<Loop: SocketLoop>: Service {
    let loop: Loop
    let context: Context
    let record: ShutdownRecord
    /// Told once the loop's sockets are bound.
    let opened: @Sendable () -> Void
    var stop: (@Sendable () -> Void)? = nil
    /// Opens its sockets only once this prerequisite is ready (ends at once if it never is).
    var after: PartsReady? = nil
    /// Run once the loop runs, before it counts as opened; a throw stops the loop and fails the
    /// part (the ZAP handler proves it answers).
    var check: (@Sendable () async throws -> Void)? = nil
    /// Told when this part ends, however it ends (before it opened, too), so that the parts
    /// waiting on it (`after`) stop waiting.
    var releases: PartsReady? = nil

    func run() async throws {
        defer { releases?.ended() }
        if let after, !(await after.wait()) { return }
        let thread = try await loop.start()
        if let check {
            do {
                try await check()
            } catch {
                stop?()
                _ = try? await DedicatedThread.run(name: "nav-join") { thread.join() }
                throw error
            }
        }
        opened()
        let (context, record, stop, name) = (self.context, self.record, self.stop, loop.name)
        let stopping = Once()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                _ = try? await DedicatedThread.run(name: "nav-join") { thread.join() }
            } onGracefulShutdown: {
                _ = stopping.first()
                stop?()
            }
        } onCancel: {
            record.markCut(name, stopping: stopping.happened)
            context.shutdown()
        }
        if let failure = loop.supervisor.failure, failure.part == loop.name { throw failure }
        // A loop that stops on its own (a worker, once intake and requests have stopped) may end
        // before the group comes to it; it is done only when the group says so.
        try? await gracefulShutdown()
    }
}

/// Sends a stop marker to a loop's control socket, from a short-lived socket on a thread of its
/// own (never on Swift concurrency's pool).
func signalStop(_ context: Context, _ endpoint: String) {
    DedicatedThread(name: "nav-signal") {
        guard let push = try? Socket(context, type: .push) else { return }
        try? push.set(.linger, .seconds(5))
        try? push.connect(endpoint)
        try? push.send(Internal.stop)
    }.detach()
}

/// The last part started and the first stopped: on graceful shutdown it turns the engine's
/// ``Engine/readiness`` (what /readyz answers) to not ready before any other part stops taking
/// work.
struct GatePart: Service {
    let onShutdown: @Sendable () -> Void

    func run() async throws {
        try? await gracefulShutdown()
        onShutdown()
    }
}
