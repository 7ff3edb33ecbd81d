import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import ZeroMQ

/// Owns the requests ROUTER and the calls made in process (``CallDesk``), admitted alike by
/// ``process(routingID:delimited:payload:client:forwarded:stopping:_:)``. Acknowledged intents and
/// client events go to the session's worker (so they keep their order with the session's other
/// work), and the worker's reply comes back here to be routed; snapshots, dry runs, stats and the
/// route map are answered here, reading the store under its shard locks.
struct RequestsLoop: SocketLoop {
    let context: Context
    /// The commands XPUB, only to bring its subscriptions in force before a snapshot is taken.
    let commands: SharedSocket
    let endpoints: [String]
    let workers: Int
    let maxMessageBytes: Int
    /// Messages queued to each worker before requests for it are answered OVERLOADED.
    let handoffHighWaterMark: Int32
    /// Replies that may wait for their sessions to be written (the flush thread's, while the
    /// store is slow or away: ``EngineCounters/repliesWaiting``) before acknowledged requests
    /// are answered OVERLOADED: ten times what the workers' queues hold. Beyond it they would
    /// pile up, each with its reply, for as long as the store stays away.
    var maxRepliesWaiting: UInt64 { UInt64(10 * max(1, Int(handoffHighWaterMark)) * max(1, workers)) }
    let store: SessionStore
    let resolvers: ResolverHolder
    let counters: EngineCounters
    let bound: BindingRecord
    /// Secure mode: each request's client (User-Id) must be allowed what it asks.
    let security: Security?
    let startedAt: Int64
    /// Several instances: where peers forward to this instance (empty: no forwarding; see
    /// ``ClusterLink``).
    var clusterEndpoints: [String] = []
    /// The live instances (this one alone with SQLite), and this one's id.
    var instances: @Sendable () -> [InstanceRecord] = { [] }
    var instanceID = ""
    /// Calls made in process: their messages come on ``Internal/calls``, their replies go back
    /// to it.
    let desk: CallDesk
    /// The flight recorder (routes_impact replays it), and the thread that answers route map
    /// checks and impact reports.
    let recorders: [FlightRecorder]
    let routeMapDesk: RouteMapDesk
    /// The workers' desks: each intents message sent to a worker is counted there (``WorkerDesk``).
    let desks: [WorkerDesk]
    /// The staged rollout of route maps (routes_rollout).
    let rolloutKeeper: RolloutKeeper
    /// Rejections of forwarded intents that cannot be taken here go to the session's followers.
    let follows: SessionFollows
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-requests" }

    struct Sockets {
        let router: Socket
        let replies: Socket
        let control: Socket
        /// Calls made in process (``CallDesk``).
        let calls: Socket
        let workers: [Socket]
        /// To egress: word that the XPUB holds subscriptions to read (after a snapshot's
        /// ``SharedSocket/processCommands()`` may have taken the signal egress waits on).
        let egress: Socket
        let limiter: LogLimiter
        /// Several instances: the ROUTER peers forward to, and the DEALERs to the peers.
        let cluster: Socket?
        let peers: ClusterPeers
        /// Several instances: publishes the rejection of a forwarded intent this instance cannot
        /// take (its producer reads it on `r/<session>/`, as any rejection).
        let publisher: Publisher?
        /// Requests forwarded to their owner whose reply has not come yet.
        let forwarded: ForwardedRequests
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
        let calls = try Socket(context, type: .pull)
        try calls.set(.receiveHighWaterMark, handoffHighWaterMark)
        try calls.bind(Internal.calls)
        let pushes = try (0..<workers).map { index in
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, handoffHighWaterMark)
            try push.connect(Internal.worker(index))
            return push
        }
        let egress = try Socket(context, type: .push)
        try egress.connect(Internal.egress)
        var cluster: Socket? = nil
        if !clusterEndpoints.isEmpty, store.ownership != nil {
            let socket = try Socket(context, type: .router)
            try socket.set(.maxMessageSize, Int64(max(maxMessageBytes * 4, 1 << 20)))
            try socket.set(.linger, .milliseconds(500))
            // Secure mode: a CURVE server like the others; only the peers' key may send here
            // (``handleForwarded(_:_:stopping:_:)`` checks each message).
            bound.set(cluster: try bindAll(socket, clusterEndpoints, "cluster", security: security).first)
            cluster = socket
        }
        return Sockets(
            router: router, replies: replies, control: control, calls: calls, workers: pushes, egress: egress,
            limiter: LogLimiter(logger: logger), cluster: cluster,
            peers: ClusterPeers(context: context, keys: security?.serverKeys),
            publisher: cluster == nil
                ? nil
                : try Publisher(
                    context: context, commands: commands, follows: follows, counters: counters, epoch: store.epoch),
            forwarded: ForwardedRequests())
    }

    func run(_ sockets: Sockets) throws {
        func makePoller() -> Poller {
            var poller = Poller()
            poller.add(sockets.router)
            poller.add(sockets.replies)
            poller.add(sockets.control)
            poller.add(sockets.calls)
            if let cluster = sockets.cluster { poller.add(cluster) }
            for peer in sockets.peers.sockets { poller.add(peer.socket) }
            return poller
        }
        var poller = makePoller()
        let firstPeer = sockets.cluster == nil ? 4 : 5
        var frames: [ZeroMQ.Message] = []
        var stopping = false
        var workersStopped = 0
        do {
            while workersStopped < workers {
                if sockets.peers.added {
                    sockets.peers.added = false
                    poller = makePoller()
                }
                // Woken at least once a second: calls past their deadline are answered.
                try poller.poll(timeout: .seconds(1))
                try supervisor.checkInjected(name)
                desk.expire(now: MonotonicClock.now())
                try answerOverdue(sockets)
                if let ownership = store.ownership, sockets.cluster != nil {
                    try sockets.peers.keep(ownership.peerEndpoints, now: MonotonicClock.now())
                }
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
                if poller.events(at: 3).contains(.readable) {
                    for _ in 0..<256 {
                        guard let count = try sockets.calls.receiveMultipart(into: &frames, wait: false, maxFrames: 5)
                        else { break }
                        try handleCall(frames, count, stopping: stopping, sockets)
                    }
                }
                if let cluster = sockets.cluster, poller.events(at: 4).contains(.readable) {
                    for _ in 0..<256 {
                        guard
                            let count = try cluster.receiveMultipart(
                                into: &frames, wait: false, maxFrames: Self.clusterMaxFrames)
                        else { break }
                        try handleForwarded(frames, count, stopping: stopping, sockets)
                    }
                }
                for (index, peer) in sockets.peers.sockets.enumerated()
                where firstPeer + index < poller.count && poller.events(at: firstPeer + index).contains(.readable) {
                    // [routing id][delimiter][Reply] from the owner: back to the client, unless it
                    // was answered UNAVAILABLE meanwhile.
                    while let count = try peer.socket.receiveMultipart(into: &frames, wait: false, maxFrames: 3) {
                        guard count == 3 else {
                            Internal.unexpected(count, at: .requests, counters: counters, logger: logger)
                            continue
                        }
                        guard sockets.forwarded.settle(frames[0].bytes, reply: frames[2].bytes) != nil else {
                            logger.debug(
                                "a late reply of a forwarded request was dropped (answered UNAVAILABLE already)")
                            continue
                        }
                        try route(reply: frames, sockets)
                    }
                }
            }
            logger.debug("requests stopped")
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("requests ended by context shutdown")
        }
        desk.close(
            .shuttingDown,
            "the service is shutting down; a request it took may or may not have been carried out: retry the same request once it is back"
        )
    }

    /// `[routing id][delimiter][Reply]` from a worker (or from the owner of a request this
    /// instance forwarded): back to the client — or, for a request another instance forwarded
    /// here, back to that instance.
    func route(reply frames: [ZeroMQ.Message], _ sockets: Sockets) throws {
        if let call = CallDesk.call(of: frames[0]) { return desk.complete(call, frames[2].bytes) }
        if let cluster = sockets.cluster, let (peer, routingID) = ClusterLink.split(frames[0]) {
            return try toClient { () throws(ZeroMQError) in
                try cluster.send(peer, more: true)
                try cluster.send(routingID, more: true)
                try cluster.send(frames[1], more: true)
                try cluster.send(frames[2])
            }
        }
        let delimited = frames[1].withUnsafeBytes { $0.first == 1 }
        try toClient { () throws(ZeroMQError) in
            try sockets.router.send(frames[0], more: true)
            if delimited { try sockets.router.send([] as [UInt8], more: true) }
            try sockets.router.send(frames[2])
        }
    }

    /// Answers `UNAVAILABLE` the forwarded requests whose owner has not replied in time.
    func answerOverdue(_ sockets: Sockets) throws {
        for (routingID, entry) in sockets.forwarded.overdue(now: MonotonicClock.now()) {
            counters.refused(.unavailable, intent: false)
            if sockets.limiter.allow("forward-overdue") {
                logger.warning(
                    "a forwarded request got no reply in time; answered UNAVAILABLE",
                    metadata: ["session": "\(LogText(entry.session))", "owner": "\(entry.endpoint)"])
            }
            let frames = [
                try ZeroMQ.Message(copying: routingID),
                try ZeroMQ.Message(copying: [entry.delimited ? 1 : 0] as [UInt8]),
                try ZeroMQ.Message(copying: try sockets.forwarded.unavailable(entry).serializedBytes() as [UInt8]),
            ]
            try route(reply: frames, sockets)
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
        try process(
            routingID: frames[0], delimited: delimited, payload: frames[count - 1],
            client: security == nil ? nil : Security.clientName(of: frames[count - 1]), forwarded: false,
            stopping: stopping, sockets)
    }

    /// A request from a client — on the ROUTER, made in process, or `forwarded` by another
    /// instance, whose client it was — from `client` (its access-file name in secure mode):
    /// answered here, handed to its session's worker, or forwarded to the instance that serves
    /// its session. The one admission of every request, whichever way it came.
    func process(
        routingID: ZeroMQ.Message, delimited: Bool, payload: ZeroMQ.Message, client: String?, forwarded: Bool,
        stopping: Bool, _ sockets: Sockets
    ) throws {
        guard payload.count <= maxMessageBytes else {
            counters.refused(.tooLarge, intent: false)
            // Its id read from the bytes, the rest not decoded: the client (or the instance that
            // forwarded it, which waits for that id) can tell which request this answers.
            var answer = Navigator_V1_Reply()
            answer.requestID = payload.withUnsafeBytes { RequestIDReader.requestID(in: $0) } ?? ""
            answer.rejected = .rejection(
                .tooLarge, "request is \(payload.count) bytes; expected at most \(maxMessageBytes)")
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        let request: Navigator_V1_Request
        do {
            request = try Navigator_V1_Request(serializedBytes: payload.bytes)
        } catch {
            counters.refused(.malformed, intent: false)
            return try reply(
                .rejection(.malformed, "request is not a valid navigator.v1.Request message: \(error)"), to: routingID,
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
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        if stopping {
            counters.refused(.shuttingDown, intent: isIntent)
            answer.rejected = .rejection(.shuttingDown, "the service is shutting down and takes no new requests")
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        // The one check of the session id of requests: workers, snapshots and dry runs rely on it.
        if let session = request.session, let problem = SessionID.problem(with: session) {
            counters.refused(.invalidSession, intent: isIntent)
            answer.rejected = .rejection(.invalidSession, problem)
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        if let security, let action = request.action, let refusal = security.refusal(of: action, by: client) {
            counters.refused(.forbidden, intent: isIntent)
            answer.rejected = .rejection(.forbidden, refusal)
            return try reply(answer, to: routingID, delimited: delimited, sockets)
        }
        if !forwarded, let session = request.forwardableSession,
            let endpoint = store.ownership?.forwardEndpoint(of: session), sockets.cluster != nil
        {
            // Another instance serves the session: the request goes there, its reply comes back.
            let peer = try sockets.peers.socket(to: endpoint)
            if try peer.trySend([ClusterLink.requestKind], more: true) {
                let routingBytes = routingID.bytes  // sending the message empties it
                try peer.send(routingID, more: true)
                try peer.send([delimited ? 1 : 0] as [UInt8], more: true)
                try peer.send(payload, more: true)
                try peer.send(Array((client ?? "").utf8))
                counters.forwardsSent.add()
                sockets.forwarded.add(
                    routingID: routingBytes, requestID: request.requestID, session: session, endpoint: endpoint,
                    delimited: delimited, now: MonotonicClock.now())
                return
            }
            // The link to it is full (the peer is gone or overwhelmed): say where the session is.
        }
        switch request.kind {
        case .intent(let intent):
            try handOver(
                routingID, delimited, payload, session: intent.session, requestID: request.requestID, intent: true,
                client: client ?? "", sockets)
        case .clientEvent(let event):
            try handOver(
                routingID, delimited, payload, session: event.session, requestID: request.requestID, intent: false,
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
                answer.rejected.owner = store.owner(of: wanted.session) ?? ""
            } else {
                answer.snapshot = snapshot(wanted.session)
            }
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .explain(let intent):
            explain(intent, into: &answer)
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .stats:
            answer.stats = stats()
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .instances:
            answer.instances = .with { list in
                list.instances = instances().map { record in
                    .with {
                        $0.id = record.id
                        $0.requestEndpoints = record.requestEndpoints
                        $0.commandEndpoints = record.commandEndpoints
                        $0.answering = record.id == instanceID
                    }
                }
            }
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .routes:
            answer.routes = .with {
                let current = resolvers.snapshot
                $0.source = current.source
                $0.yaml = RouteMapYAML.encode(current.resolver.map)
            }
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .routesCheck(let candidate):
            try onRouteMapDesk(requestID: request.requestID, routingID, delimited: delimited, sockets) { answer in
                answer.routesCheck = self.routesCheck(yaml: candidate.yaml, source: candidate.source).check
            }
        case .routesImpact(let candidate):
            try onRouteMapDesk(requestID: request.requestID, routingID, delimited: delimited, sockets) { answer in
                self.impact(candidate, into: &answer)
            }
        case .routesRollout(let rollout) where rollout.action == .status:
            // Read here (nothing to load or write), not behind a report on the route map desk.
            rolloutStatus(rollout, into: &answer)
            try reply(answer, to: routingID, delimited: delimited, sockets)
        case .routesRollout(let rollout):
            let by = client.map { "client \($0)" } ?? "a routes_rollout request"
            try onRouteMapDesk(requestID: request.requestID, routingID, delimited: delimited, sockets) { answer in
                self.rollout(rollout, by: by, into: &answer)
            }
        case nil:
            counters.refused(.unknownRequest, intent: false)
            answer.rejected = .rejection(
                .unknownRequest,
                "request has no kind this service knows; expected intent, client_event, snapshot, explain, stats, routes, routes_check, routes_impact, routes_rollout or instances"
            )
            try reply(answer, to: routingID, delimited: delimited, sockets)
        }
    }

    /// Hands an acknowledged request to its session's worker; a worker whose queue is full
    /// (`handoffHighWaterMark`) gets nothing more, and the client an OVERLOADED reply at once:
    /// this thread never waits for a worker (it also passes on the replies workers wait for).
    private func handOver(
        _ routingID: ZeroMQ.Message, _ delimited: Bool, _ payload: ZeroMQ.Message, session: String,
        requestID: String, intent: Bool, client: String, _ sockets: Sockets
    ) throws {
        let waiting = counters.repliesWaiting.load
        guard waiting < maxRepliesWaiting else {
            return try refuse(
                .overloaded,
                "\(waiting) replies wait for their sessions to be written (the state store is slow or unavailable; at most 10 × handoffHighWaterMark × workers = \(maxRepliesWaiting)); nothing was changed: retry later",
                requestID: requestID, intent: intent, to: routingID, delimited: delimited, sockets)
        }
        let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
        let push = sockets.workers[worker]
        guard
            try Internal.trySendRequest(
                on: push, routingID: routingID, delimited: delimited, request: payload, client: client)
        else {
            return try refuse(
                .overloaded,
                "the worker of session \(session) has \(handoffHighWaterMark) messages queued (handoffHighWaterMark); nothing was changed: retry later",
                requestID: requestID, intent: intent, to: routingID, delimited: delimited, sockets)
        }
        counters.handedOver[worker].add()
    }

    /// Answers a request with a refusal made here (counted).
    func refuse(
        _ code: Navigator_V1_RejectCode, _ message: String, requestID: String, intent: Bool,
        to routingID: ZeroMQ.Message, delimited: Bool, _ sockets: Sockets
    ) throws {
        counters.refused(code, intent: intent)
        var answer = Navigator_V1_Reply()
        answer.requestID = requestID
        answer.rejected = .rejection(code, message)
        try reply(answer, to: routingID, delimited: delimited, sockets)
    }

    func reply(_ reply: Navigator_V1_Reply, to routingID: ZeroMQ.Message, delimited: Bool, _ sockets: Sockets)
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
        if let call = CallDesk.call(of: routingID) { return desk.complete(call, bytes) }
        if let cluster = sockets.cluster, let (peer, original) = ClusterLink.split(routingID) {
            // A request another instance forwarded: the answer goes back through it.
            return try toClient { () throws(ZeroMQError) in
                try cluster.send(peer, more: true)
                try cluster.send(original, more: true)
                try cluster.send([delimited ? 1 : 0] as [UInt8], more: true)
                try cluster.send(bytes)
            }
        }
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
    /// The session of a request its session's owner must answer (intents, client events,
    /// snapshots); nil for the others, which any instance answers.
    var forwardableSession: String? {
        switch kind {
        case .intent(let intent): intent.session
        case .clientEvent(let event): event.session
        case .snapshot(let snapshot): snapshot.session
        case .explain, .stats, .routes, .routesCheck, .routesImpact, .routesRollout, .instances, nil: nil
        }
    }

    /// The session the request concerns; nil for those about the service (stats, routes).
    var session: String? {
        switch action {
        case .publish(let session), .follow(let session): session
        case .inspect, nil: nil
        }
    }

    /// What the request does, in the access list's terms (nil: no kind, refused anyway; or the
    /// list of instances, which every admitted client may read: shells need it).
    var action: AccessList.Action? {
        switch kind {
        case .intent(let intent): .publish(session: intent.session)
        case .explain(let intent): .publish(session: intent.session)
        case .clientEvent(let event): .follow(session: event.session)
        case .snapshot(let snapshot): .follow(session: snapshot.session)
        case .stats, .routes, .routesCheck, .routesImpact, .routesRollout: .inspect
        case .instances, nil: nil
        }
    }
}
