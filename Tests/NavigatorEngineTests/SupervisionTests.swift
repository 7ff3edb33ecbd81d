import Foundation
import GRDB
import Logging
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import ServiceLifecycle
import Testing
import ZeroMQ

@testable import NavigatorEngine

@Suite("Supervision: a part that fails stops navigatord")
struct SupervisionTests {
    @Test(
        "the failed part is named, /readyz turns 503, the state is flushed and run() throws",
        arguments: ["nav-worker-0", "nav-worker-1", "nav-requests", "nav-egress", "nav-flush", "nav-memory"])
    func partFails(_ part: String) async throws {
        let directory = temporaryDirectory("navsup")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TestService.configuration(dataDirectory: directory)
        configuration.flushIntervalMilliseconds = 600_000  // only the final flush writes
        let log = CapturedLog()
        let server = try Engine(configuration: configuration, logger: log.logger)
        let group = ServiceGroup(services: [server], logger: TestService.logger("group"))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        let endpoints = try await Self.started(server)
        try await onThread {
            let client = try Client(endpoints)
            for index in 0..<10 {
                try client.send(wireIntent("i\(index)", [ScreenContext("settings")]), session: "sup\(index)")
            }
            // All ten applied (each session's own worker), before the fault.
            let deadline = ContinuousClock.now + .seconds(60)
            while try client.request(.stats(.init())).stats.sessions < 10 {
                guard ContinuousClock.now < deadline else { throw TestFailure("the intents were not applied") }
            }
        }
        #expect(server.readiness == .ready)
        server.supervisor.inject(into: part)
        // Wake every part: an intent (worker 0 reads it), a request (requests); the
        // workers and the flush thread also wake on their own timers.
        try await onThread {
            let client = try Client(endpoints, sendTimeout: .seconds(1))
            try? client.send(wireIntent("wake", [ScreenContext("home")]), session: "sup0")
            try? client.send(wireIntent("wake", [ScreenContext("home")]), session: "sup1")
            _ = try? client.request(.stats(.init()))
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while server.failure == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(server.failure == "\(part) failed: a fault injected into \(part)")
        guard case .notReady(let reason) = server.readiness else {
            Issue.record("ready after \(part) failed")
            return
        }
        #expect(reason.contains("\(part) failed"))
        let result = await running.result
        guard case .failure(let error) = result else {
            Issue.record("the service group ended without an error")
            return
        }
        let message = String(describing: error)
        #expect(message.contains("navigatord stopped because \(part) failed: a fault injected into \(part)"))
        #expect(log.lines.withLock { $0.contains { $0.contains("a part of navigatord failed") && $0.contains(part) } })
        let rows = try await DatabaseQueue(path: directory.appendingPathComponent("navigator.sqlite").path).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM sessions") ?? 0
        }
        #expect(rows == 10)
    }

    /// Waits until every part has opened: a deadline of minutes, since on a loaded machine the
    /// group's task may wait its turn on the cooperative pool for a long while (60 s ran out once
    /// under load).
    static func started(_ server: Engine) async throws -> BoundEndpoints {
        let deadline = ContinuousClock.now + .seconds(300)
        while !server.partsReady.wasReady {
            guard ContinuousClock.now < deadline else { throw TestFailure("the service did not start") }
            try await Task.sleep(for: .milliseconds(5))
        }
        return server.endpoints
    }
}

@Suite("Messages between navigatord's threads")
struct InternalMessageTests {
    @Test("each inbox knows its shapes; anything else is counted and logged, and the service goes on")
    func unknownShape() async throws {
        try await withService(workers: 1) { server, endpoints in
            let context = server.context
            let stranger = try await onThread { () throws -> Navigator_V1_Reply in
                for (endpoint, frames) in [
                    (Internal.worker(0), [[UInt8]([9]), [1], [2]]), (Internal.egress, [[1], [2]]),
                ] {
                    let push = try ZeroMQ.Socket(context, type: .push)
                    try push.set(.linger, .seconds(5))
                    try push.connect(endpoint)
                    try push.send(multipart: frames)
                    push.close()
                }
                let client = try Client(endpoints)
                let deadline = ContinuousClock.now + .seconds(10)
                while server.counters.unexpectedInternal.load < 2 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the strangers were not counted") }
                }
                return try client.request(.intent(wireIntent("after", [ScreenContext("settings")], session: "x")))
            }
            #expect(server.counters.unexpectedInternal.load == 2)
            #expect(stranger.resolved.batch.seq == 1)
        }
    }
}
