import NavigatorPort
import NavigatorWire
import SwiftProtobuf
import Synchronization

/// The engine as the edges see it: calls go through the same admission as the ZeroMQ sockets'
/// messages (``CallDesk``, ``RequestsLoop``), follows are served in process (``SessionFollows``).
extension Engine: NavigatorPort {
    public func send(_ intent: Navigator_V1_Intent, as caller: Caller) async -> Refusal? {
        let bytes: [UInt8]
        do {
            bytes = try intent.serializedBytes()
        } catch {
            return Refusal(.malformed, "the intent cannot be encoded: \(error)")
        }
        let reply = Self.reply(
            await desk.call(.intent, [Array(intent.session.utf8), bytes], client: caller.name ?? ""))
        if case .rejected(let rejected)? = reply.kind { return Refusal(rejected) }
        return nil
    }

    public func ask(_ request: Navigator_V1_Request, as caller: Caller) async -> Navigator_V1_Reply {
        var request = request
        if request.requestID.isEmpty {
            request.requestID = "call-\(callCounter.wrappingAdd(1, ordering: .relaxed).newValue)"
        }
        let bytes: [UInt8]
        do {
            bytes = try request.serializedBytes()
        } catch {
            var reply = Navigator_V1_Reply()
            reply.requestID = request.requestID
            reply.rejected = .rejection(.malformed, "the request cannot be encoded: \(error)")
            return reply
        }
        var reply = Self.reply(await desk.call(.request, [bytes], client: caller.name ?? ""))
        if reply.requestID.isEmpty { reply.requestID = request.requestID }
        return reply
    }

    public func knows(_ caller: Caller) -> Bool {
        guard let security else { return true }
        return caller.name != Security.peerName && security.client(named: caller.name) != nil
    }

    public var accessRevision: Int { security?.generation ?? 0 }

    public func refusal(toFollow session: String, by caller: Caller) -> Refusal? {
        if let problem = SessionID.problem(with: session) { return Refusal(.invalidSession, problem) }
        if let security, let refusal = security.refusal(of: .follow(session: session), by: caller.name) {
            return Refusal(.forbidden, refusal)
        }
        return nil
    }

    public func follow(
        _ session: String, as caller: Caller, _ receive: @escaping @Sendable (SessionUpdate) -> Void
    ) throws(Refusal) -> any SessionFollow {
        if let refusal = refusal(toFollow: session, by: caller) { throw refusal }
        guard !followsClosed.load(ordering: .acquiring) else {
            throw Refusal(.shuttingDown, "navigatord is stopping and opens no new follow; retry")
        }
        return follows.follow(session, receive)
    }

    public var readiness: Readiness {
        if let failure = supervisor.failure { return .notReady("\(failure.part) failed; navigatord is stopping") }
        if let leaseKeeper, !leaseKeeper.isCurrent {
            return .notReady("the partition leases could not be renewed (the database is not reachable)")
        }
        guard persistence.fileInPlace.load(ordering: .acquiring) else {
            return .notReady("the state file was deleted or replaced and is being written again")
        }
        return isReady ? .ready : .notReady("navigatord is starting or stopping")
    }

    public func statistics() -> Navigator_V1_Stats {
        counters.stats(workers: configuration.workers, store: store, startedAt: startedAt)
    }

    public func metrics() -> [UInt8] {
        let metrics = counters.metrics
        metrics.sessions.record(store.sessionCount)
        metrics.parked.record(store.parkedCount)
        metrics.quarantined.record(quarantinedSessions)
        metrics.subscribedTopics.record(Int(counters.subscribedTopics.load))
        metrics.repliesWaiting.record(Int(counters.repliesWaiting.load))
        if let resident = MemoryGuard.residentBytes() { metrics.residentBytes.record(Int(resident)) }
        metrics.memoryCeilingBytes.record(Int(memory.limit ?? 0))
        if let ownership = store.ownership { metrics.partitionsHeld.record(ownership.all.count) }
        metrics.fencedWrites.record(Int(persistence.fencedWrites.load(ordering: .relaxed)))
        metrics.failedWrites.record(Int(persistence.failedWrites.load(ordering: .relaxed)))
        let packed = store.packedBytes
        metrics.packedSessions.record(store.packedCount)
        metrics.packedMapped.record(packed.mapped)
        metrics.packedLive.record(packed.live)
        for (worker, gauge) in metrics.queueDepths.enumerated() { gauge.record(Int(counters.queueDepth(worker))) }
        return metrics.registry.emitToBuffer()
    }

    private static func reply(_ bytes: [UInt8]) -> Navigator_V1_Reply {
        do {
            return try Navigator_V1_Reply(serializedBytes: bytes)
        } catch {
            var reply = Navigator_V1_Reply()
            reply.rejected = .rejection(.internal, "the engine's reply does not decode: \(error)")
            return reply
        }
    }
}
