import Locking
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Testing

@testable import NavigatorHTTP

/// A streamed session's first snapshot and its follow, in the order a follow of a session served
/// here gives them: the snapshot comes on the thread that asks for the follow, before
/// ``StreamedSession/following(_:)`` records it.
@Suite("A streamed session and its follow")
struct StreamedSessionTests {
    /// A follow that counts what it is asked.
    final class CountingFollow: SessionFollow {
        let asked = Locked(0)
        func resnapshot() { asked.withLock { $0 += 1 } }
        func stop() {}
    }

    static func frames(_ queue: StreamQueue) -> [StreamFrame.Kind] {
        var kinds: [StreamFrame.Kind] = []
        while case .frame(let frame) = queue.poll() { kinds.append(frame.kind) }
        return kinds
    }

    @Test("a connection that joins between the first snapshot and the follow's record is not left waiting")
    func joinBeforeRecorded() {
        let streamed = StreamedSession(session: "s1", settings: StreamSettings())
        let first = StreamQueue(capacity: 8)
        let second = StreamQueue(capacity: 8)
        let tree = RouteMap.demo.initialTree()
        #expect(streamed.join(first, since: nil, as: .anonymous) != nil)
        streamed.receive(.snapshot(StreamPosition(epoch: 3, seq: 5), tree))  // the first starts from it
        #expect(streamed.join(second, since: nil, as: .anonymous) != nil)  // asks for one: no follow yet
        let follow = CountingFollow()
        streamed.following(follow)
        #expect(follow.asked.withLock { $0 } == 1)
        streamed.receive(.current(StreamPosition(epoch: 3, seq: 5), tree))
        #expect(Self.frames(first) == [.snapshot])
        #expect(Self.frames(second) == [.snapshot])
        // Once recorded, a later connection that needs one asks the follow itself.
        #expect(streamed.join(StreamQueue(capacity: 8), since: StreamPosition(epoch: 2, seq: 1), as: .anonymous) != nil)
        #expect(follow.asked.withLock { $0 } == 2)
    }
}
