import Foundation
import NIOCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import Synchronization

/// One open stream: its queue, and leaving its session when it ends.
final class StreamSubscription: Sendable {
    private let hub: StreamHub
    private let streamed: StreamedSession
    private let id: Int
    let queue: StreamQueue
    /// Who opened it (WebSocket requests are asked as this caller).
    let caller: Caller
    private let left = Atomic<Bool>(false)
    /// The session streamed.
    var session: String { streamed.session }

    init(hub: StreamHub, streamed: StreamedSession, id: Int, queue: StreamQueue, caller: Caller) {
        self.hub = hub
        self.streamed = streamed
        self.id = id
        self.queue = queue
        self.caller = caller
    }

    /// Secure mode: at `expiry` the stream gets its last event, `closed`, saying the token expired.
    func expire(at expiry: Date?, on loop: any EventLoop) -> Scheduled<Void>? {
        guard let expiry else { return nil }
        let queue = self.queue
        return loop.scheduleTask(in: .milliseconds(Self.milliseconds(until: expiry))) {
            _ = queue.push(HTTPAPI.expiredFrame)
        }
    }

    /// Milliseconds from now to `date`, within 0 and twice a token's longest lifetime (the
    /// claims were checked already; this keeps the arithmetic safe whatever the date).
    static func milliseconds(until date: Date) -> Int64 {
        let milliseconds = date.timeIntervalSinceNow * 1000
        guard milliseconds.isFinite, milliseconds > 0 else { return 0 }
        return Int64(min(milliseconds, AccessToken.maxLifetime * 2000))
    }

    func close() {
        guard !left.exchange(true, ordering: .relaxed) else { return }
        queue.close()
        hub.leave(streamed, id: id)
    }

    deinit { close() }
}
