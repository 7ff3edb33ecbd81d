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
        let shared = Shared()
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
            // Generous: the thread that binds them starts from a task, which a suite running
            // hundreds of tests on two cores has been seen to start more than 10 s late.
            let deadline = ContinuousClock.now + .seconds(60)
            while shared.endpoints.withLock({ $0 }) == nil {
                guard ContinuousClock.now < deadline else { throw TestFailure("the instances never bound") }
                try await Task.sleep(for: .milliseconds(5))
            }
            let connection = try await NavigatorConnection(
                endpoints: shared.endpoints.withLock { $0! }, timeout: .seconds(5))
            do {
                reply = try await connection.request(
                    .intent(wireIntent("m1", [ScreenContext("settings")], session: "m")))
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
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

/// What the test and the instances' thread share.
private final class Shared: Sendable {
    let endpoints = Locked<ServerEndpoints?>(nil)
    let stopped = Locked(false)
}

/// An instance made of bare sockets that refuses a follow's snapshot with `SHUTTING_DOWN` (a
/// peer stopping, in a rolling restart): the follow ends with that refusal, and the connection
/// takes it off at once — its topics unsubscribed while the connection stays open. Kept, it
/// stayed subscribed and kept every batch of its session, waiting for a snapshot nobody would
/// ask for again.
@Suite("NavigatorClient following a session whose snapshot is refused")
struct RefusedSnapshotTests {
    @Test("the follow ends with the refusal, once, and its topics are unsubscribed while the connection is open")
    func refused() async throws {
        let shared = Shared()
        let unsubscribed = Locked(0)
        // The instance's thread: the subscriptions it saw (1 subscribe, 0 unsubscribe) and what
        // it answered.
        async let served = onThread { () throws -> [String] in
            let context = try Context()
            let requests = try Socket(context, type: .router)
            let intents = try Socket(context, type: .pull)
            let commands = try Socket(context, type: .xpub)
            defer { for socket in [requests, intents, commands] { socket.close() } }
            for socket in [requests, intents, commands] {
                try socket.set(.linger, .zero)
                try socket.set(.receiveTimeout, .milliseconds(20))
                try socket.bind("tcp://127.0.0.1:*")
            }
            shared.endpoints.withLock {
                $0 = ServerEndpoints(
                    intents: try! intents.lastEndpoint, requests: try! requests.lastEndpoint,
                    commands: try! commands.lastEndpoint)
            }
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
                var out: [any FrameBytes] = frames.dropLast().map(\.bytes)
                out.append(try reply.serializedBytes() as [UInt8])
                try requests.send(multipart: out)
            }
            return log
        }
        var ended = ""
        var unsubscribedOpen = 0
        do {
            let deadline = ContinuousClock.now + .seconds(60)  // the thread may start late (above)
            while shared.endpoints.withLock({ $0 }) == nil {
                guard ContinuousClock.now < deadline else { throw TestFailure("the instance never bound") }
                try await Task.sleep(for: .milliseconds(5))
            }
            let connection = try await NavigatorConnection(
                endpoints: shared.endpoints.withLock { $0! }, timeout: .seconds(5))
            do {
                // As an instance follows a session through another (RemoteFollows): no stream
                // whose end would unfollow it, only onEnd.
                let ends = Locked<[String]>([])
                _ = connection.follow(
                    .session("q"), audit: false, onEvent: { _ in },
                    onEnd: { error in ends.withLock { $0.append(error.map { "\($0)" } ?? "no error") } })
                let wait = ContinuousClock.now + .seconds(10)
                while ends.withLock({ $0.isEmpty }), ContinuousClock.now < wait {
                    try await Task.sleep(for: .milliseconds(10))
                }
                ended = ends.withLock { $0.joined(separator: " | ") }
                // Off the connection while it is open: the instance sees the topics go.
                while unsubscribed.withLock({ $0 }) < 2, ContinuousClock.now < wait + .seconds(10) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                unsubscribedOpen = unsubscribed.withLock { $0 }
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
        } catch {
            shared.stopped.withLock { $0 = true }
            _ = try? await served
            throw error
        }
        shared.stopped.withLock { $0 = true }
        let log = try await served
        #expect(ended.contains("navigatord is stopping") && !ended.contains(" | "), "\(ended)")
        // A session's follow without audit records subscribes to its batches and its rejections.
        #expect(unsubscribedOpen >= 2, "\(log)")
        #expect(log.filter { $0 == "snapshot: SHUTTING_DOWN" }.count == 1, "\(log)")
    }
}
