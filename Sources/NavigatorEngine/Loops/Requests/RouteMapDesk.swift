import Locking
import Logging
import NavigatorWire
import SwiftProtobuf
import ZeroMQ

/// Route map checks and impact reports (`routes_check`, `routes_impact`) are made on a thread of
/// their own, one at a time: parsing and validating a candidate, and replaying thousands of
/// intents against two maps, take a while, and the requests thread must keep answering
/// meanwhile. The answer goes back to the requests thread as a worker's reply would, on the
/// replies socket.
final class RouteMapDesk: Sendable {
    private let context: Context
    private let logger: Logger
    /// The thread making an answer, while one is.
    private let running = Locked<DedicatedThread?>(nil)
    private let busy = Locked(false)

    init(context: Context, logger: Logger) {
        self.context = context
        self.logger = logger
    }

    /// Starts `make` on its own thread and sends its reply to `routingID`; false (nothing
    /// started) while another is being made. Called by the requests thread only.
    func start(
        routingID: [UInt8], delimiter: [UInt8], requestID: String, _ make: @escaping @Sendable () -> Navigator_V1_Reply
    ) -> Bool {
        let claimed = busy.withLock { busy in
            guard !busy else { return false }
            busy = true
            return true
        }
        guard claimed else { return false }
        let thread = DedicatedThread(name: "nav-routemaps") { [self] in
            var reply = make()
            busy.withLock { $0 = false }  // the next may start while this one is sent
            let bytes: [UInt8]
            do {
                bytes = try reply.serializedBytes()
            } catch {
                reply = Navigator_V1_Reply()
                reply.requestID = requestID
                reply.rejected = .rejection(.internal, "the answer could not be encoded: \(error)")
                bytes = (try? reply.serializedBytes()) ?? []
            }
            send(bytes, to: routingID, delimiter: delimiter)
        }
        running.withLock { previous in
            previous?.join()  // it has sent its answer or is about to; nothing waits long here
            previous = thread
        }
        return true
    }

    private func send(_ reply: [UInt8], to routingID: [UInt8], delimiter: [UInt8]) {
        do throws(ZeroMQError) {
            let socket = try Socket(context, type: .push)
            defer { socket.close() }
            // The requests thread may have stopped meanwhile: nobody reads it then, and closing
            // with no linger drops it.
            try socket.set(.linger, .zero)
            try socket.connect(Internal.replies)
            try Internal.sendReply(
                on: socket, routingID: try Message(copying: routingID), delimiter: try Message(copying: delimiter),
                reply: reply)
        } catch {
            // Stopping: the client is answered by no one, as every request in flight at the end.
            guard error.code != .terminated else { return }
            logger.error(
                "a route map answer could not be handed to the requests thread; its client gets no answer",
                metadata: ["error": "\(error)"])
        }
    }

    /// Waits for an answer being made (the engine's stop, before the context ends).
    func join() {
        running.withLock { $0 }?.join()
    }
}
