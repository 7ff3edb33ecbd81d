import Locking
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing

@testable import NavigatorClient

@Suite("Clone pattern")
struct FollowerTests {
    func reply(seq: UInt64, tree: ScreenTree, epoch: UInt64 = 7) -> Navigator_V1_Reply {
        .with {
            $0.snapshot = .with {
                $0.session = "g"
                $0.seq = seq
                $0.epoch = epoch
                $0.tree = .init(tree)
            }
        }
    }

    func batch(_ seq: UInt64, _ commands: [Command], epoch: UInt64 = 7) throws -> (FrameHeader, [UInt8]) {
        let batch = Navigator_V1_CommandBatch(
            session: "g", seq: seq, intentID: "i\(seq)", animated: true, commands: commands, treeVersion: 0,
            summary: "",
            cause: .intent)
        return (
            FrameHeader(kind: .batch, seq: seq, sentAt: 0, publishedAt: 0, epoch: epoch), try batch.serializedBytes()
        )
    }

    @Test("buffered batches apply after the snapshot, stale ones drop, a gap asks for a resync")
    func gap() async throws {
        let (stream, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
        let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
        follower.awaitSnapshot()
        let start = RouteMap.demo.initialTree()
        // Arrives before the snapshot: kept; seq 2 is in the snapshot already, seq 3 is new.
        let (h2, b2) = try batch(2, [.selectTab("chats")])
        let (h3, b3) = try batch(3, [.selectTab("search")])
        #expect(follower.receive(.batch, header: h2, payload: b2) == .ok)
        #expect(follower.receive(.batch, header: h3, payload: b3) == .ok)
        #expect(follower.receive(snapshot: reply(seq: 2, tree: try start.applying([.selectTab("chats")]))) == .ok)
        // seq 4 is lost; 5 reveals the gap.
        let (h5, b5) = try batch(5, [.selectTab("home")])
        #expect(follower.receive(.batch, header: h5, payload: b5) == .resync)
        follower.awaitSnapshot()
        #expect(follower.receive(snapshot: reply(seq: 5, tree: start)) == .ok)
        continuation.finish()

        var seen: [String] = []
        for try await event in stream {
            switch event {
            case .snapshot(_, let position, _): seen.append("snapshot \(position.seq)")
            case .batch(_, let header, let tree): seen.append("batch \(header.seq) -> \(tree.selectedTab ?? "")")
            case .gap(let expected, let received): seen.append("gap \(expected) got \(received)")
            default: seen.append("other")
            }
        }
        #expect(seen == ["snapshot 2", "batch 3 -> search", "gap 4 got 5", "snapshot 5"])
    }

    @Test(
        "a connection's followers are found by session: a message reaches its session's followers and everything's only"
    )
    func followersBySession() {
        let sink = FollowSink(event: { _ in }, end: { _ in })
        var followers = Followers()
        let targets: [FollowTarget] = [.session("a"), .rejections("a"), .everything, .session("b"), .session("a")]
        for (id, target) in targets.enumerated() {
            followers.add(SessionFollower(id: id, target: target, sink: sink))
        }
        func wanting(_ kind: FrameHeader.Kind, _ session: String) -> [Int] {
            var ids: [Int] = []
            followers.each(wanting: kind, session) { ids.append($0.id) }
            return ids.sorted()
        }
        #expect(wanting(.batch, "a") == [0, 2, 4])
        #expect(wanting(.rejection, "a") == [0, 1, 2, 4])
        #expect(wanting(.batch, "b") == [2, 3])
        #expect(wanting(.audit, "c") == [2])
        #expect(wanting(.audit, "a") == [0, 2, 4])
        #expect(followers.indexed == 5)
        #expect(followers.remove(0)?.id == 0)
        #expect(followers.remove(0) == nil)
        #expect(followers.remove(2)?.id == 2)
        #expect(wanting(.batch, "a") == [4])
        #expect(followers.remove(3)?.id == 3)
        #expect(wanting(.batch, "b") == [])
        #expect(followers.all.map(\.id).sorted() == [1, 4])
        #expect(followers.indexed == 2)
        #expect(followers[4]?.target == .session("a"))
    }

    @Test(
        "a snapshot refused (not MOVED or UNAVAILABLE) or with a tree not valid ends the follow, once, and says so to the connection (which takes it off: RefusedSnapshotTests)"
    )
    func refusedSnapshot() throws {
        final class Ends: Sendable {
            let errors = Locked<[String]>([])
        }
        var refused = Navigator_V1_Reply()
        refused.rejected = .with {
            $0.code = .shuttingDown
            $0.message = "navigatord is stopping"
        }
        var broken = reply(seq: 1, tree: RouteMap.demo.initialTree())
        broken.snapshot.tree.root = .init()  // no root: not a valid tree
        for answer in [refused, broken] {
            let ends = Ends()
            let follower = SessionFollower(
                id: 1, target: .session("g"),
                sink: FollowSink(
                    event: { _ in },
                    end: { error in ends.errors.withLock { $0.append("\(error.map { "\($0)" } ?? "none")") } }))
            follower.awaitSnapshot()
            #expect(follower.receive(snapshot: answer) == .ended)
            // Closing the connection later tells nothing more.
            follower.finish()
            follower.fail(ClientError(.timeout, "late"))
            let told = ends.errors.withLock { $0 }
            #expect(told.count == 1, "\(told)")
        }
        // MOVED and UNAVAILABLE are asked again, as before.
        var moved = Navigator_V1_Reply()
        moved.rejected = .with { $0.code = .moved }
        let (_, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
        let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
        #expect(follower.receive(snapshot: moved) == .retryLater)
    }

    @Test(
        "while a snapshot is awaited, the newest batches are kept up to a limit: those the snapshot has are not needed, and a gap before the rest asks again"
    )
    func bufferLimit() async throws {
        let limit = SessionFollower.maxBuffered
        var sequences: [[String]] = []
        for snapshotSeq in [UInt64(10), 0] {
            let (stream, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
            let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
            follower.awaitSnapshot()
            for seq in 1...UInt64(limit + 5) {
                let (header, bytes) = try batch(seq, [.selectTab(seq % 2 == 0 ? "chats" : "search")])
                #expect(follower.receive(.batch, header: header, payload: bytes) == .ok)
            }
            // Kept: 6 ... limit + 5. A snapshot at 10 has 6 ... 10; one at 0 misses 1 ... 5.
            let tree = try RouteMap.demo.initialTree().applying(snapshotSeq == 0 ? [] : [.selectTab("chats")])
            let verdict = follower.receive(snapshot: reply(seq: snapshotSeq, tree: tree))
            #expect(verdict == (snapshotSeq == 0 ? .resync : .ok))
            continuation.finish()
            var seen: [String] = []
            for try await event in stream {
                switch event {
                case .batch(_, let header, _):
                    if seen.last?.hasPrefix("batch") != true { seen.append("batch \(header.seq)") }
                case .snapshot(_, let position, _): seen.append("snapshot \(position.seq)")
                case .gap(let expected, let received): seen.append("gap \(expected) got \(received)")
                default: seen.append("other")
                }
            }
            sequences.append(seen)
        }
        #expect(sequences[0] == ["snapshot 10", "batch 11"])  // then every one up to limit + 5
        #expect(sequences[1] == ["snapshot 0", "gap 1 got 6"])
    }

    @Test(
        "a snapshot asked for while the commands socket made a connection is asked for again, unseen by the sink, the batches kept meanwhile kept"
    )
    func connectedWhileAsking() async throws {
        let (stream, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
        let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
        follower.awaitSnapshot()
        // The connection comes while the request is out: nothing to do until it is answered.
        #expect(follower.reconnected() == .ok)
        let (h1, b1) = try batch(1, [.selectTab("chats")])
        #expect(follower.receive(.batch, header: h1, payload: b1) == .ok)
        // Perhaps taken before the subscription arrived (it misses batch 1): asked again.
        let start = RouteMap.demo.initialTree()
        #expect(follower.receive(snapshot: reply(seq: 0, tree: start)) == .resync)
        follower.awaitSnapshot()
        // The second answer counts; batch 1, kept, applies after it.
        #expect(follower.receive(snapshot: reply(seq: 0, tree: start)) == .ok)
        // A connection while no request is out (between a MOVED and the request again) asks
        // nothing more.
        follower.awaitSnapshot()
        var moved = Navigator_V1_Reply()
        moved.rejected = .with { $0.code = .moved }
        #expect(follower.receive(snapshot: moved) == .retryLater)
        #expect(follower.reconnected() == .ok)
        follower.awaitSnapshot()
        let chats = try start.applying([.selectTab("chats")])
        #expect(follower.receive(snapshot: reply(seq: 1, tree: chats)) == .ok)
        // A connection made and dropped over and over while it asks: after two answers set
        // aside, the third is taken.
        follower.awaitSnapshot()
        for _ in 0..<SessionFollower.maxSetAside {
            #expect(follower.reconnected() == .ok)
            #expect(follower.receive(snapshot: reply(seq: 1, tree: chats)) == .resync)
            follower.awaitSnapshot()
        }
        #expect(follower.reconnected() == .ok)
        #expect(follower.receive(snapshot: reply(seq: 1, tree: chats)) == .ok)
        continuation.finish()
        var seen: [String] = []
        for try await event in stream {
            switch event {
            case .batch(_, let header, _): seen.append("batch \(header.seq)")
            case .snapshot(_, let position, _): seen.append("snapshot \(position.seq)")
            case .resync: seen.append("resync")
            default: seen.append("other")
            }
        }
        // (The resync is the MOVED's: "the session is changing instances".)
        #expect(seen == ["snapshot 0", "batch 1", "resync", "snapshot 1", "snapshot 1"])
    }

    @Test("a batch that does not apply to the mirror also resyncs")
    func divergence() throws {
        let (_, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
        let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
        follower.awaitSnapshot()
        #expect(follower.receive(snapshot: reply(seq: 0, tree: RouteMap.demo.initialTree())) == .ok)
        let (h1, b1) = try batch(1, [.popTo(999)])
        #expect(follower.receive(.batch, header: h1, payload: b1) == .resync)
    }

    @Test("a batch of another epoch resyncs, even with a seq the mirror has passed; a reconnect too")
    func epochAndReconnect() async throws {
        let (stream, continuation) = AsyncThrowingStream<SessionEvent, any Error>.makeStream()
        let follower = SessionFollower(id: 1, target: .session("g"), sink: FollowSink(continuation))
        follower.awaitSnapshot()
        let start = RouteMap.demo.initialTree()
        #expect(follower.receive(snapshot: reply(seq: 500, tree: start)) == .ok)
        // The service crashed and came back at seq 0 in a new epoch: seq 1 is not "old".
        let (h1, b1) = try batch(1, [.selectTab("chats")], epoch: 8)
        #expect(follower.receive(.batch, header: h1, payload: b1) == .resync)
        #expect(
            follower.receive(snapshot: reply(seq: 1, tree: try start.applying([.selectTab("chats")]), epoch: 8)) == .ok)
        #expect(follower.reconnected() == .resync)
        #expect(
            follower.receive(snapshot: reply(seq: 1, tree: try start.applying([.selectTab("chats")]), epoch: 8)) == .ok)
        continuation.finish()
        var seen: [String] = []
        for try await event in stream {
            switch event {
            case .snapshot(_, let position, _): seen.append("snapshot \(position)")
            case .resync(let reason): seen.append(reason)
            default: seen.append("other")
            }
        }
        #expect(
            seen == [
                "snapshot 7:500", "batch of epoch 8; the mirror is of epoch 7", "snapshot 8:1",
                "reconnected to the commands socket", "snapshot 8:1",
            ])
    }
}
