import Foundation
import Logging
import NavigatorClient
import NavigatorCore
import NavigatorEngine
import NavigatorTestSupport
import NavigatorWire
import Testing

/// A service on ephemeral ports and a connection to it, both stopped whatever happens.
func withConnection(_ body: @Sendable (NavigatorConnection, Engine) async throws -> Void) async throws {
    let directory = TestService.temporaryDirectory("navcli")
    defer { try? FileManager.default.removeItem(at: directory) }
    let configuration = TestService.configuration(dataDirectory: directory)
    let server = try Engine(configuration: configuration, logger: TestService.logger("client-test"))
    try await server.start()
    let endpoints = server.endpoints
    do {
        let connection = try await NavigatorConnection(
            endpoints: ServerEndpoints(
                intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0]),
            timeout: .seconds(10))
        do {
            try await body(connection, server)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

@Suite("NavigatorClient")
struct ClientTests {
    @Test("a follower's mirror tracks the session through intents and client events")
    func follow() async throws {
        try await withConnection { connection, _ in
            let events = connection.follow(.session("f"))
            var iterator = events.makeAsyncIterator()
            guard case .snapshot(_, let position, _)? = try await iterator.next() else {
                Issue.record("no snapshot first")
                return
            }
            #expect(position.seq == 0)
            let intents: [ScreenContext] = [
                ScreenContext("chat", ["conversationId": "1"]),
                ScreenContext("thread", ["conversationId": "1", "threadId": "4"]),
                ScreenContext("settings"), ScreenContext("mediaViewer", ["mediaId": "m"]),
            ]
            for (index, context) in intents.enumerated() {
                try await connection.send(Intent(id: "f\(index)", session: "f", target: .path([context])))
            }
            var mirror = RouteMap.demo.initialTree()
            var last: UInt64 = 0
            while last < 4 {
                guard case .batch(_, let header, let tree)? = try await iterator.next() else { continue }
                mirror = tree
                last = header.seq
            }
            let applied = try await connection.report(.dismissedTo(nil), session: "f", lastSeq: last)
            #expect(applied.seq == 5)
            while last < 5 {
                guard case .batch(let batch, let header, let tree)? = try await iterator.next() else { continue }
                #expect(batch.cause == .clientEvent)
                mirror = tree
                last = header.seq
            }
            let snapshot = try await connection.snapshot("f")
            #expect(try snapshot.tree.core() == mirror)
            #expect(mirror.top.context.screen == "settings")
        }
    }

    @Test("acknowledged intents and explain through the client")
    func acknowledged() async throws {
        try await withConnection { connection, _ in
            let resolved = try await connection.acknowledged(
                Intent(id: "a", session: "k", target: .url("app://chat/5")))
            #expect(resolved.resolved.outcome == .resolved)
            let explained = try await connection.explain(Intent(id: "b", session: "k", target: .url("app://chat/5")))
            #expect(explained.explanation.outcome == .ignored)
            let rejected = try await connection.acknowledged(
                Intent(id: "c", session: "k", target: .url("app://nowhere")))
            #expect(rejected.rejected.code == .unknownURL)
            #expect(try await connection.stats().sessions == 1)
            #expect(try await connection.routes().source == "embedded demo")
        }
    }

    @Test("an unreachable service is an error within the timeout, not a hang")
    func unreachable() async throws {
        // A port that was just free: nothing listens there.
        let connection = try await Self.unreachableConnection(timeout: .milliseconds(300))
        await #expect {
            _ = try await connection.stats()
        } throws: { error in
            guard let error = error as? ClientError else { return false }
            return error.code == .timeout
                && error.description.contains("no reply from navigatord at tcp://127.0.0.1:9 within")
        }
        await #expect {
            try await connection.send(Intent(id: "x", session: "s", target: .path([ScreenContext("home")])))
        } throws: { error in
            (error as? ClientError)?.description.contains(
                "could not hand the intent to navigatord at tcp://127.0.0.1:9") == true
        }
        var events = connection.follow(.session("s")).makeAsyncIterator()
        await #expect(throws: ClientError.self) { _ = try await events.next() }
        await connection.close()
    }

    @Test(
        "after close every call fails at once with closed, and a second close returns at once", .timeLimit(.minutes(1)))
    func afterClose() async throws {
        let connection = try await Self.unreachableConnection(timeout: .seconds(60))
        // Pending when close comes: they fail with closed, not at their 60 s deadline.
        let pending = Task { try await connection.stats() }
        await connection.close()
        await #expect { _ = try await pending.value } throws: { ($0 as? ClientError)?.code == .closed }
        await #expect {
            try await connection.send(Intent(id: "x", session: "s", target: .path([ScreenContext("home")])))
        } throws: { ($0 as? ClientError)?.code == .closed }
        await #expect { _ = try await connection.snapshot("s") } throws: { ($0 as? ClientError)?.code == .closed }
        var events = connection.follow(.session("s")).makeAsyncIterator()
        await #expect { _ = try await events.next() } throws: { ($0 as? ClientError)?.code == .closed }
        await connection.close()
    }

    @Test("20,000 callers at once with no service: the wake pipe never blocks them, every call ends at its deadline")
    func manyCallers() async throws {
        let connection = try await Self.unreachableConnection(timeout: .milliseconds(500))
        let timedOut = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<20_000 {
                group.addTask {
                    do {
                        try await connection.send(
                            Intent(id: "m\(index)", session: "s", target: .path([ScreenContext("home")])))
                        return false
                    } catch {
                        return (error as? ClientError)?.code == .timeout
                    }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(timedOut == 20_000)
        await connection.close()
    }

    /// A connection to a port nothing listens on (9, discard).
    static func unreachableConnection(timeout: Duration) async throws -> NavigatorConnection {
        try await NavigatorConnection(
            endpoints: ServerEndpoints(
                intents: "tcp://127.0.0.1:9", requests: "tcp://127.0.0.1:9", commands: "tcp://127.0.0.1:9"),
            timeout: timeout)
    }

    @Test("a bad endpoint is refused when connecting")
    func badEndpoint() async {
        await #expect {
            _ = try await NavigatorConnection(endpoints: ServerEndpoints(intents: "bogus://x"))
        } throws: { "\($0)".contains("cannot set up the connection to navigatord") }
    }
}
