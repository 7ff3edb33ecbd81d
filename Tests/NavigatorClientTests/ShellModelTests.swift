import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorEngine
import NavigatorMix
import NavigatorTestSupport
import NavigatorWire
import Testing

/// Collects a follower's events on a task of its own, so the test can wait for them with a deadline.
/// The in-process service of a test, replaced by a new one on a restart.
final class RunningServer: Sendable {
    let server = Locked<Engine?>(nil)

    func start(_ configuration: EngineConfiguration) async throws {
        let server = try Engine(configuration: configuration, logger: TestService.logger("shell-test"))
        try await server.start()
        self.server.withLock { $0 = server }
    }

    func stop() async {
        let server = self.server.withLock { server in
            defer { server = nil }
            return server
        }
        await server?.stop()
    }
}

final class EventBuffer: Sendable {
    let events = Locked<[SessionEvent]>([])
    let failure = Locked<String?>(nil)

    func take() -> [SessionEvent] {
        events.withLock { taken in
            defer { taken.removeAll() }
            return taken
        }
    }
}

@Suite("Client shell")
struct ShellModelTests {
    @Test(
        "after random intents and shell actions, a batch dropped on purpose and stale reports refused, the mirror equals the snapshot"
    )
    func mirrorEqualsSnapshot() async throws {
        try await withConnection { connection, _ in
            try await Self.drive(connection) {}
        }
    }

    @Test("the same, with the service restarted every 15 steps: the shell resyncs and ends equal to the snapshot")
    func acrossRestarts() async throws {
        let directory = TestService.temporaryDirectory("navshell")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TestService.configuration(dataDirectory: directory)
        configuration.intentEndpoints = ["ipc://\(directory.path)/intents.sock"]
        configuration.requestEndpoints = ["ipc://\(directory.path)/requests.sock"]
        configuration.commandEndpoints = ["ipc://\(directory.path)/commands.sock"]
        let running = RunningServer()
        try await running.start(configuration)
        do {
            let connection = try await NavigatorConnection(
                endpoints: ServerEndpoints(
                    intents: configuration.intentEndpoints[0], requests: configuration.requestEndpoints[0],
                    commands: configuration.commandEndpoints[0]),
                timeout: .seconds(10))
            do {
                try await Self.drive(connection) {
                    await running.stop()
                    try await running.start(configuration)
                }
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
        } catch {
            await running.stop()
            throw error
        }
        await running.stop()
    }

    /// 50 steps of random intents and shell actions against the service behind `connection`,
    /// with `restart` called every 15 steps, then the mirror compared with the snapshot.
    static func drive(_ connection: NavigatorConnection, restart: () async throws -> Void) async throws {
        let buffer = EventBuffer()
        let follower = Task {
            do {
                for try await event in connection.follow(.session("sh")) {
                    buffer.events.withLock { $0.append(event) }
                }
            } catch {
                buffer.failure.withLock { $0 = "\(error)" }
            }
        }
        defer { follower.cancel() }
        var model = ShellModel(session: "sh")
        var mix = IntentMix(map: .demo, seed: 11)
        var random = SplitMix64(seed: 5)
        var dropped = false
        var resyncs = 0
        var staleRefused = 0

        func resync() async throws {
            let snapshot = try await connection.snapshot("sh")
            _ = model.handle(
                .snapshot(
                    session: "sh", position: StreamPosition(epoch: snapshot.epoch, seq: snapshot.seq),
                    tree: try snapshot.tree.core()))
            resyncs += 1
        }

        /// Feeds events until the shell has caught up with the service, as the real shell
        /// would: acknowledging batches, resyncing on a gap, and resyncing when it stays
        /// behind (the periodic check).
        func catchUp(step: Int) async throws {
            let target = try await connection.snapshot("sh").seq
            let clock = ContinuousClock()
            var quiet = clock.now
            while model.seq < target || model.mirror == nil {
                if let failure = buffer.failure.withLock({ $0 }) { throw ClientError(.closed, failure) }
                let events = buffer.take()
                if events.isEmpty {
                    if clock.now - quiet > .milliseconds(300) {
                        try await resync()  // behind with nothing coming: what the shell's check does
                        quiet = clock.now
                    }
                    try await Task.sleep(for: .milliseconds(2))
                    continue
                }
                quiet = clock.now
                for event in events {
                    if case .batch = event, !dropped, step >= 10 {
                        dropped = true  // lose this one on purpose
                        continue
                    }
                    switch model.handle(event) {
                    case .report(let ack): _ = try await connection.report(ack, session: "sh", lastSeq: model.seq)
                    case .resync: try await resync()
                    case nil: break
                    }
                }
            }
        }

        try await catchUp(step: 0)
        for step in 0..<50 {
            if random.next() % 3 == 0 {
                let action: ClientEvent? =
                    switch random.next() % 3 {
                    case 0: model.back()
                    case 1: model.dismiss()
                    default: model.selectTab(Int(random.next() % 4))
                    }
                if let action {
                    // Now and then the shell reports from an older position, as a slow shell
                    // would: refused as stale when a batch of the service came since, and
                    // the shell resyncs (its own change is gone with it).
                    let stale = random.next() % 4 == 0 && model.seq >= 2
                    do {
                        _ = try await connection.report(
                            action, session: "sh", lastSeq: stale ? model.seq - 2 : model.seq, epoch: model.epoch)
                    } catch let error as ClientError where error.rejectCode == .staleEvent {
                        staleRefused += 1
                        try await resync()
                    }
                }
            } else if case .intent(var intent) = mix.next(session: "sh") {
                intent.session = "sh"
                _ = try await connection.acknowledged(intent)
            }
            try await catchUp(step: step)
            if step % 15 == 14 { try await restart() }
        }
        let snapshot = try await connection.snapshot("sh")
        #expect(dropped)
        #expect(resyncs >= 1)
        #expect(staleRefused >= 1)
        #expect(model.seq == snapshot.seq)
        #expect(model.mirror == (try snapshot.tree.core()))
        #expect(model.warning == nil)
    }

    @Test("keys become local changes and the client events that report them")
    func keys() throws {
        var model = ShellModel(session: "k")
        var tree = RouteMap.demo.initialTree()
        try tree.apply([
            .selectTab("chats"),
            .push(Screen(id: 5, ScreenContext("chat", ["conversationId": "1"])), onto: .tab("chats")),
            .present(Modal(id: 6, style: .sheet, stack: [Screen(id: 7, ScreenContext("login"))])),
        ])
        _ = model.handle(.snapshot(session: "k", position: StreamPosition(epoch: 1, seq: 3), tree: tree))
        #expect(model.back() == .dismissedTo(nil))  // a one-screen modal goes back by dismissing
        #expect(model.back() == .poppedTo(3))
        #expect(model.back() == nil)
        #expect(model.status == "nothing to go back to")
        #expect(model.selectTab(0) == .tabSelected("home"))
        #expect(model.selectTab(9) == nil)
        #expect(model.dismiss() == nil)
        #expect(model.mirror?.top.context.screen == "home")
    }
}
