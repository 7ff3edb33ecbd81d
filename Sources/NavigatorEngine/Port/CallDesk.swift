import Locking
import NavigatorWire
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// Calls made in process (``Engine``'s ``NavigatorPort``): each is a message to the requests thread's calls
/// socket, which admits it with the very code that admits a client's request or intent, under a
/// routing id of its own (``routingID(_:)``); the reply comes back where a client's would be
/// routed, and completes the waiting call here.
///
/// The caller never waits on ZeroMQ: the hand-over is a non-blocking send to an inproc socket
/// under a lock (a full queue refuses the call OVERLOADED), and the answer is a continuation
/// resumed by the requests thread. A call not answered within ``timeout`` (the instance it was
/// forwarded to stopped, say) is answered UNAVAILABLE by the requests thread's sweep, and every
/// waiting call is answered when the service stops.
final class CallDesk: Sendable {
    enum Kind: UInt8 {
        case request = 4
        case intent = 5
    }

    /// How long a call waits for its reply.
    static let timeout: Int64 = 10_000_000_000

    private struct Waiting {
        var continuation: CheckedContinuation<[UInt8], Never>
        var deadline: Int64
    }

    private struct State {
        var waiting: [UInt64: Waiting] = [:]
        /// Why calls are refused now (the service stopped); nil while they are taken.
        var closed: (Navigator_V1_RejectCode, String)?
    }

    private let inbox: SharedSocket
    private let state = Locked(State())
    private let counter = Atomic<UInt64>(0)
    /// Calls waiting, readable without the lock (the sweep's quick check).
    private let waitingCount = Atomic<Int>(0)

    init(context: Context, highWaterMark: Int32) throws {
        inbox = try SharedSocket(context, type: .push)
        _ = try inbox.withSocket { (socket) throws(ZeroMQError) in
            try socket.set(.sendHighWaterMark, highWaterMark)
            try socket.set(.linger, .zero)
            try socket.connect(Internal.calls)
        }
    }

    /// Hands a call over and waits for its reply (a serialized `Reply`): a rejection when it
    /// could not be handed over, or was not answered in time.
    func call(_ kind: Kind, _ frames: [[UInt8]], client: String) async -> [UInt8] {
        let id = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return await withCheckedContinuation { continuation in
            let refused = state.withLock { state -> (Navigator_V1_RejectCode, String)? in
                if let closed = state.closed { return closed }
                state.waiting[id] = Waiting(
                    continuation: continuation, deadline: MonotonicClock.now() + Self.timeout)
                waitingCount.add(1, ordering: .relaxed)
                return nil
            }
            if let (code, message) = refused {
                return continuation.resume(returning: Self.rejection(code, message))
            }
            var sent: Bool?
            do {
                var idBytes = [UInt8](repeating: 0, count: 8)
                for index in 0..<8 { idBytes[index] = UInt8(truncatingIfNeeded: id >> (8 * index)) }
                // Nil once the inbox is closed: the service stops.
                sent = try inbox.withSocket { (socket) throws(ZeroMQError) -> Bool in
                    guard try socket.trySend([kind.rawValue], more: true) else { return false }
                    try socket.send(idBytes, more: true)
                    for frame in frames { try socket.send(frame, more: true) }
                    try socket.send(Array(client.utf8))
                    return true
                }
            } catch {
                sent = nil
            }
            switch sent {
            case true?:
                break
            case false?:
                complete(
                    id,
                    Self.rejection(
                        .overloaded,
                        "navigatord has as many calls waiting as it takes (handoffHighWaterMark); nothing was changed: retry later"
                    ))
            case nil:
                complete(id, Self.rejection(.shuttingDown, "the service is shutting down and takes no new requests"))
            }
        }
    }

    /// Answers call `id` with `reply` (a serialized `Reply`); a call answered already (it timed
    /// out) is ignored.
    func complete(_ id: UInt64, _ reply: [UInt8]) {
        let waiting = state.withLock { state -> Waiting? in
            guard let waiting = state.waiting.removeValue(forKey: id) else { return nil }
            waitingCount.subtract(1, ordering: .relaxed)
            return waiting
        }
        waiting?.continuation.resume(returning: reply)
    }

    /// Answers the calls past their deadline UNAVAILABLE.
    func expire(now: Int64) {
        guard waitingCount.load(ordering: .relaxed) > 0 else { return }
        let overdue = state.withLock { state -> [Waiting] in
            let ids = state.waiting.filter { $0.value.deadline <= now }.map(\.key)
            waitingCount.subtract(ids.count, ordering: .relaxed)
            return ids.compactMap { state.waiting.removeValue(forKey: $0) }
        }
        for waiting in overdue {
            waiting.continuation.resume(
                returning: Self.rejection(
                    .unavailable,
                    "no answer within \(Self.timeout / 1_000_000_000) s (the instance serving the session may have stopped); the change may or may not have been made: retry the same request"
                ))
        }
    }

    /// Answers every waiting call, and every later one, with `code` (the service stopped).
    func close(_ code: Navigator_V1_RejectCode, _ message: String) {
        let waiting = state.withLock { state -> [Waiting] in
            state.closed = (code, message)
            defer { state.waiting = [:] }
            waitingCount.store(0, ordering: .relaxed)
            return Array(state.waiting.values)
        }
        for call in waiting { call.continuation.resume(returning: Self.rejection(code, message)) }
        inbox.close()
    }

    /// The routing id a call has inside the service: `[0][I][id, 8 bytes little-endian]`. No
    /// client's id looks like it (a ROUTER refuses ids set by peers that begin with a zero byte,
    /// and its own ids are 5 bytes), nor like a forwarded request's (``ClusterLink``).
    static func routingID(_ id: [UInt8]) -> [UInt8] { [0, 0x49] + id }

    /// The call a routing id names; nil for a client's.
    static func call(of routingID: [UInt8]) -> UInt64? {
        guard routingID.count == 10, routingID[0] == 0, routingID[1] == 0x49 else { return nil }
        return (0..<8).reduce(UInt64(0)) { $0 | UInt64(routingID[2 + $1]) << (8 * $1) }
    }

    static func call(of routingID: ZeroMQ.Message) -> UInt64? {
        guard routingID.count == 10 else { return nil }
        return call(of: routingID.bytes)
    }

    static func rejection(_ code: Navigator_V1_RejectCode, _ message: String) -> [UInt8] {
        var reply = Navigator_V1_Reply()
        reply.rejected = .rejection(code, message)
        return (try? reply.serializedBytes()) ?? []
    }
}
