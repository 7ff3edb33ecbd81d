import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

/// An instance made of bare sockets that refuses a follow's snapshot with `SHUTTING_DOWN` (a
/// peer stopping, in a rolling restart): the follow ends with that refusal, and the connection
/// takes it off at once — its topics unsubscribed while the connection stays open. Kept, it
/// stayed subscribed and kept every batch of its session, waiting for a snapshot nobody would
/// ask for again.
@Suite("NavigatorClient following a session whose snapshot is refused")
struct RefusedSnapshotTests {
    @Test("the follow ends with the refusal, once, and its topics are unsubscribed while the connection is open")
    func refused() async throws {
        let shared = BareInstances()
        let unsubscribed = Locked(0)
        // As an instance follows a session through another (RemoteFollows): no stream whose
        // end would unfollow it, only onEnd.
        let ends = Locked<[String]>([])
        // The instance's thread: the subscriptions it saw (1 subscribe, 0 unsubscribe) and what
        // it answered.
        let (unsubscribedOpen, log) = try await shared.run(
            serving: { () throws -> [String] in
                let context = try Context()
                let requests = try Socket(context, type: .router)
                let intents = try Socket(context, type: .pull)
                let commands = try Socket(context, type: .xpub)
                defer { for socket in [requests, intents, commands] { socket.close() } }
                try BareInstances.bind([requests, intents, commands])
                try shared.advertise(intents: intents, requests: requests, commands: try commands.lastEndpoint)
                var log: [String] = []
                while !shared.stopped.withLock({ $0 }) {
                    while let frames = try? commands.receiveMultipart(), let first = frames.first?.bytes.first {
                        log.append(first == 1 ? "subscribe" : "unsubscribe")
                        if first == 0 { unsubscribed.withLock { $0 += 1 } }
                    }
                    guard let frames = try? requests.receiveMultipart() else { continue }
                    let request = try Navigator_V1_Request(serializedBytes: frames.last!.bytes)
                    var reply = Navigator_V1_Reply()
                    reply.requestID = request.requestID
                    if case .snapshot? = request.kind {
                        reply.rejected = .with {
                            $0.code = .shuttingDown
                            $0.message = "navigatord is stopping"
                        }
                        log.append("snapshot: SHUTTING_DOWN")
                    } else {
                        log.append("unexpected \(String(describing: request.kind))")
                        continue
                    }
                    try BareInstances.send(reply, answering: frames, on: requests)
                }
                return log
            },
            then: { connection in
                _ = connection.follow(
                    .session("q"), audit: false, onEvent: { _ in },
                    onEnd: { error in ends.withLock { $0.append(error.map { "\($0)" } ?? "no error") } })
                let wait = ContinuousClock.now + .seconds(10)
                while ends.withLock({ $0.isEmpty }), ContinuousClock.now < wait {
                    try await Task.sleep(for: .milliseconds(10))
                }
                // Off the connection while it is open: the instance sees the topics go.
                while unsubscribed.withLock({ $0 }) < 2, ContinuousClock.now < wait + .seconds(10) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                return unsubscribed.withLock { $0 }
            })
        // Read after the close: a follower left on the connection was told its end again then.
        let ended = ends.withLock { $0 }
        #expect(ended.count == 1 && ended[0].contains("navigatord is stopping"), "\(ended)")
        // A session's follow without audit records subscribes to its batches and its rejections.
        #expect(unsubscribedOpen >= 2, "\(log)")
        #expect(log.filter { $0 == "snapshot: SHUTTING_DOWN" }.count == 1, "\(log)")
    }
}
