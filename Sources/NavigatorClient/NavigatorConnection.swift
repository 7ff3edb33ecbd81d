import Locking
import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A connection to navigatord for producers and shells: fire-and-forget intents, requests with
/// timeouts, and followers that mirror a session's tree.
///
/// All socket work happens on one thread the connection owns; the async methods hand work to it
/// and await the result, so no ZeroMQ call ever runs on Swift concurrency's cooperative pool.
/// Every call is bounded by the timeout: an unreachable service is an error, never a hang.
public final class NavigatorConnection: Sendable {
    public let endpoints: ServerEndpoints
    public let timeout: Duration
    let shared: Shared
    private let thread: DedicatedThread

    /// Connects (the connection itself is made in the background by libzmq); throws for an
    /// endpoint libzmq cannot use.
    public init(endpoints: ServerEndpoints = ServerEndpoints(), timeout: Duration = .seconds(2)) async throws {
        self.endpoints = endpoints
        self.timeout = timeout
        let shared = try Shared()
        self.shared = shared
        let loop = IOLoop(endpoints: endpoints, timeout: timeout, shared: shared)
        var started: DedicatedThread?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            started = DedicatedThread(name: "nav-client") {
                let sockets: IOLoop.Sockets
                do {
                    sockets = try loop.open()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume()
                loop.run(sockets)
            }
        }
        thread = started!
    }

    deinit {
        shared.enqueue(.close(nil))
        thread.detach()
    }

    /// Closes the sockets; pending calls fail with ``ClientError/Code/closed``.
    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.enqueue(.close(continuation))
        }
        let thread = self.thread
        _ = try? await DedicatedThread.run(name: "nav-client-join") { thread.join() }
    }

    /// Publishes an intent without waiting for its outcome (the batch goes to the session's
    /// shells). Returns once navigatord's socket took it.
    public func send(_ intent: Intent) async throws {
        let bytes: [UInt8] = try Navigator_V1_Intent(intent).serializedBytes()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            shared.enqueue(.intent(session: intent.session, bytes: bytes, continuation))
        }
    }

    /// Publishes an intent already in its wire form (to the session it names).
    public func send(_ intent: Navigator_V1_Intent) async throws {
        let bytes: [UInt8] = try intent.serializedBytes()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            shared.enqueue(.intent(session: intent.session, bytes: bytes, continuation))
        }
    }

    /// Returns once the commands socket (SUB) has a connection to navigatord — its
    /// subscriptions go out as the connection is made — or after `timeout`. A fire-and-forget
    /// sender that listens for its rejection waits for this before sending, so that a
    /// rejection published at once is not missed for want of a connection.
    public func commandsConnected(timeout: Duration) async {
        let once = ResumeOnce()
        let shared = self.shared
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            once.set(continuation)
            shared.enqueue(.whenConnected({ once.resume() }))
            Task {
                try? await Task.sleep(for: timeout)
                once.resume()
            }
        }
    }

    /// Sends a request and returns its reply; a rejected reply is returned, not thrown.
    public func request(_ kind: Navigator_V1_Request.OneOf_Kind) async throws -> Navigator_V1_Reply {
        var request = Navigator_V1_Request()
        request.requestID = shared.nextRequestID()
        request.kind = kind
        let bytes: [UInt8] = try request.serializedBytes()
        let id = request.requestID
        return try await withCheckedThrowingContinuation { continuation in
            shared.enqueue(.request(id: id, bytes: bytes, continuation))
        }
    }

    /// Resolves an intent and returns navigatord's reply (outcome, batch, explanation).
    public func acknowledged(_ intent: Intent) async throws -> Navigator_V1_Reply {
        try await request(.intent(Navigator_V1_Intent(intent)))
    }

    /// What the intent would do now, changing nothing.
    public func explain(_ intent: Intent) async throws -> Navigator_V1_Reply {
        try await request(.explain(Navigator_V1_Intent(intent)))
    }

    public func snapshot(_ session: String) async throws -> Navigator_V1_Snapshot {
        let reply = try await request(.snapshot(.with { $0.session = session }))
        guard case .snapshot(let snapshot)? = reply.kind else { throw Self.unexpected(reply, "a snapshot") }
        return snapshot
    }

    public func stats() async throws -> Navigator_V1_Stats {
        let reply = try await request(.stats(.init()))
        guard case .stats(let stats)? = reply.kind else { throw Self.unexpected(reply, "stats") }
        return stats
    }

    public func routes() async throws -> Navigator_V1_RouteMap {
        let reply = try await request(.routes(.init()))
        guard case .routes(let routes)? = reply.kind else { throw Self.unexpected(reply, "the route map") }
        return routes
    }

    /// A candidate route map checked by navigatord as a reload would load it: its problems, or
    /// what it changes against the map in use. Nothing is loaded. Admins only in secure mode.
    public func checkRoutes(yaml: String, source: String) async throws -> Navigator_V1_RoutesCheck {
        let reply = try await request(
            .routesCheck(
                .with {
                    $0.yaml = yaml
                    $0.source = source
                }))
        guard case .routesCheck(let check)? = reply.kind else { throw Self.unexpected(reply, "the route map check") }
        return check
    }

    /// How the intents navigatord recorded would resolve under a candidate route map, against
    /// the map in use (its flight recorder replayed; nothing changes). An invalid candidate is
    /// answered with its problems (`check.valid` false). Admins only in secure mode.
    public func routesImpact(yaml: String, source: String) async throws -> Navigator_V1_RoutesImpact {
        let reply = try await request(
            .routesImpact(
                .with {
                    $0.yaml = yaml
                    $0.source = source
                }))
        guard case .routesImpact(let impact)? = reply.kind else { throw Self.unexpected(reply, "the impact report") }
        return impact
    }

    /// The route map rollout: started (`request.action` START, with the candidate and its
    /// share), promoted, rolled back, or as it stands (STATUS). A start with a candidate that does
    /// not load is answered with its problems (`check.valid` false), nothing started. Admins only
    /// in secure mode.
    public func routesRollout(_ rollout: Navigator_V1_RoutesRolloutRequest) async throws -> Navigator_V1_Rollout {
        let reply = try await request(.routesRollout(rollout))
        guard case .routesRollout(let rollout)? = reply.kind else { throw Self.unexpected(reply, "the rollout") }
        return rollout
    }

    /// Reports what a shell did on its tree at (`epoch`, `lastSeq`); returns the session's seq
    /// afterwards and the released intents. A stale event (the tree changed since) is refused
    /// with ``ClientError/Code/rejected`` carrying STALE_EVENT: take a snapshot.
    public func report(_ event: ClientEvent, session: String, lastSeq: UInt64 = 0, epoch: UInt64 = 0) async throws
        -> Navigator_V1_EventApplied
    {
        let reply = try await request(
            .clientEvent(Navigator_V1_ClientEvent(event, session: session, lastSeq: lastSeq, epoch: epoch)))
        guard case .eventApplied(let applied)? = reply.kind else { throw Self.unexpected(reply, "the event applied") }
        return applied
    }

    /// Follows a session (mirror kept by the Clone pattern) or everything. A session's first
    /// snapshot is asked for once the commands socket is connected, or after the timeout if it
    /// is not; the stream ends with an error if the snapshot then does not come within the
    /// timeout (so up to twice the timeout in all). Cancelling it unsubscribes.
    public func follow(_ target: FollowTarget) -> AsyncThrowingStream<SessionEvent, any Error> {
        AsyncThrowingStream { continuation in
            let id = shared.nextFollowerID()
            let shared = self.shared
            continuation.onTermination = { _ in shared.enqueue(.unfollow(id)) }
            shared.enqueue(.follow(SessionFollower(id: id, target: target, sink: FollowSink(continuation))))
        }
    }

    /// Follows as ``follow(_:)`` does, without a task or a stream: `onEvent` is called on the
    /// connection's I/O thread for each event, in order — it must return quickly and never
    /// block —, and `onEnd` once when following ends, with the error that ended it (nil: the
    /// connection closed). Cancel it with ``unfollow(_:)``; `onEnd` may still come if the
    /// follow ended before the unfollow was taken, and comes at once, on the caller's thread,
    /// when the connection is closed already.
    /// `audit: false` leaves audit records out (one topic less, none of their traffic).
    public func follow(
        _ target: FollowTarget, audit: Bool = true, onEvent: @escaping @Sendable (SessionEvent) -> Void,
        onEnd: @escaping @Sendable ((any Error)?) -> Void
    ) -> Following {
        let id = shared.nextFollowerID()
        shared.enqueue(
            .follow(
                SessionFollower(
                    id: id, target: target, audit: audit, sink: FollowSink(event: onEvent, end: onEnd))))
        return Following(id: id)
    }

    /// Stops a follow started with callbacks (its `onEnd` is not called, unless it ended already).
    public func unfollow(_ following: Following) { shared.enqueue(.unfollow(following.id)) }

    static func unexpected(_ reply: Navigator_V1_Reply, _ wanted: String) -> ClientError {
        if case .rejected(let rejected)? = reply.kind {
            return ClientError(
                .rejected, "navigatord refused: \(rejected.message) (\(rejected.code.label))", rejectCode: rejected.code
            )
        }
        return ClientError(.malformed, "navigatord answered with something other than \(wanted)")
    }
}

/// A follow started with callbacks, to stop with ``NavigatorConnection/unfollow(_:)``.
public struct Following: Sendable, Hashable {
    let id: Int
}

/// The hand-over between async callers and the I/O thread.
final class Shared: Sendable {
    enum Work: @unchecked Sendable {
        // @unchecked: a SessionFollower is created by the caller and, once enqueued, touched only
        // by the I/O thread; continuations are Sendable.
        case intent(session: String, bytes: [UInt8], CheckedContinuation<Void, any Error>)
        case request(id: String, bytes: [UInt8], CheckedContinuation<Navigator_V1_Reply, any Error>)
        case follow(SessionFollower)
        case unfollow(Int)
        case close(CheckedContinuation<Void, Never>?)
        /// Called once the commands socket is connected (at once if it is).
        case whenConnected(@Sendable () -> Void)
    }

    /// Work for the I/O thread; `closed` once that thread has ended (or is ending): later work
    /// fails at once instead of waiting for a thread that is gone.
    private let queue = Locked<(work: [Work], closed: Bool)>(([], false))
    private let counter = Atomic<Int>(0)
    let wakeRead: Int32
    let wakeWrite: Int32

    init() throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw ClientError(.socket, "cannot create the client's wake pipe: \(String(cString: strerror(errno)))")
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
        // Both ends non-blocking: a caller never waits on the pipe (a full pipe already holds a
        // wake-up), and the I/O thread drains it without blocking.
        for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
    }

    static let closedError = ClientError(.closed, "the connection to navigatord was closed")

    func enqueue(_ work: Work) {
        let accepted = queue.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.work.append(work)
            return true
        }
        guard accepted else {
            Self.fail(work)
            return
        }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func take() -> [Work] {
        var byte = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &byte, byte.count) > 0 {}
        return queue.withLock { state in
            defer { state.work.removeAll() }
            return state.work
        }
    }

    /// The I/O thread is ending: no more work is taken, and what was handed over but not yet
    /// taken fails now.
    func shutDown() {
        let left = queue.withLock { state -> [Work] in
            state.closed = true
            defer { state.work.removeAll() }
            return state.work
        }
        for work in left { Self.fail(work) }
    }

    /// Ends a piece of work that no I/O thread will ever do.
    static func fail(_ work: Work) {
        switch work {
        case .intent(_, _, let done): done.resume(throwing: closedError)
        case .request(_, _, let done): done.resume(throwing: closedError)
        case .follow(let follower): follower.fail(closedError)
        case .unfollow: break
        case .close(let done): done?.resume()
        case .whenConnected(let done): done()
        }
    }

    func nextRequestID() -> String { "c\(counter.wrappingAdd(1, ordering: .relaxed).newValue)" }
    func nextFollowerID() -> Int { counter.wrappingAdd(1, ordering: .relaxed).newValue }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }
}

/// A continuation resumed by whichever comes first (a connection or a timeout), once.
final class ResumeOnce: Sendable {
    private let continuation = Locked<CheckedContinuation<Void, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<Void, Never>) { self.continuation.withLock { $0 = continuation } }

    func resume() {
        let taken = continuation.withLock { value -> CheckedContinuation<Void, Never>? in
            defer { value = nil }
            return value
        }
        taken?.resume()
    }
}
