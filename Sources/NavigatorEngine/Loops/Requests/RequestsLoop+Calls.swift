import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import ZeroMQ

// Calls made in process (the engine's NavigatorPort), read from the requests thread's calls socket.
extension RequestsLoop {
    /// A call made in process (``CallDesk``): a request, admitted as a client's; or a
    /// fire-and-forget intent, admitted as one from the intents socket and handed to its worker.
    func handleCall(_ frames: [ZeroMQ.Message], _ count: Int, stopping: Bool, _ sockets: Sockets) throws {
        let kind = Internal.kind(of: frames, count: count, at: .calls)
        let id = frames.count > 1 ? frames[1].bytes : []
        guard id.count == 8, kind == .calledRequest || kind == .calledIntent else {
            return Internal.unexpected(count, at: .calls, counters: counters, logger: logger)
        }
        let routingID = try ZeroMQ.Message(copying: CallDesk.routingID(id))
        let client = frames[count - 1].string
        if kind == .calledRequest {
            counters.requests.add()
            return try process(
                routingID: routingID, delimited: false, payload: frames[2], client: security == nil ? nil : client,
                forwarded: false, stopping: stopping, sockets)
        }
        let session = frames[2].string
        func answer(_ code: Navigator_V1_RejectCode?, _ message: String = "") throws {
            var reply = Navigator_V1_Reply()
            if let code {
                counters.refused(code, intent: true)
                reply.rejected = .rejection(code, message)
            }
            try self.reply(reply, to: routingID, delimited: false, sockets)
        }
        if stopping { return try answer(.shuttingDown, "the service is shutting down and takes no new intents") }
        if let problem = SessionID.problem(with: session) { return try answer(.invalidSession, problem) }
        let admission = IntentAdmission(
            workers: workers, maxMessageBytes: maxMessageBytes, security: security,
            forwarding: sockets.cluster == nil ? nil : store.ownership)
        let worker: Int
        switch try admission.route(
            session: session, sessionFrame: frames[2], intent: frames[3], client: client, peers: sockets.peers)
        {
        case .refused(let code, let message): return try answer(code, message)
        case .forwarded:
            counters.forwardsSent.add()
            return try answer(nil)
        case .worker(let index): worker = index
        }
        let push = sockets.workers[worker]
        guard
            try desks[worker].send({
                try Internal.trySendIntents(on: push, [frames[2], frames[3], frames[4]], stride: 3)
            })
        else {
            return try answer(
                .overloaded,
                "the worker of session \(session) has \(handoffHighWaterMark) messages queued (handoffHighWaterMark); nothing was changed: retry later"
            )
        }
        counters.handedOver[worker].add()
        try answer(nil)
    }
}
