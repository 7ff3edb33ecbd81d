import Foundation
import NavigatorCore
import NavigatorService
import NavigatorTestSupport
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ

/// The built `navigatord`, started as a user would, on ephemeral ports.
final class Daemon: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the daemon; the output buffer
    // is behind a Mutex shared with the reading thread.
    let process = ChildProcess()
    private let output: ChildOutput

    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["NAVIGATORD_BINARY"] { return URL(fileURLWithPath: path) }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/navigatord")
    }

    /// `endpoints`: intents, requests and commands (ipc in a temporary directory, so that a
    /// restarted daemon is found where the last one was); ephemeral tcp ports otherwise.
    init(dataDirectory: URL, endpoints: [String]? = nil, extra: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw TestFailure("navigatord is not built at \(Self.binary.path); run swift build first (./dev test does)")
        }
        process.executableURL = Self.binary
        process.arguments =
            [
                "--intents", endpoints?[0] ?? "tcp://127.0.0.1:*", "--requests", endpoints?[1] ?? "tcp://127.0.0.1:*",
                "--commands", endpoints?[2] ?? "tcp://127.0.0.1:*", "--metrics", "off", "--workers", "2",
                "--data-directory", dataDirectory.path, "--log-level", "info",
                "--shutdown-timeout-seconds", "5",
            ] + extra
        let pipe = try ChildProcess.pipe()
        process.standardError = pipe.write
        process.standardOutput = pipe.write
        output = ChildOutput(reading: pipe.read)
        defer { close(pipe.write) }
        try process.run()
    }

    var log: String { output.text }

    /// Waits until the log contains `text` (bounded).
    func wait(for text: String, timeout: Duration = .seconds(20)) async throws {
        let end = ContinuousClock.now + timeout
        while !log.contains(text) {
            guard process.isRunning || log.contains(text) else { throw TestFailure("navigatord ended early:\n\(log)") }
            guard ContinuousClock.now < end else {
                throw TestFailure("no \"\(text)\" in the log within \(timeout):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The endpoints from the start-up log line.
    func endpoints() async throws -> Endpoints {
        try await wait(for: "navigatord started")
        func value(_ key: String) -> [String] {
            guard let range = log.range(of: "\(key)=") else { return [] }
            return [String(log[range.upperBound...].prefix { !$0.isWhitespace })]
        }
        var endpoints = Endpoints()
        endpoints.intents = value("intents")
        endpoints.requests = value("requests")
        endpoints.commands = value("commands")
        endpoints.metrics = value("metrics").first.flatMap { $0 == "off" ? nil : String($0.dropFirst("http://".count)) }
        return endpoints
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to end (bounded) and returns its exit status.
    func exitStatus(timeout: Duration = .seconds(20)) async throws -> Int32 {
        let end = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < end else {
                throw TestFailure("navigatord did not exit within \(timeout):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    /// Makes sure nothing is left running, whatever the test did.
    func reap() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        output.waitForEndBlocking()
    }
}

@Suite("navigatord executable", .serialized)
struct ExecutableTests {
    @Test("kill -9 after an acknowledged intent: a restart has it; SIGTERM then exits 0")
    func killNine() async throws {
        let directory = temporaryDirectory("navexe")
        defer { try? FileManager.default.removeItem(at: directory) }

        let first = try Daemon(dataDirectory: directory)
        defer { first.reap() }
        let endpoints = try await first.endpoints()
        let reply = try await onThread {
            try Client(endpoints).request(
                .intent(
                    wireIntent("k1", [ScreenContext("thread", ["conversationId": "4", "threadId": "2"])], session: "k"))
            )
        }
        #expect(reply.resolved.batch.seq == 1)
        first.signal(SIGKILL)
        #expect(try await first.exitStatus() != 0)

        let second = try Daemon(dataDirectory: directory)
        defer { second.reap() }
        let again = try await second.endpoints()
        #expect(second.log.contains("restored 1 sessions"))
        let snapshot = try await onThread {
            try Client(again).request(.snapshot(.with { $0.session = "k" })).snapshot
        }
        #expect(snapshot.seq == 1)
        #expect(
            try snapshot.tree.core().top.context == ScreenContext("thread", ["conversationId": "4", "threadId": "2"]))
        second.signal(SIGTERM)
        #expect(try await second.exitStatus() == 0)
        #expect(second.log.contains("navigatord stopped; state flushed"))
    }

    @Test("SIGHUP reloads a good map and refuses a bad one, keeping the old")
    func hangup() async throws {
        let directory = temporaryDirectory("navhup")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let routes = directory.appendingPathComponent("routes.yaml")
        try RouteMapYAML.encode(.demo).write(to: routes, atomically: true, encoding: .utf8)

        let daemon = try Daemon(dataDirectory: directory, extra: ["--routes", routes.path])
        defer { daemon.reap() }
        let endpoints = try await daemon.endpoints()

        try "screens: [".write(to: routes, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try await daemon.wait(for: "route map reload refused; the previous map stays")
        var smaller = RouteMap.demo
        smaller.screens["welcome"] = nil
        try RouteMapYAML.encode(smaller).write(to: routes, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try await daemon.wait(for: "screens=16")
        let served = try await onThread {
            try Client(endpoints).request(.routes(.init())).routes
        }
        #expect(!served.yaml.contains("welcome:"))
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0)
    }

    @Test("a bad option exits non-zero saying what is wrong")
    func badOption() async throws {
        let daemon = try Daemon(dataDirectory: temporaryDirectory("navopt"), extra: ["--workers", "many"])
        defer { daemon.reap() }
        #expect(try await daemon.exitStatus() == 2)
        #expect(daemon.log.contains("--workers: workers \"many\" is not a whole number from 1 to 256"))
    }

    @Test("without security a non-loopback endpoint exits 2 and says why")
    func insecureRemote() async throws {
        let daemon = try Daemon(
            dataDirectory: temporaryDirectory("navremote"),
            endpoints: ["tcp://0.0.0.0:*", "tcp://127.0.0.1:*", "tcp://127.0.0.1:*"])
        defer { daemon.reap() }
        #expect(try await daemon.exitStatus() == 2)
        #expect(daemon.log.contains("intents endpoint tcp://0.0.0.0:* is not loopback, and security is off"))
    }

    @Test("secure mode: the public key is printed; SIGHUP reloads the access file and a removed key is refused")
    func secureHangup() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let daemon = try Daemon(
            dataDirectory: setup.directory.appendingPathComponent("data"),
            extra: ["--secret-key-file", setup.keyFile, "--access-file", setup.accessFile])
        defer { daemon.reap() }
        let endpoints = try await daemon.endpoints()
        #expect(daemon.log.contains("server public key \(setup.server.publicKey)"))
        let before = try await onThread {
            try setup.client(setup.producer, endpoints).request(
                .intent(wireIntent("p1", [ScreenContext("settings")], session: "shop-1")))
        }
        before.expectResolved()
        try setup.writeAccess(shell: true, producer: false)
        daemon.signal(SIGHUP)
        try await daemon.wait(for: "access file reloaded")
        // A new connection with the removed key gets no handshake, so no answer.
        let refused = try await onThread {
            SecurityTests.timesOut {
                _ = try setup.client(setup.producer, endpoints, timeout: .milliseconds(500)).request(.stats(.init()))
            }
        }
        #expect(refused)
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0)
    }
}
