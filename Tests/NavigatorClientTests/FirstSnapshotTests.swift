import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

/// A follow's first snapshot waits for the commands socket's first connection: taken before the
/// follow's subscriptions reach the service, it would miss the batches published between the
/// two, with nothing to show it until the session's next batch.
@Suite("NavigatorClient's first snapshot of a follow")
struct FirstSnapshotTests {
    @Test("is asked for once the commands socket is connected, after the subscriptions went out")
    func afterSubscribing() async throws {
        let shared = BareInstances()
        let followed = Locked(false)
        // The instance's thread: its commands socket bound late (a second after the follow, or at
        // once should a snapshot request come first), and the snapshot requests it saw.
        let events = Locked<[String]>([])
        // The commands socket on a path nothing listens on yet (the SUB tries it every 100 ms).
        let directory = temporaryDirectory("first-snapshot")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let commandsEndpoint = "ipc://\(directory.path)/commands"
        let (_, log) = try await shared.run(
            serving: { () throws -> [String] in
                let context = try Context()
                let requests = try Socket(context, type: .router)
                let intents = try Socket(context, type: .pull)
                defer { for socket in [requests, intents] { socket.close() } }
                try BareInstances.bind([requests, intents])
                try shared.advertise(intents: intents, requests: requests, commands: commandsEndpoint)
                var log: [String] = []
                var commands: Socket? = nil
                defer { commands?.close() }
                var bindAt: ContinuousClock.Instant? = nil
                while !shared.stopped.withLock({ $0 }) {
                    if bindAt == nil, followed.withLock({ $0 }) { bindAt = .now + .seconds(1) }
                    if commands == nil, let at = bindAt, ContinuousClock.now >= at {
                        let socket = try Socket(context, type: .xpub)
                        try socket.set(.linger, .zero)
                        try socket.set(.receiveTimeout, .zero)
                        try socket.bind(commandsEndpoint)
                        commands = socket
                    }
                    while let frames = try? commands?.receiveMultipart(), frames.first?.bytes.first == 1 {}
                    guard let frames = try? requests.receiveMultipart() else { continue }
                    let request = try Navigator_V1_Request(serializedBytes: frames.last!.bytes)
                    var reply = Navigator_V1_Reply()
                    reply.requestID = request.requestID
                    switch request.kind {
                    case .snapshot?:
                        log.append(commands == nil ? "snapshot, commands socket not listening" : "snapshot")
                        bindAt = .now  // a snapshot too early: listen at once, the follow then goes on
                        reply.snapshot = .with {
                            $0.session = "q"
                            $0.epoch = 1
                            $0.tree = .init(RouteMap.demo.initialTree())
                        }
                    case .instances?:
                        reply.instances = .init()  // a follow asks who the instances are: none other
                    default:
                        log.append("unexpected \(String(describing: request.kind))")
                        continue
                    }
                    try BareInstances.send(reply, answering: frames, on: requests)
                }
                return log
                // A snapshot held back for want of a connection is asked for after this: far beyond
                // the waits here, so that a slow thread cannot make it look early.
            }, timeout: .seconds(60),
            then: { connection in
                let following = connection.follow(
                    .session("q"), audit: false,
                    onEvent: { event in
                        if case .snapshot = event { events.withLock { $0.append("snapshot") } }
                    }, onEnd: { _ in })
                followed.withLock { $0 = true }
                let wait = ContinuousClock.now + .seconds(30)
                while events.withLock({ $0.isEmpty }), ContinuousClock.now < wait {
                    try await Task.sleep(for: .milliseconds(10))
                }
                connection.unfollow(following)
            })
        #expect(events.withLock { $0 } == ["snapshot"])
        // One snapshot request, made once the commands socket was there to connect to.
        #expect(log == ["snapshot"], "\(log)")
    }

    @Test(
        "with several instances, one connection of the commands socket ending leaves the others counted: a new follow's snapshot is not held back"
    )
    func anotherConnectionEnds() async throws {
        let shared = BareInstances()
        let stage = Locked("")
        let snapshots = Locked<[String]>([])
        // Instance "one" answers; its instances list also names "two", whose commands socket the
        // connection's SUB connects to as well, and which then goes away.
        let (_, log) = try await shared.run(
            serving: { () throws -> [String] in
                let context = try Context()
                let requests = try Socket(context, type: .router)
                let intents = try Socket(context, type: .pull)
                let commands = try Socket(context, type: .xpub)
                var other: Socket? = try Socket(context, type: .xpub)
                defer {
                    for socket in [requests, intents, commands] { socket.close() }
                    other?.close()
                }
                try BareInstances.bind([requests, intents, commands, other!])
                let otherEndpoint = try other!.lastEndpoint
                try shared.advertise(intents: intents, requests: requests, commands: try commands.lastEndpoint)
                var log: [String] = []
                while !shared.stopped.withLock({ $0 }) {
                    while (try? commands.receiveMultipart()) != nil {}
                    if let socket = other, (try? socket.receiveMultipart()) != nil, stage.withLock({ $0 }) == "" {
                        // The SUB connected to "two" (its subscriptions came): "two" goes away.
                        socket.close()
                        other = nil
                        stage.withLock { $0 = "two gone" }
                        log.append("two gone")
                    }
                    guard let frames = try? requests.receiveMultipart() else { continue }
                    let request = try Navigator_V1_Request(serializedBytes: frames.last!.bytes)
                    var reply = Navigator_V1_Reply()
                    reply.requestID = request.requestID
                    switch request.kind {
                    case .snapshot(let snapshot)?:
                        log.append("snapshot \(snapshot.session)")
                        reply.snapshot = .with {
                            $0.session = snapshot.session
                            $0.epoch = 1
                            $0.tree = .init(RouteMap.demo.initialTree())
                        }
                    case .instances?:
                        reply.instances = .with { list in
                            list.instances = [
                                .with {
                                    $0.id = "one"
                                    $0.commandEndpoints = [try! commands.lastEndpoint]
                                },
                                .with {
                                    $0.id = "two"
                                    $0.commandEndpoints = [otherEndpoint]
                                },
                            ]
                        }
                    default:
                        log.append("unexpected \(String(describing: request.kind))")
                        continue
                    }
                    try BareInstances.send(reply, answering: frames, on: requests)
                }
                return log
            },
            // A snapshot held back for want of a connection would be asked for after this: far
            // beyond the waits below.
            timeout: .seconds(120),
            then: { connection in
                func follow(_ session: String) -> Following {
                    connection.follow(
                        .session(session), audit: false,
                        onEvent: { event in
                            if case .snapshot(let session, _, _) = event { snapshots.withLock { $0.append(session) } }
                        }, onEnd: { _ in })
                }
                let first = follow("a")
                let wait = ContinuousClock.now + .seconds(60)
                while stage.withLock({ $0 }) == "" || snapshots.withLock({ $0 }).isEmpty, ContinuousClock.now < wait {
                    try await Task.sleep(for: .milliseconds(10))
                }
                // No sign reaches the test when the connection has seen "two" go; its monitor is
                // quick, and a follow taken before that passes here whatever the code does.
                try await Task.sleep(for: .milliseconds(500))
                let second = follow("b")
                while !snapshots.withLock({ $0.contains("b") }), ContinuousClock.now < wait + .seconds(30) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                connection.unfollow(first)
                connection.unfollow(second)
            })
        // (Follow "a" takes a second snapshot when the SUB connects to "two", as a live mirror
        // does after each new connection.)
        #expect(snapshots.withLock { $0.contains("b") }, "\(log)")
        let gone = log.firstIndex(of: "two gone")
        #expect(gone != nil && gone! < (log.firstIndex(of: "snapshot b") ?? 0), "\(log)")
    }
}
