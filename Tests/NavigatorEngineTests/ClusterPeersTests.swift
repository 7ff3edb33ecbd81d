import NavigatorTestSupport
import Testing
import ZeroMQ

@testable import NavigatorEngine

@Suite("Cluster peers")
struct ClusterPeersTests {
    /// Two peers listening, as instances' cluster endpoints do, and a thread's `ClusterPeers`,
    /// on a thread of their own; everything closed after `body`, even when it fails.
    static func withTwoPeers(
        _ body: @escaping @Sendable (ClusterPeers, [String], [Socket]) throws -> Void
    ) async throws {
        try await onThread {
            let context = try Context()
            defer { context.shutdown() }
            let routers = try (0..<2).map { _ -> Socket in
                let router = try Socket(context, type: .router)
                try router.set(.linger, .zero)
                try router.bind("tcp://127.0.0.1:*")
                return router
            }
            defer { for router in routers { router.close() } }
            let endpoints = try routers.map { try $0.lastEndpoint }
            let peers = ClusterPeers(context: context, keys: nil)
            defer { for peer in peers.sockets { peer.socket.close() } }
            try body(peers, endpoints, routers)
        }
    }

    @Test(
        "a thread's connections to peers that no longer own partitions are closed, at most once per interval; live ones stay"
    )
    func pruning() async throws {
        try await Self.withTwoPeers { peers, endpoints, _ in
            let first = try peers.socket(to: endpoints[0])
            _ = try peers.socket(to: endpoints[1])
            #expect(try peers.socket(to: endpoints[0]) === first, "a second DEALER to the same peer")
            #expect(peers.sockets.count == 2)
            peers.added = false
            let second: Int64 = 1_000_000_000
            // Both still own partitions: nothing closes.
            #expect(!peers.prune(keeping: Set(endpoints), now: 10 * second))
            // The second left; within the interval it is not looked at again…
            #expect(!peers.prune(keeping: [endpoints[0]], now: 12 * second))
            #expect(peers.sockets.count == 2)
            // …after it, its DEALER closes and the owner is told to poll again.
            #expect(peers.prune(keeping: [endpoints[0]], now: 15 * second))
            #expect(peers.sockets.map(\.endpoint) == [endpoints[0]])
            #expect(peers.added)
            // A peer that comes back gets a new DEALER when a message is for it.
            _ = try peers.socket(to: endpoints[1])
            #expect(peers.sockets.count == 2)
        }
    }

    @Test(
        "a thread opens a connection to each live peer before any message is for it, at most once per interval, and its first message goes out at once"
    )
    func opening() async throws {
        try await Self.withTwoPeers { peers, endpoints, routers in
            let second: Int64 = 1_000_000_000
            #expect(try peers.open([endpoints[0]], now: 10 * second))
            #expect(peers.sockets.map(\.endpoint) == [endpoints[0]])
            #expect(peers.added)
            peers.added = false
            // Within the interval a new peer is not looked for; after it, it is, once.
            #expect(try !peers.open(Set(endpoints), now: 10 * second + second / 2))
            #expect(try peers.open(Set(endpoints), now: 11 * second))
            #expect(Set(peers.sockets.map(\.endpoint)) == Set(endpoints))
            #expect(try !peers.open(Set(endpoints), now: 12 * second), "a second DEALER to a peer that has one")
            #expect(peers.sockets.count == 2)
            // Connected without a message (ZMQ_IMMEDIATE: writable only once it is): the first
            // message for the peer goes out at once and arrives.
            let dealer = try #require(peers.sockets.first { $0.endpoint == endpoints[1] }?.socket)
            try waitUntil("the DEALER opened ahead connected to its peer") {
                var poller = Poller()
                poller.add(dealer, for: .writable)
                return try poller.poll(timeout: .milliseconds(50)) > 0
            }
            #expect(try dealer.trySend(Array("hello".utf8)))
            try routers[1].set(.receiveTimeout, .seconds(10))
            let received = try routers[1].receiveMultipart()
            #expect(received.last?.bytes == Array("hello".utf8))
            #expect(try peers.socket(to: endpoints[1]) === dealer)
        }
    }
}
