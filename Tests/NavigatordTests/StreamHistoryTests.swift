import Locking
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Testing

@testable import NavigatorHTTP

@Suite("A streamed session's history")
struct StreamHistoryTests {
    static func batch(_ epoch: UInt64, _ seq: UInt64) -> StreamFrame {
        StreamFrame(.batch, position: StreamPosition(epoch: epoch, seq: seq), json: [])
    }

    @Test("resuming: recovered and what was missed while every batch after the position is kept, else nothing")
    func resume() {
        var history = StreamHistory(size: 3, seconds: 120)
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 0)) == nil)  // nothing followed yet
        history.startOver(at: StreamPosition(epoch: 7, seq: 10))
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 10))?.map(\.kind) == [.recovered])
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 9)) == nil)  // seq 10 is not kept
        for seq in 11...14 {
            history.append(Self.batch(7, UInt64(seq)), at: StreamPosition(epoch: 7, seq: UInt64(seq)))
        }
        // Three kept: 12, 13, 14.
        #expect(history.frames.compactMap(\.position?.seq) == [12, 13, 14])
        let resumed = history.resume(from: StreamPosition(epoch: 7, seq: 11))
        #expect(resumed?.map(\.kind) == [.recovered, .batch, .batch, .batch])
        #expect(resumed?.dropFirst().compactMap(\.position?.seq) == [12, 13, 14])
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 10)) == nil)  // 11 is gone
        #expect(history.resume(from: StreamPosition(epoch: 6, seq: 14)) == nil)  // another epoch
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 15)) == nil)  // ahead of it
        history.startOver(at: StreamPosition(epoch: 8, seq: 0))
        #expect(history.frames.isEmpty)
    }
}

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
