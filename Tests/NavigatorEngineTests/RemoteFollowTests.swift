import Locking
import Logging
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Testing

@testable import NavigatorEngine

/// A follow through another instance, step by step as its connection's thread and the task that
/// set it up can interleave (``EngineFollow``; no sockets: ``RemoteFollows`` makes these calls).
@Suite("A follow through another instance")
struct RemoteFollowTests {
    /// What a receiver got, one word an update.
    final class Received: Sendable {
        private let words = Locked<[String]>([])
        func append(_ word: String) { words.withLock { $0.append(word) } }
        var all: [String] { words.withLock { $0 } }
    }

    /// A follow, not placed, and what its receiver got.
    static func follow() throws -> (EngineFollow, Received) {
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
        let follows = SessionFollows(store: store, remote: nil, logger: Logger(label: "test"))
        let got = Received()
        let follow = EngineFollow(
            session: "s1",
            receive: { update in
                let word =
                    switch update {
                    case .snapshot(let at, _): "snapshot \(at.epoch):\(at.seq)"
                    case .current(let at, _): "current \(at.epoch):\(at.seq)"
                    case .batch(let at, _): "batch \(at.epoch):\(at.seq)"
                    case .rejection: "rejection"
                    case .ended(let end): "ended \(end.reason)"
                    }
                got.append(word)
            }, follows: follows)
        return (follow, got)
    }

    static let tree = RouteMap.demo.initialTree()

    @Test("a snapshot that comes back before the attempt is recorded as made reaches the receiver, and what follows it")
    func snapshotBeforeRecorded() throws {
        let (follow, got) = try Self.follow()
        let attempt = follow.awaitRemote(placement: follow.beginPlacement())!
        // The connection's thread answers first: the snapshot, then a batch after it.
        follow.deliverRemote(.snapshot(FollowCursorTests.at(4, 2), Self.tree), attempt: attempt)
        follow.deliverRemote(.batch(FollowCursorTests.at(4, 3), .init()), tree: Self.tree, attempt: attempt)
        // Then the task that handed the follower over records the attempt.
        let recorded = follow.follow(remotely: {}, attempt: attempt)
        #expect(recorded)
        follow.deliverRemote(.batch(FollowCursorTests.at(4, 4), .init()), tree: Self.tree, attempt: attempt)
        follow.resnapshot()
        #expect(got.all == ["snapshot 4:2", "batch 4:3", "batch 4:4", "current 4:4"])
    }

    @Test("another attempt's updates are dropped; an attempt superseded, or of a follow stopped, is not recorded")
    func otherAttempts() throws {
        let (follow, got) = try Self.follow()
        let first = follow.awaitRemote(placement: follow.beginPlacement())!
        let second = follow.awaitRemote(placement: follow.beginPlacement())!  // placed again (as after a move)
        follow.deliverRemote(.snapshot(FollowCursorTests.at(4, 2), Self.tree), attempt: first)
        let firstRecorded = follow.follow(remotely: {}, attempt: first)
        #expect(!firstRecorded)
        #expect(got.all.isEmpty)
        follow.deliverRemote(.snapshot(FollowCursorTests.at(5, 1), Self.tree), attempt: second)
        follow.stop()
        let secondRecorded = follow.follow(remotely: {}, attempt: second)
        #expect(!secondRecorded)  // stopped meanwhile: the caller unfollows
        follow.deliverRemote(.batch(FollowCursorTests.at(5, 2), .init()), tree: Self.tree, attempt: second)
        #expect(got.all == ["snapshot 5:1"])
    }

    @Test("a follow that went local does not answer a snapshot ask with the tree it had through another instance")
    func noStaleRemoteTree() throws {
        let (follow, got) = try Self.follow()
        let attempt = follow.awaitRemote(placement: follow.beginPlacement())!
        let elsewhere = try RouteMap.demo.initialTree().applying([.selectTab("search")])
        follow.deliverRemote(.snapshot(FollowCursorTests.at(4, 2), elsewhere), attempt: attempt)
        #expect(follow.follow(remotely: {}, attempt: attempt) == true)
        // The session comes here: placed again, here (as a move does; called directly, not
        // through a lost attempt's timer, which a busy test run can hold back for many seconds).
        let store = SessionStore(shards: 1, epoch: 1) { _ in try! Resolver(map: .demo).initialState() }
        #expect(follow.startLocally(store, placement: follow.beginPlacement()))
        // Then it moves on through another instance again; asked for a snapshot before that
        // attempt's first one, it has none to give (the other instance's tree is of 4:2).
        _ = follow.awaitRemote(placement: follow.beginPlacement())!
        follow.resnapshot()
        follow.stop()
        #expect(got.all == ["snapshot 4:2", "snapshot 1:0"])
    }

    @Test(
        "of two placements under way at once (a partition changing hands meanwhile), only the later one starts the follow"
    )
    func overlappingPlacements() throws {
        let (follow, got) = try Self.follow()
        let store = SessionStore(shards: 1, epoch: 1) { _ in try! Resolver(map: .demo).initialState() }
        let earlier = follow.beginPlacement()
        let later = follow.beginPlacement()
        // Here the earlier one, which found the session served here, comes second to its start.
        let attempt = try #require(follow.awaitRemote(placement: later))
        #expect(!follow.startLocally(store, placement: earlier))
        #expect(follow.awaitRemote(placement: earlier) == nil)
        follow.deliverRemote(.snapshot(FollowCursorTests.at(4, 2), Self.tree), attempt: attempt)
        #expect(follow.follow(remotely: {}, attempt: attempt) == true)
        // And the other way round: a later placement here after an earlier one through a peer.
        let third = follow.beginPlacement()
        let fourth = follow.beginPlacement()
        #expect(follow.startLocally(store, placement: fourth))
        #expect(follow.awaitRemote(placement: third) == nil)
        #expect(got.all == ["snapshot 4:2", "snapshot 1:0"])
        follow.stop()
    }

    @Test("an earlier placement that comes second leaves the later one's registration where it is")
    func earlierPlacementLeavesRegistration() throws {
        let resolver = try Resolver(map: .demo)
        let store = SessionStore(shards: 1, epoch: 1) { _ in resolver.initialState() }
        let follows = SessionFollows(store: store, remote: nil, logger: Logger(label: "test"))
        let got = Received()
        // Placed here (placement 1): registered, started.
        let follow = follows.follow("s1") { update in
            if case .snapshot(let at, _) = update { got.append("snapshot \(at.epoch):\(at.seq)") }
        }
        #expect(follows.counts.local == 1)
        // A later placement begins (whoever moved the follow took its entry out, and the later
        // one registered its own: the one entry stands for it); the earlier placement's start
        // comes second and is refused, leaving that entry.
        let later = follow.beginPlacement()
        #expect(!follow.startLocally(store, placement: later - 1))
        #expect(follows.counts.local == 1)
        #expect(follow.startLocally(store, placement: later))
        // Stopped, it leaves its table.
        follow.stop()
        #expect(follows.counts.local == 0)
        #expect(got.all == ["snapshot 1:0", "snapshot 1:0"])
    }
}
