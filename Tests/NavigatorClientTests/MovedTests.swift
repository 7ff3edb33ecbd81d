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
    @Test("a request MOVED to an instance listed without endpoints yet asks for the list again and reaches it")
    func ownerWithoutEndpointsYet() async throws {
        let shared = BareInstances()
        // The instances' thread: what each answered, in order.
        async let served = onThread { () throws -> [String] in
            let context = try Context()
            let one = try Socket(context, type: .router)
            let two = try Socket(context, type: .router)
            let intents = try Socket(context, type: .pull)
            let commands = try Socket(context, type: .xpub)
            defer { for socket in [one, two, intents, commands] { socket.close() } }
            for socket in [one, two, intents, commands] {
                try socket.set(.linger, .zero)
                try socket.set(.receiveTimeout, .milliseconds(20))
                try socket.bind("tcp://127.0.0.1:*")
            }
            let (oneEndpoint, twoEndpoint) = (try one.lastEndpoint, try two.lastEndpoint)
            shared.endpoints.withLock {
                $0 = ServerEndpoints(
                    intents: try! intents.lastEndpoint, requests: oneEndpoint, commands: try! commands.lastEndpoint)
            }
            var log: [String] = []
            var listsAnswered = 0
            while !shared.stopped.withLock({ $0 }) {
                for (name, socket) in [("one", one), ("two", two)] {
                    guard let frames = try? socket.receiveMultipart() else { continue }
                    let request = try Navigator_V1_Request(serializedBytes: frames.last!.bytes)
                    var reply = Navigator_V1_Reply()
                    reply.requestID = request.requestID
                    switch (name, request.kind) {
                    case ("one", .intent?):
                        reply.rejected = .with {
                            $0.code = .moved
                            $0.message = "session m is in a partition instance two serves; this is one"
                            $0.owner = "two"
                        }
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
                    var out: [any FrameBytes] = frames.dropLast().map(\.bytes)
                    out.append(try reply.serializedBytes() as [UInt8])
                    try socket.send(multipart: out)
                }
            }
            return log
        }
        let reply: Navigator_V1_Reply
        do {
            reply = try await shared.withConnection { connection in
                try await connection.request(.intent(wireIntent("m1", [ScreenContext("settings")], session: "m")))
            }
        } catch {
            shared.stopped.withLock { $0 = true }
            _ = try? await served
            throw error
        }
        shared.stopped.withLock { $0 = true }
        let log = try await served
        #expect(reply.resolved.batch.seq == 1, "\(reply)")
        #expect(log == ["one: MOVED", "one: instances 1", "one: instances 2", "one: instances 3", "two: resolved"])
    }
}

/// What a test and the thread of its instances made of bare sockets share.
final class BareInstances: Sendable {
    let endpoints = Locked<ServerEndpoints?>(nil)
    let stopped = Locked(false)

    /// `body` with a connection to them, made once their thread has bound its sockets, and
    /// closed after it however it ends. Generous: that thread starts from a task, which a suite
    /// running hundreds of tests on two cores has been seen to start more than 10 s late.
    func withConnection<T: Sendable>(_ body: (NavigatorConnection) async throws -> T) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(60)
        while endpoints.withLock({ $0 }) == nil {
            guard ContinuousClock.now < deadline else { throw TestFailure("the instances never bound") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let connection = try await NavigatorConnection(endpoints: endpoints.withLock { $0! }, timeout: .seconds(5))
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }
}
