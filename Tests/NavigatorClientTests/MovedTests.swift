import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

/// Two instances made of bare sockets (as the wire description gives them): "one", where the
/// connection is made, refuses with `MOVED` naming "two", which its instances list names
/// without endpoints at first (an instance advertises them once it has bound its sockets), then
/// with them; "two" serves the request.
@Suite("NavigatorClient following MOVED")
struct MovedTests {
    /// Instance one's refusal of session m: instance two serves it.
    static let movedToTwo = Navigator_V1_Rejected.with {
        $0.code = .moved
        $0.message = "session m is in a partition instance two serves; this is one"
        $0.owner = "two"
    }

    /// Instances one and two (ROUTERs) beside an intents PULL and a commands XPUB, bound, and
    /// advertised with one as the requests endpoint; the caller closes `all`.
    static func instances(_ shared: BareInstances, in context: Context) throws -> (
        one: Socket, two: Socket, all: [Socket]
    ) {
        let one = try Socket(context, type: .router)
        let two = try Socket(context, type: .router)
        let intents = try Socket(context, type: .pull)
        let commands = try Socket(context, type: .xpub)
        let all = [one, two, intents, commands]
        do {
            try BareInstances.bind(all)
            try shared.advertise(intents: intents, requests: one, commands: try commands.lastEndpoint)
        } catch {
            for socket in all { socket.close() }
            throw error
        }
        return (one, two, all)
    }

    /// Answers each request that comes to the named sockets with the reply `reply` makes (its
    /// request id set), until the test stops the instances; `between` runs before each look.
    static func answer(
        _ shared: BareInstances, _ sockets: [(String, Socket)], between: () throws -> Void = {},
        reply: (String, Navigator_V1_Request, inout Navigator_V1_Reply) throws -> Void
    ) throws {
        while !shared.stopped.withLock({ $0 }) {
            try between()
            for (name, socket) in sockets {
                guard let frames = try? socket.receiveMultipart() else { continue }
                let request = try Navigator_V1_Request(serializedBytes: frames.last!.bytes)
                var answer = Navigator_V1_Reply()
                answer.requestID = request.requestID
                try reply(name, request, &answer)
                try BareInstances.send(answer, answering: frames, on: socket)
            }
        }
    }

    @Test("a request MOVED to an instance listed without endpoints yet asks for the list again and reaches it")
    func ownerWithoutEndpointsYet() async throws {
        let shared = BareInstances()
        // The instances' thread: what each answered, in order.
        let (reply, log) = try await shared.run(
            serving: { () throws -> [String] in
                let (one, two, all) = try Self.instances(shared, in: try Context())
                defer { for socket in all { socket.close() } }
                let (oneEndpoint, twoEndpoint) = (try one.lastEndpoint, try two.lastEndpoint)
                var log: [String] = []
                var listsAnswered = 0
                try Self.answer(shared, [("one", one), ("two", two)]) { name, request, reply in
                    switch (name, request.kind) {
                    case ("one", .intent?):
                        reply.rejected = Self.movedToTwo
                        log.append("one: MOVED")
                    case ("one", .instances?):
                        listsAnswered += 1
                        let known = listsAnswered > 2  // twice without endpoints: not bound yet
                        reply.instances = .with { list in
                            list.instances = [
                                .with {
                                    $0.id = "one"
                                    $0.requestEndpoints = [oneEndpoint]
                                    $0.answering = true
                                },
                                .with {
                                    $0.id = "two"
                                    if known { $0.requestEndpoints = [twoEndpoint] }
                                },
                            ]
                        }
                        log.append("one: instances \(listsAnswered)")
                    case ("two", .intent?):
                        reply.resolved = .with { $0.batch = .with { $0.seq = 1 } }
                        log.append("two: resolved")
                    default:
                        log.append("\(name): unexpected \(String(describing: request.kind))")
                    }
                }
                return log
            },
            then: { connection in
                try await connection.request(.intent(wireIntent("m1", [ScreenContext("settings")], session: "m")))
            })
        #expect(reply.resolved.batch.seq == 1, "\(reply)")
        #expect(log == ["one: MOVED", "one: instances 1", "one: instances 2", "one: instances 3", "two: resolved"])
    }

    @Test("a connection opened to follow MOVED is closed once unused for thirty request timeouts")
    func idleRedirectClosed() async throws {
        let shared = BareInstances()
        // What "two" saw of its peers: set by the instances' thread, read by the test.
        let twoEvents = Locked<[String]>([])
        let (seen, _) = try await shared.run(
            serving: { () throws -> [String] in
                let context = try Context()
                let (one, two, all) = try Self.instances(shared, in: context)
                defer { for socket in all { socket.close() } }
                try two.monitor("inproc://moved-two-monitor", events: [.accepted, .disconnected])
                let monitor = try Socket(context, type: .pair)
                defer { monitor.close() }
                try monitor.set(.receiveTimeout, .zero)
                try monitor.connect("inproc://moved-two-monitor")
                let twoEndpoint = try two.lastEndpoint
                try Self.answer(
                    shared, [("one", one), ("two", two)],
                    between: {
                        while let event = try? monitor.receiveMonitorEvent() {
                            twoEvents.withLock { $0.append(event.event.description) }
                        }
                    }
                ) { name, request, reply in
                    switch (name, request.kind) {
                    case ("one", .intent?):
                        reply.rejected = Self.movedToTwo
                    case ("one", .instances?):
                        reply.instances = .with { list in
                            list.instances = [
                                .with {
                                    $0.id = "two"
                                    $0.requestEndpoints = [twoEndpoint]
                                }
                            ]
                        }
                    case ("two", .intent?):
                        reply.resolved = .with { $0.batch = .with { $0.seq = 1 } }
                    default:
                        reply.rejected = .with { $0.code = .invalidRequest }
                    }
                }
                return []
            },
            timeout: .milliseconds(200),
            then: { connection -> [String] in
                let reply = try await connection.request(
                    .intent(wireIntent("m1", [ScreenContext("settings")], session: "m")))
                #expect(reply.resolved.batch.seq == 1, "\(reply)")
                #expect(twoEvents.withLock { $0 }.contains("accepted"), "\(twoEvents.withLock { $0 })")
                // Thirty timeouts of 200 ms: closed after about 6 s; waited for up to a minute.
                let deadline = ContinuousClock.now + .seconds(60)
                while !twoEvents.withLock({ $0.contains("disconnected") }), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                return twoEvents.withLock { $0 }
            })
        #expect(seen == ["accepted", "disconnected"], "what instance two saw of the client: \(seen)")
    }
}
