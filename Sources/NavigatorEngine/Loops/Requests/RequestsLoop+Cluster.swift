import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import ZeroMQ

// Several instances: what another instance forwarded here.
extension RequestsLoop {
    /// A message another instance forwarded here (``ClusterLink``): a request, handled as if
    /// its client had sent it here (never forwarded again), or a fire-and-forget intent, handed
    /// to its session's worker — or, when that worker's queue is full or the client may not
    /// publish there, refused with a rejection its producer reads on `r/<session>/`.
    ///
    /// Secure mode: only a peer instance (the shared server key, ``Security/peerName``) may
    /// forward, and the client is the one its last frame names, authorized here as if it had
    /// connected here; anything else on the cluster endpoint is dropped, logged and counted.
    func handleForwarded(_ frames: [ZeroMQ.Message], _ count: Int, stopping: Bool, _ sockets: Sockets) throws {
        let kind = count >= 2 ? frames[1].withUnsafeBytes { $0.count == 1 ? $0[0] : 0 } : 0
        // The message's last frame: past `clusterMaxFrames`, the frames were received into one
        // spare slot, and the last of them is the one left there (`frames` has no more slots).
        let last = frames[min(count, Self.clusterMaxFrames + 1) - 1]
        if security != nil, count >= 2, Security.clientName(of: last) != Security.peerName {
            counters.forwardsRefused.add()
            if sockets.limiter.allow("cluster-stranger") {
                logger.warning(
                    "a message on the cluster endpoint from a client, not a peer instance, was dropped; only instances holding the server key forward",
                    metadata: ["client": "\(LogText(Security.clientName(of: last) ?? "?"))"])
            }
            return
        }
        // The client the sending instance names: its User-Id there (secure mode), else none.
        let client: String? = security == nil ? nil : last.string.nilIfEmpty
        if kind == ClusterLink.requestKind, count == 6 {
            counters.forwardsReceived.add()
            let routingID = try ZeroMQ.Message(
                copying: ClusterLink.compoundID(peer: frames[0], routingID: frames[2]))
            let delimited = frames[3].withUnsafeBytes { $0.first == 1 }
            return try process(
                routingID: routingID, delimited: delimited, payload: frames[4], client: client, forwarded: true,
                stopping: stopping, sockets)
        }
        if kind == ClusterLink.intentKind, count == 5 {
            counters.forwardsReceived.add()
            let session = String(decoding: frames[2].bytes, as: UTF8.self)
            guard SessionID.problem(with: session) == nil else {
                counters.unexpectedInternal.add()
                return
            }
            if let security, let refusal = security.refusal(of: .publish(session: session), by: client) {
                // The sending instance allowed it: its access file differs from this one's for now.
                return try refuseForwarded(frames[3], session: session, .forbidden, refusal, sockets)
            }
            let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
            let push = sockets.workers[worker]
            let intent = security == nil ? [frames[2], frames[3]] : [frames[2], frames[3], frames[4]]
            let handed = try desks[worker].send({
                try Internal.trySendIntents(on: push, intent, stride: intent.count)
            })
            guard handed else {
                return try refuseForwarded(
                    frames[3], session: session, .overloaded,
                    "the worker of session \(session) on the instance that serves it has \(handoffHighWaterMark) messages queued (handoffHighWaterMark); nothing was changed: send it again later",
                    sockets)
            }
            counters.handedOver[worker].add()
            return
        }
        Internal.unexpected(count, at: .requests, counters: counters, logger: logger)
    }

    /// The most frames a message on the cluster endpoint is read into: a forwarded request's
    /// six (with the routing id); a longer message is counted and dropped.
    static let clusterMaxFrames = 6

    /// Refuses a forwarded fire-and-forget intent: counted, and published as a rejection on
    /// `r/<session>/` (with the intent's id and source), so its producer sees it as it would a
    /// refusal on the instance it sent to.
    private func refuseForwarded(
        _ intent: ZeroMQ.Message, session: String, _ code: Navigator_V1_RejectCode, _ message: String,
        _ sockets: Sockets
    ) throws {
        counters.refused(code, intent: true)
        let decoded = try? Navigator_V1_Intent(serializedBytes: intent.bytes)
        if sockets.limiter.allow("cluster-refused-\(code.rawValue)") {
            logger.warning(
                "a forwarded intent was refused", metadata: ["session": "\(LogText(session))", "reason": "\(message)"])
        }
        guard let publisher = sockets.publisher else { return }
        try publisher.rejection(
            session: session, intentID: decoded?.id ?? "", source: decoded?.source ?? "", code: code, message: message,
            sentAt: decoded?.sentAtUnixNanos ?? 0)
        try publisher.flush()
    }
}

extension String {
    /// Nil for an empty string.
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
