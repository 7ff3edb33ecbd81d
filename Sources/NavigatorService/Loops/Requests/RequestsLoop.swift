import Logging
import NavigatorCore
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import ZeroMQ

/// Owns the requests ROUTER. Acknowledged intents and client events go to the session's worker
/// (so they keep their order with the session's other work), and the worker's reply comes back
/// here to be routed; snapshots, dry runs, stats and the route map are answered here, reading
/// the store under its shard locks.
struct RequestsLoop: SocketLoop {
    let context: Context
    /// The commands XPUB, only to bring its subscriptions in force before a snapshot is taken.
    let commands: SharedSocket
    let endpoints: [String]
    let workers: Int
    let maxMessageBytes: Int
    /// Messages queued to each worker before requests for it are answered OVERLOADED.
    let handoffHighWaterMark: Int32
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: ServiceCounters
    let bound: BoundEndpoints
    /// Secure mode: each request's client (User-Id) must be allowed what it asks.
    let security: Security?
    let startedAt: Int64
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-requests" }

    struct Sockets {
        let router: Socket
        let replies: Socket
        let control: Socket
        let workers: [Socket]
        /// To egress: word that the XPUB holds subscriptions to read (after a snapshot's
        /// ``SharedSocket/processCommands()`` may have taken the signal egress waits on).
        let egress: Socket
        let limiter: LogLimiter
    }

    func open() throws -> Sockets {
        let router = try Socket(context, type: .router)
        try router.set(.maxMessageSize, Int64(max(maxMessageBytes * 4, 1 << 20)))
        try router.set(.linger, .milliseconds(500))
        bound.set(requests: try bindAll(router, endpoints, "requests", security: security))
        let replies = try Socket(context, type: .pull)
        try replies.set(.receiveHighWaterMark, 0)
        try replies.bind(Internal.replies)
        let control = try Socket(context, type: .pull)
        try control.bind(Internal.requestsControl)
        let pushes = try (0..<workers).map { index in
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, handoffHighWaterMark)
            try push.connect(Internal.worker(index))
            return push
        }
        let egress = try Socket(context, type: .push)
        try egress.connect(Internal.egress)
        return Sockets(
            router: router, replies: replies, control: control, workers: pushes, egress: egress,
            limiter: LogLimiter(logger: logger))
    }

    func run(_ sockets: Sockets) throws {
        var poller = Poller()
        poller.add(sockets.router)
        poller.add(sockets.replies)
        poller.add(sockets.control)
        var frames: [ZeroMQ.Message] = []
        var stopping = false
        var workersStopped = 0
        do {
            while workersStopped < workers {
                try poller.poll(timeout: nil)
                try supervisor.checkInjected(name)
                if poller.events(at: 2).contains(.readable) {
                    _ = try sockets.control.receiveMultipart()
                    stopping = true
                    // Nothing more goes to the workers; they stop once intake has stopped too.
                    for worker in sockets.workers { try worker.send(Internal.stop) }
                }
                if poller.events(at: 1).contains(.readable) {
                    while let count = try sockets.replies.receiveMultipart(into: &frames, wait: false) {
                        switch Internal.kind(of: frames, count: count, at: .requests) {
                        case .stop: workersStopped += 1
                        case .reply: try route(reply: frames, sockets)
                        default: Internal.unexpected(count, at: .requests, counters: counters, logger: logger)
                        }
                    }
                }
                if poller.events(at: 0).contains(.readable) {
                    for _ in 0..<256 {
                        // [routing id][empty][Request] at most: longer messages are counted, not kept.
                        guard let count = try sockets.router.receiveMultipart(into: &frames, wait: false, maxFrames: 3)
                        else { break }
                        try handle(frames, count, stopping: stopping, sockets)
                    }
                }
            }
            logger.debug("requests stopped")
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("requests ended by context shutdown")
        }
    }

    /// `[routing id][delimiter][Reply]` from a worker: back to the client.
    private func route(reply frames: [ZeroMQ.Message], _ sockets: Sockets) throws {
        let delimited = frames[1].withUnsafeBytes { $0.first == 1 }
        try toClient { () throws(ZeroMQError) in
            try sockets.router.send(frames[0], more: true)
            if delimited { try sockets.router.send([] as [UInt8], more: true) }
            try sockets.router.send(frames[2])
        }
    }

    /// Sends to a client; one that has gone away (ROUTER_MANDATORY would say so) is logged, not fatal.
    private func toClient(_ body: () throws(ZeroMQError) -> Void) throws(ZeroMQError) {
        do {
            try body()
        } catch {
            guard error.code == .hostUnreachable else { throw error }
            logger.info("client left before its reply", metadata: ["error": "\(error)"])
        }
    }

    private func handle(_ frames: [ZeroMQ.Message], _ count: Int, stopping: Bool, _ sockets: Sockets) throws {
        counters.requests.add()
        // [id][empty][Request] from DEALER/REQ clients, or [id][Request].
        let delimited = count == 3 && frames[1].count == 0
        guard count == 2 || delimited else {
            counters.refused(.badFrames, intent: false)
            return try reply(
                .rejection(
                    .badFrames,
                    "request message has \(count - 1) frames after the routing id; expected [empty][Request]"),
                to: frames[0], delimited: count >= 2 && frames[1].count == 0, sockets)
        }
        let payload = frames[count - 1]
        guard payload.count <= maxMessageBytes else {
            counters.refused(.tooLarge, intent: false)
            return try reply(
                .rejection(.tooLarge, "request is \(payload.count) bytes; expected at most \(maxMessageBytes)"),
                to: frames[0], delimited: delimited, sockets)
        }
        let request: Navigator_V1_Request
        do {
            request = try Navigator_V1_Request(serializedBytes: payload.bytes)
        } catch {
            counters.refused(.malformed, intent: false)
            return try reply(
                .rejection(.malformed, "request is not a valid navigator.v1.Request message: \(error)"), to: frames[0],
                delimited: delimited, sockets)
        }
        var answer = Navigator_V1_Reply()
        answer.requestID = request.requestID
        let isIntent = if case .intent? = request.kind { true } else { false }
        guard !request.requestID.isEmpty, request.requestID.utf8.count <= 128 else {
            // The id goes back as it came, so a client pipelining requests can tell which failed.
            counters.refused(.invalidID, intent: isIntent)
            answer.rejected = .rejection(
                .invalidID,
                "request_id \(request.requestID.isEmpty ? "is empty" : "has \(request.requestID.utf8.count) bytes"); expected 1 to 128 bytes"
            )
            return try reply(answer, to: frames[0], delimited: delimited, sockets)
        }
        if stopping {
            counters.refused(.shuttingDown, intent: isIntent)
            answer.rejected = .rejection(.shuttingDown, "the service is shutting down and takes no new requests")
            return try reply(answer, to: frames[0], delimited: delimited, sockets)
        }
        // The one check of the session id of requests: workers, snapshots and dry runs rely on it.
        if let session = request.session, let problem = SessionID.problem(with: session) {
            counters.refused(.invalidSession, intent: isIntent)
            answer.rejected = .rejection(.invalidSession, problem)
            return try reply(answer, to: frames[0], delimited: delimited, sockets)
        }
        // Secure mode: the sender's name (the User-Id its connection got from the ZAP handler).
        let client = security == nil ? nil : Security.clientName(of: payload)
        if let security, let action = request.action, let refusal = security.refusal(of: action, by: client) {
            counters.refused(.forbidden, intent: isIntent)
            answer.rejected = .rejection(.forbidden, refusal)
            return try reply(answer, to: frames[0], delimited: delimited, sockets)
        }
        switch request.kind {
        case .intent(let intent):
            try forward(
                frames[0], delimited, payload, session: intent.session, requestID: request.requestID, intent: true,
                client: client ?? "", sockets)
        case .clientEvent(let event):
            try forward(
                frames[0], delimited, payload, session: event.session, requestID: request.requestID, intent: false,
                client: client ?? "", sockets)
        case .snapshot(let wanted):
            // A shell subscribes, then asks for a snapshot (the Clone pattern). Its subscription
            // reached the XPUB before this request reached us, but takes effect only when the
            // XPUB processes its commands: make it do so now, so that every batch after the
            // snapshot reaches the shell — without it, a batch published between the snapshot
            // and the XPUB's next turn was lost with no later batch to reveal the gap.
            if try commands.processCommands()?.contains(.readable) == true {
                _ = try sockets.egress.trySend(Internal.subscriptionsWaiting)  // full: egress is awake
            }
            if let reason = store.notServed(wanted.session) {
                counters.refused(.moved, intent: false)
                answer.rejected = .rejection(.moved, reason)
            } else {
                answer.snapshot = snapshot(wanted.session)
            }
            try reply(answer, to: frames[0], delimited: delimited, sockets)
        case .explain(let intent):
            explain(intent, into: &answer)
            try reply(answer, to: frames[0], delimited: delimited, sockets)
        case .stats:
            answer.stats = stats()
            try reply(answer, to: frames[0], delimited: delimited, sockets)
        case .routes:
            answer.routes = .with {
                let current = resolvers.snapshot
                $0.source = current.source
                $0.yaml = RouteMapYAML.encode(current.resolver.map)
            }
            try reply(answer, to: frames[0], delimited: delimited, sockets)
        case nil:
            counters.refused(.unknownRequest, intent: false)
            answer.rejected = .rejection(
                .unknownRequest,
                "request has no kind this service knows; expected intent, client_event, snapshot, explain, stats or routes"
            )
            try reply(answer, to: frames[0], delimited: delimited, sockets)
        }
    }

    /// Hands an acknowledged request to its session's worker; a worker whose queue is full
    /// (`handoffHighWaterMark`) gets nothing more, and the client an OVERLOADED reply at once:
    /// this thread never waits for a worker (it also passes on the replies workers wait for).
    private func forward(
        _ routingID: ZeroMQ.Message, _ delimited: Bool, _ payload: ZeroMQ.Message, session: String,
        requestID: String, intent: Bool, client: String, _ sockets: Sockets
    ) throws {
        let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
        let push = sockets.workers[worker]
        guard
            try Internal.trySendRequest(
                on: push, routingID: routingID, delimited: delimited, request: payload, client: client)
        else {
            counters.refused(.overloaded, intent: intent)
            var answer = Navigator_V1_Reply()
            answer.requestID = requestID
            answer.rejected = .rejection(
                .overloaded,
                "the worker of session \(session) has \(handoffHighWaterMark) messages queued (handoffHighWaterMark); nothing was changed: retry later"
            )
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        counters.forwarded[worker].add()
    }

    private func reply(_ reply: Navigator_V1_Reply, to routingID: ZeroMQ.Message, delimited: Bool, _ sockets: Sockets)
        throws
    {
        if case .rejected(let rejected)? = reply.kind, sockets.limiter.allow(peerKey(routingID, "requests")) {
            logger.notice(
                "request rejected",
                metadata: [
                    "request": "\(LogText(reply.requestID))", "code": "\(rejected.code.label)",
                    "reason": "\(LogText(rejected.message))",
                ])
        }
        let bytes: [UInt8] = try reply.serializedBytes()
        try toClient { () throws(ZeroMQError) in
            try sockets.router.send(routingID, more: true)
            if delimited { try sockets.router.send([] as [UInt8], more: true) }
            try sockets.router.send(bytes)
        }
    }

    private func reply(
        _ rejected: Navigator_V1_Rejected, to routingID: ZeroMQ.Message, delimited: Bool, _ sockets: Sockets
    ) throws {
        var answer = Navigator_V1_Reply()
        answer.rejected = rejected
        try reply(answer, to: routingID, delimited: delimited, sockets)
    }
}

extension Navigator_V1_Request {
    /// The session the request concerns; nil for those about the service (stats, routes).
    var session: String? {
        switch action {
        case .publish(let session), .follow(let session): session
        case .inspect, nil: nil
        }
    }

    /// What the request does, in the access list's terms (nil: no kind, refused anyway).
    var action: AccessList.Action? {
        switch kind {
        case .intent(let intent): .publish(session: intent.session)
        case .explain(let intent): .publish(session: intent.session)
        case .clientEvent(let event): .follow(session: event.session)
        case .snapshot(let snapshot): .follow(session: snapshot.session)
        case .stats, .routes: .inspect
        case nil: nil
        }
    }
}
