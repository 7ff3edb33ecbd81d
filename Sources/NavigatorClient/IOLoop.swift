import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import ZeroMQ

/// The client's socket thread: sends intents and requests handed over through ``Shared``,
/// routes replies, feeds followers, and fails whatever outlives its deadline.
struct IOLoop: Sendable {
    let endpoints: ServerEndpoints
    let timeout: Duration
    let shared: Shared

    struct Sockets {
        let context: Context
        let push: Socket
        let dealer: Socket
        let sub: Socket
        /// The SUB's monitor: a new connection (a restarted service, a network blip healed)
        /// means batches may have been lost meanwhile.
        let subEvents: Socket
    }

    /// Where the SUB's monitor publishes (inproc names are per context; each client has its own).
    static let subMonitor = "inproc://navigator-client-sub-monitor"

    func open() throws -> Sockets {
        do {
            let context = try Context()
            let push = try Socket(context, type: .push)
            // Queue only to a completed connection, so an absent service is noticed, not hidden.
            try push.set(.immediate, true)
            try push.set(.linger, .milliseconds(500))
            try push.secure(with: endpoints.curve)
            if !endpoints.intents.isEmpty { try push.connect(endpoints.intents) }
            let dealer = try Socket(context, type: .dealer)
            try dealer.set(.immediate, true)
            try dealer.secure(with: endpoints.curve)
            try dealer.connect(endpoints.requests)
            let sub = try Socket(context, type: .sub)
            // ZMTP heartbeats: a peer that went silent (host gone, cable cut) is dropped and
            // reconnected to, instead of looking like a quiet session forever.
            try sub.set(.heartbeatInterval, .seconds(1))
            try sub.set(.heartbeatTimeout, .seconds(3))
            try sub.set(.heartbeatTTL, .seconds(3))
            try sub.monitor(Self.subMonitor, events: [.handshakeSucceeded, .disconnected])
            let subEvents = try Socket(context, type: .pair)
            try subEvents.connect(Self.subMonitor)
            try sub.secure(with: endpoints.curve)
            try sub.connect(endpoints.commands)
            return Sockets(context: context, push: push, dealer: dealer, sub: sub, subEvents: subEvents)
        } catch {
            throw ClientError(.socket, "cannot set up the connection to navigatord: \(error)")
        }
    }

    private enum Waiting {
        case caller(CheckedContinuation<Navigator_V1_Reply, any Error>)
        case snapshot(follower: Int)
        /// The live instances, asked for by the loop itself.
        case instances
    }

    /// How often the loop asks for the live instances (several instances: a session's batches
    /// come from the instance serving it, so the SUB connects to every instance's commands
    /// socket, including instances that start later).
    static let instancesInterval: Duration = .seconds(5)

    /// How long a connection to another instance's requests socket (opened to follow `MOVED`)
    /// stays open unused: thirty request timeouts (a minute at the default two seconds).
    var redirectIdle: Duration { timeout * 30 }

    private struct PendingIntent {
        let frames: [[UInt8]]
        let deadline: ContinuousClock.Instant
        let done: CheckedContinuation<Void, any Error>
    }

    private struct PendingRequest {
        let waiting: Waiting
        let deadline: ContinuousClock.Instant
        var unsent: [UInt8]?
        /// The request, to send again elsewhere on `MOVED`.
        let bytes: [UInt8]
        /// The requests endpoint it went to (nil: the one the connection was made with).
        var via: String? = nil
        /// Instances it was sent on to after a `MOVED` naming them (at most ``maxRedirects``).
        var redirects = 0
        /// The last `MOVED` it got: what the caller gets if it cannot be placed in time.
        var moved: Navigator_V1_Reply? = nil

        var isInstances: Bool { if case .instances = waiting { true } else { false } }
    }

    /// How many times a request follows `MOVED` to the instance it names before the caller
    /// gets the refusal (the owner changed again meanwhile: a hand-over under way).
    static let maxRedirects = 3
    /// How soon a request refused with `MOVED` naming no instance (its session's partition is
    /// changing hands) is sent again, as long as its deadline allows.
    static let movedRetryDelay: Duration = .milliseconds(200)

    func run(_ sockets: Sockets) {
        let clock = ContinuousClock()
        var intents: [PendingIntent] = []
        var requests: [String: PendingRequest] = [:]
        var followers = Followers()
        var closing = false
        var closers: [CheckedContinuation<Void, Never>] = []
        var frames: [ZeroMQ.Message] = []
        var poller = Poller()
        poller.add(sockets.dealer)
        poller.add(sockets.sub)
        poller.add(fileDescriptor: shared.wakeRead)
        poller.add(sockets.subEvents)

        // Several instances with forwarding off (or a hand-over under way): DEALERs to the other
        // instances' requests sockets, opened when a MOVED names an instance, by endpoint; and
        // each instance's requests endpoint, from the instances list.
        // Each with when it was last sent on: one unused for ``redirectIdle`` is closed (instances
        // come and go over weeks; each dealer left open would reconnect to its endpoint for ever).
        var redirectDealers: [String: (socket: Socket, used: ContinuousClock.Instant)] = [:]
        var nextRedirectSweep: ContinuousClock.Instant? = nil
        var instanceRequests: [String: String] = [:]
        // Requests waiting for the instances list to name their owner's endpoint, and requests
        // to send again at a time (MOVED naming no instance).
        var awaitingOwner: [(id: String, owner: String)] = []
        var resends: [(id: String, at: ContinuousClock.Instant)] = []
        // When to ask for the instances list again for requests waiting on an owner it lists
        // without endpoints yet (an instance advertises them once it has bound its sockets).
        var ownerListAgainAt: ContinuousClock.Instant? = nil

        func dealer(_ via: String?) -> Socket? {
            guard let via else { return sockets.dealer }
            if nextRedirectSweep == nil { nextRedirectSweep = clock.now + redirectIdle }
            if let dealer = redirectDealers[via]?.socket {
                redirectDealers[via]?.used = clock.now
                return dealer
            }
            do {
                let dealer = try Socket(sockets.context, type: .dealer)
                try dealer.set(.immediate, true)
                try dealer.secure(with: endpoints.curve)
                try dealer.connect(via)
                redirectDealers[via] = (dealer, clock.now)
                poller.add(dealer)
                return dealer
            } catch {
                return nil
            }
        }

        // Closes the dealers to other instances that nothing was sent on for `redirectIdle` and
        // that no request waits on; looks again when the next could be.
        func closeIdleRedirects(_ now: ContinuousClock.Instant) {
            let waitedOn = Set(requests.values.compactMap(\.via))
            for (via, dealer) in redirectDealers where dealer.used + redirectIdle <= now && !waitedOn.contains(via) {
                redirectDealers[via] = nil
                poller.remove(dealer.socket)
                dealer.socket.close()
            }
            nextRedirectSweep = redirectDealers.values.map(\.used).min().map { max($0 + redirectIdle, now + timeout) }
        }

        func trySend(_ pending: inout PendingRequest, _ bytes: [UInt8]) {
            if let dealer = dealer(pending.via), (try? dealer.trySend(multipart: [[UInt8](), bytes])) == true {
                pending.unsent = nil
            } else {
                pending.unsent = bytes
            }
        }

        func sendRequest(_ id: String, _ bytes: [UInt8], _ waiting: Waiting) {
            var pending = PendingRequest(waiting: waiting, deadline: clock.now + timeout, unsent: bytes, bytes: bytes)
            trySend(&pending, bytes)
            requests[id] = pending
        }

        // Takes a follower off the connection: its topics unsubscribed, nothing more kept for it.
        func remove(_ id: Int) -> SessionFollower? {
            guard let follower = followers.remove(id) else { return nil }
            for topic in follower.topics { try? sockets.sub.unsubscribe(topic) }
            return follower
        }

        func snapshot(for follower: SessionFollower) {
            guard case .session(let session) = follower.target else { return }
            var request = Navigator_V1_Request()
            request.requestID = shared.nextRequestID()
            request.snapshot = .with { $0.session = session }
            follower.awaitSnapshot()
            sendRequest(request.requestID, (try? request.serializedBytes()) ?? [], .snapshot(follower: follower.id))
        }

        // Followers whose snapshot is asked for again at a time (the session changing instances).
        var retries: [(follower: Int, at: ContinuousClock.Instant)] = []
        // The commands endpoints the SUB is connected to; the instances list adds the others.
        var connected: Set<String> = [endpoints.commands]
        var nextInstances = clock.now
        // The SUB's connections now, by endpoint (several instances: one to each), and who
        // waits for one. The monitor gives the endpoint with both events; its value is no help
        // (0 for a handshake, the descriptor for a disconnection).
        var subPeers: Set<String> = []
        var connectWaiters: [@Sendable () -> Void] = []
        // Followers whose first snapshot waits for the SUB's first connection, until a time:
        // a snapshot taken before the follower's subscriptions reach the service misses the
        // batches published between the two. At the time it is asked for anyway (a commands
        // endpoint that never answers must not hold the snapshot back for ever).
        var awaitingSub: [(follower: Int, until: ContinuousClock.Instant)] = []

        func askForInstances(now: Bool = false) {
            if !now { nextInstances = clock.now + Self.instancesInterval }
            guard !requests.values.contains(where: { if case .instances = $0.waiting { true } else { false } }) else {
                return
            }
            var request = Navigator_V1_Request()
            request.requestID = shared.nextRequestID()
            request.instances = .init()
            sendRequest(request.requestID, (try? request.serializedBytes()) ?? [], .instances)
        }

        /// A reply of `MOVED` to `id`: sends the request on to the instance it names (once the
        /// instances list gives its endpoint), or again shortly when it names none; true if the
        /// request goes on, false if the caller is to get the refusal.
        func follow(moved reply: Navigator_V1_Reply, of id: String, _ pending: PendingRequest) -> Bool {
            var pending = pending
            pending.moved = reply
            let owner = reply.rejected.owner
            if owner.isEmpty {
                guard clock.now + Self.movedRetryDelay < pending.deadline else { return false }
                requests[id] = pending
                resends.append((id, clock.now + Self.movedRetryDelay))
                return true
            }
            guard pending.redirects < Self.maxRedirects else { return false }
            pending.redirects += 1
            if let endpoint = instanceRequests[owner] {
                pending.via = endpoint
                trySend(&pending, pending.bytes)
            } else {
                awaitingOwner.append((id, owner))
                askForInstances(now: true)
            }
            requests[id] = pending
            return true
        }

        while !closing {
            if clock.now >= nextInstances, !followers.isEmpty { askForInstances() }
            if let at = ownerListAgainAt, clock.now >= at {
                ownerListAgainAt = nil
                askForInstances(now: true)
            }
            // One reading of the clock for both: with two, a retry falling due between them was
            // removed without being made, and its follower waited for a snapshot forever.
            let start = clock.now
            for resend in resends where resend.at <= start {
                if var pending = requests[resend.id] {
                    trySend(&pending, pending.bytes)
                    requests[resend.id] = pending
                }
            }
            resends.removeAll { $0.at <= start }
            let due = retries.filter { $0.at <= start }
            retries.removeAll { $0.at <= start }
            for retry in due { if let follower = followers[retry.follower] { snapshot(for: follower) } }
            if let sweep = nextRedirectSweep, sweep <= start { closeIdleRedirects(start) }
            let unconnected = awaitingSub.filter { $0.until <= start }
            awaitingSub.removeAll { $0.until <= start }
            for waiting in unconnected {
                if let follower = followers[waiting.follower] { snapshot(for: follower) }
            }
            // Wake for the nearest deadline; retry unsent work every few milliseconds.
            let deadlines =
                intents.map(\.deadline) + requests.values.map(\.deadline) + retries.map(\.at) + resends.map(\.at)
                + awaitingSub.map(\.until)
                + (followers.isEmpty ? [] : [nextInstances]) + (ownerListAgainAt.map { [$0] } ?? [])
                + (nextRedirectSweep.map { [$0] } ?? [])
            var wait: Duration? = deadlines.min().map { max(.zero, $0 - clock.now) }
            if !intents.isEmpty || requests.values.contains(where: { $0.unsent != nil }) {
                wait = min(wait ?? .milliseconds(5), .milliseconds(5))
            }
            do {
                try poller.poll(timeout: wait)
            } catch {
                break
            }

            for work in shared.take() {
                switch work {
                case .intent(let session, let bytes, let done):
                    intents.append(
                        PendingIntent(frames: [Array(session.utf8), bytes], deadline: clock.now + timeout, done: done))
                case .request(let id, let bytes, let done):
                    sendRequest(id, bytes, .caller(done))
                case .follow(let follower):
                    followers.add(follower)
                    for topic in follower.topics { try? sockets.sub.subscribe(topic) }
                    if subPeers.isEmpty, case .session = follower.target {
                        awaitingSub.append((follower.id, clock.now + timeout))
                    } else {
                        snapshot(for: follower)
                    }
                case .unfollow(let id):
                    _ = remove(id)
                case .close(let done):
                    closing = true
                    if let done { closers.append(done) }
                case .whenConnected(let waiter):
                    if !subPeers.isEmpty { waiter() } else { connectWaiters.append(waiter) }
                }
            }

            // Hand over what waits for a connection.
            intents.removeAll { pending in
                guard (try? sockets.push.trySend(multipart: pending.frames)) == true else { return false }
                pending.done.resume()
                return true
            }
            for (id, pending) in requests {
                guard let bytes = pending.unsent else { continue }
                trySend(&requests[id]!, bytes)
            }

            func handle(_ reply: Navigator_V1_Reply, _ pending: PendingRequest) {
                switch pending.waiting {
                case .caller(let continuation):
                    continuation.resume(returning: reply)
                case .snapshot(let id):
                    guard let follower = followers[id] else { return }
                    switch follower.receive(snapshot: reply) {
                    case .resync: snapshot(for: follower)
                    case .retryLater: retries.append((id, clock.now + .milliseconds(200)))
                    case .ended: _ = remove(id)  // refused, or a tree not valid: it told its sink why
                    case .ok: break
                    }
                case .instances:
                    // A service without the request (older) answers UNKNOWN_REQUEST: nothing to add.
                    guard case .instances(let list)? = reply.kind else { break }
                    for endpoint in list.instances.flatMap(\.commandEndpoints) where !connected.contains(endpoint) {
                        // A new connection's handshake makes the live mirrors resync (below).
                        if (try? sockets.sub.connect(endpoint)) != nil { connected.insert(endpoint) }
                    }
                    for instance in list.instances {
                        if let endpoint = instance.requestEndpoints.first { instanceRequests[instance.id] = endpoint }
                    }
                    // Requests whose MOVED named an instance: on to it; the list again shortly when
                    // it names the instance without endpoints; or the refusal to the caller when it
                    // does not name it (it left).
                    let waiting = awaitingOwner
                    awaitingOwner.removeAll()
                    for (id, owner) in waiting {
                        guard var pending = requests[id] else { continue }
                        if let endpoint = instanceRequests[owner] {
                            pending.via = endpoint
                            trySend(&pending, pending.bytes)
                            requests[id] = pending
                        } else if list.instances.contains(where: { $0.id == owner }),
                            clock.now + Self.movedRetryDelay < pending.deadline
                        {
                            // Listed without its endpoints: it has just started. Ask again shortly.
                            awaitingOwner.append((id, owner))
                            ownerListAgainAt = clock.now + Self.movedRetryDelay
                        } else if let moved = pending.moved {
                            requests[id] = nil
                            handle(moved, pending)
                        }
                    }
                }
            }

            // Replies, from the connection's instance and from those a MOVED sent requests on to.
            for dealer in [sockets.dealer] + redirectDealers.values.map(\.socket) {
                while let count = try? dealer.receiveMultipart(into: &frames, wait: false) {
                    guard let reply = try? Navigator_V1_Reply(serializedBytes: frames[count - 1].bytes) else {
                        continue
                    }
                    guard let pending = requests.removeValue(forKey: reply.requestID) else { continue }
                    if case .rejected(let rejected)? = reply.kind, rejected.code == .moved,
                        !pending.isInstances, follow(moved: reply, of: reply.requestID, pending)
                    {
                        continue
                    }
                    handle(reply, pending)
                }
            }

            // Connections of the SUB: after new ones, live mirrors take a new snapshot (the first
            // connection included: batches published before it were not received), those asking
            // for one ask again once it comes, and those waiting for a first connection ask now.
            // Every event waiting is read first: two connections made together are one resync.
            var madeConnection = false
            while let count = try? sockets.subEvents.receiveMultipart(into: &frames, wait: false) {
                guard count == 2, frames[0].count == 6 else { continue }
                let event = frames[0].withUnsafeBytes { UInt32($0.loadUnaligned(fromByteOffset: 0, as: UInt16.self)) }
                let peer = frames[1].string
                if MonitorEvents(rawValue: event).contains(.disconnected) { subPeers.remove(peer) }
                guard MonitorEvents(rawValue: event).contains(.handshakeSucceeded) else { continue }
                subPeers.insert(peer)
                madeConnection = true
            }
            if madeConnection {
                for waiter in connectWaiters { waiter() }
                connectWaiters.removeAll()
                for follower in followers.all where follower.reconnected() == .resync { snapshot(for: follower) }
                let waiting = awaitingSub
                awaitingSub.removeAll()
                for entry in waiting { if let follower = followers[entry.follower] { snapshot(for: follower) } }
            }

            // Published messages.
            while let count = try? sockets.sub.receiveMultipart(into: &frames, wait: false) {
                guard count == 3, let (kind, session) = Topic.parse(frames[0].string),
                    let header = try? frames[1].withUnsafeBytes({ (bytes) throws(WireError) in
                        try FrameHeader(decoding: bytes)
                    })
                else { continue }
                let payload = frames[2].bytes
                followers.each(wanting: kind, session) { follower in
                    if follower.receive(kind, header: header, payload: payload) == .resync { snapshot(for: follower) }
                }
            }

            // Deadlines.
            let now = clock.now
            intents.removeAll { pending in
                guard pending.deadline <= now else { return false }
                pending.done.resume(
                    throwing: ClientError(
                        .timeout,
                        "could not hand the intent to navigatord at \(endpoints.intents) within \(timeout): no connection (\(endpoints.timeoutHint))"
                    ))
                return true
            }
            for (id, pending) in requests where pending.deadline <= now {
                requests[id] = nil
                // Sent on after a MOVED and not answered in time: the caller gets the refusal.
                if let moved = pending.moved, !pending.isInstances {
                    handle(moved, pending)
                    continue
                }
                let error = ClientError(
                    .timeout,
                    "no reply from navigatord at \(endpoints.requests) within \(timeout) (\(endpoints.timeoutHint))")
                switch pending.waiting {
                case .caller(let continuation): continuation.resume(throwing: error)
                case .snapshot(let id):
                    // A follow the service has answered before asks again (a session changing
                    // instances may cost a timeout or two); one never answered ends with the error.
                    if let follower = followers[id], follower.snapshotUnanswered(error) {
                        retries.append((id, clock.now + .milliseconds(200)))
                    } else {
                        remove(id)?.fail(error)
                    }
                case .instances: break  // asked again later
                }
            }
        }

        shared.shutDown()
        let closed = Shared.closedError
        for pending in intents { pending.done.resume(throwing: closed) }
        for pending in requests.values {
            switch pending.waiting {
            case .caller(let continuation): continuation.resume(throwing: closed)
            case .snapshot, .instances: break
            }
        }
        for follower in followers.all { follower.finish() }
        for waiter in connectWaiters { waiter() }
        sockets.push.close()
        sockets.dealer.close()
        for dealer in redirectDealers.values { dealer.socket.close() }
        sockets.sub.close()
        sockets.subEvents.close()
        for done in closers { done.resume() }
    }
}
