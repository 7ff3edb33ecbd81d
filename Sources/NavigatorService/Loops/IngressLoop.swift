import Logging
import NavigatorCore
import NavigatorWire
import ZeroMQ

/// Owns the intents PULL: checks each message's frames and session, rejects what is malformed,
/// and hands the rest, without copying, to the session's worker.
struct IngressLoop: SocketLoop {
    let context: Context
    let endpoints: [String]
    let workers: Int
    let maxMessageBytes: Int
    let highWaterMark: Int32
    let counters: ServiceCounters
    /// The epoch of this run's streams (rejection headers carry it).
    let epoch: UInt64
    let bound: BoundEndpoints
    let logger: Logger

    var name: String { "nav-ingress" }

    struct Sockets {
        let pull: Socket
        let control: Socket
        let workers: [Socket]
        let publisher: Publisher
        let limiter: LogLimiter
    }

    /// Intents waiting to go to each worker, handed over in bundles of `[kind]` and then
    /// `[session][Intent]` pairs: one inproc message (and at most one wake-up) per bundle.
    final class Bundles {
        private var pending: [[ZeroMQ.Message]]
        static let limit = 64

        init(workers: Int) { pending = Array(repeating: [], count: workers) }

        /// Adds an intent for `worker`, taking over the frames' contents; sends the bundle when full.
        func add(_ session: ZeroMQ.Message, _ payload: ZeroMQ.Message, for worker: Int, _ sockets: Sockets) throws {
            pending[worker].append(ZeroMQ.Message(moving: session))
            pending[worker].append(ZeroMQ.Message(moving: payload))
            if pending[worker].count >= Self.limit * 2 { try flush(worker, sockets) }
        }

        func flushAll(_ sockets: Sockets) throws {
            for worker in pending.indices { try flush(worker, sockets) }
        }

        private func flush(_ worker: Int, _ sockets: Sockets) throws {
            guard !pending[worker].isEmpty else { return }
            let push = sockets.workers[worker]
            try push.send([Internal.intentKind], more: true)
            for (index, frame) in pending[worker].enumerated() {
                try push.send(frame, more: index < pending[worker].count - 1)
            }
            pending[worker].removeAll(keepingCapacity: true)
        }
    }

    func open() throws -> Sockets {
        let pull = try Socket(context, type: .pull)
        try pull.set(.receiveHighWaterMark, highWaterMark)
        // libzmq drops a peer that sends more than this; anything between maxMessageBytes and it
        // is refused here with a rejection the producer can read.
        try pull.set(.maxMessageSize, Int64(max(maxMessageBytes * 4, 1 << 20)))
        bound.set(intents: try bindAll(pull, endpoints, "intents"))
        let control = try Socket(context, type: .pull)
        try control.bind(Internal.ingressControl)
        let pushes = try (0..<workers).map { index in
            let push = try Socket(context, type: .push)
            try push.set(.sendHighWaterMark, 0)
            try push.connect(Internal.worker(index))
            return push
        }
        return Sockets(
            pull: pull, control: control, workers: pushes,
            publisher: try Publisher(context: context, counters: counters, epoch: epoch),
            limiter: LogLimiter(logger: logger))
    }

    func run(_ sockets: Sockets) {
        var poller = Poller()
        poller.add(sockets.pull)
        poller.add(sockets.control)
        var frames: [Message] = []
        let bundles = Bundles(workers: sockets.workers.count)
        do {
            while true {
                try poller.poll(timeout: nil)
                if poller.events(at: 1).contains(.readable) {
                    _ = try sockets.control.receiveMultipart()
                    // Stop intake: take what is already queued, then tell the workers.
                    while let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2) {
                        try handle(frames, count, sockets, bundles)
                    }
                    try bundles.flushAll(sockets)
                    sockets.pull.close()
                    for worker in sockets.workers { try worker.send(Internal.stop) }
                    try sockets.publisher.stop()
                    logger.debug("ingress stopped")
                    return
                }
                for _ in 0..<1024 {
                    guard let count = try sockets.pull.receiveMultipart(into: &frames, wait: false, maxFrames: 2)
                    else { break }
                    try handle(frames, count, sockets, bundles)
                }
                // Nothing more to read: hand over what waits.
                try bundles.flushAll(sockets)
                try sockets.publisher.flush()
            }
        } catch {
            if (error as? ZeroMQError)?.code == .terminated {
                logger.debug("ingress ended by context shutdown")
            } else {
                logger.error("ingress failed", metadata: ["error": "\(error)"])
            }
        }
    }

    private func handle(_ frames: [Message], _ count: Int, _ sockets: Sockets, _ bundles: Bundles) throws {
        let sessionProblem: String?
        var session = ""
        do {
            session = try frames[0].withUnsafeBytes { (bytes) throws(WireError) in try SessionID.decode(bytes) }
            sessionProblem = nil
        } catch {
            sessionProblem = error.message
        }
        if count != 2 {
            return try reject(
                sessionProblem == nil ? session : "", .badFrames,
                "intent message has \(count) frame\(count == 1 ? "" : "s"); expected 2: [session][Intent]", frames[0],
                sockets)
        }
        if let sessionProblem { return try reject("", .invalidSession, sessionProblem, frames[0], sockets) }
        if frames[1].count > maxMessageBytes {
            return try reject(
                session, .tooLarge, "intent is \(frames[1].count) bytes; expected at most \(maxMessageBytes)",
                frames[0], sockets)
        }
        let worker = SessionStore.shardIndex(of: session, count: sockets.workers.count)
        counters.forwarded[worker].add()
        try bundles.add(frames[0], frames[1], for: worker, sockets)
    }

    private func reject(
        _ session: String, _ code: Navigator_V1_RejectCode, _ message: String, _ frame: Message, _ sockets: Sockets
    ) throws {
        counters.count(code)
        let peer = peerKey(frame, "intents")
        if sockets.limiter.allow(peer) {
            logger.notice(
                "intent rejected at ingress",
                metadata: [
                    "session": "\(LogText(session))", "code": "\(code.label)", "reason": "\(LogText(message))",
                    "peer": "\(LogText(peer))",
                ])
        }
        try sockets.publisher.rejection(
            session: session, intentID: "", source: "", code: code, message: message, sentAt: 0)
    }
}
