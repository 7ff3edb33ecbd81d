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
    /// to its session's worker.
    func handleForwarded(_ frames: [ZeroMQ.Message], _ count: Int, stopping: Bool, _ sockets: Sockets) throws {
        let kind = count >= 2 ? frames[1].withUnsafeBytes { $0.count == 1 ? $0[0] : 0 } : 0
        if kind == ClusterLink.requestKind, count == 6 {
            let routingID = try ZeroMQ.Message(
                copying: ClusterLink.compoundID(peer: frames[0], routingID: frames[2]))
            let delimited = frames[3].withUnsafeBytes { $0.first == 1 }
            return try process(
                routingID: routingID, delimited: delimited, payload: frames[4],
                client: security == nil ? nil : Security.clientName(of: frames[4]), forwarded: true,
                stopping: stopping, sockets)
        }
        if kind == ClusterLink.intentKind, count == 5 {
            let session = String(decoding: frames[2].bytes, as: UTF8.self)
            guard SessionID.problem(with: session) == nil else {
                counters.unexpectedInternal.add()
                return
            }
            let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
            guard try Internal.trySendIntents(on: sockets.workers[worker], [frames[2], frames[3]], stride: 2) else {
                // The worker's queue is full: the producer's instance cannot be held back from here.
                counters.refused(.overloaded, intent: true)
                if sockets.limiter.allow("cluster-overloaded") {
                    logger.warning(
                        "a forwarded intent was dropped: its worker's queue is full (handoffHighWaterMark)",
                        metadata: ["session": "\(LogText(session))"])
                }
                return
            }
            counters.handedOver[worker].add()
            return
        }
        Internal.unexpected(count, at: .requests, counters: counters, logger: logger)
    }
}
