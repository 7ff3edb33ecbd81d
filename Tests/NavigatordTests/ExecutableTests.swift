import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import NavigatorYAML
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ

@testable import NavigatorEngine
@testable import navigatord

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

    @Test(
        "the flush thread runs writeBehindNice nice values below the workers: 10 by default, as given, and 20 is refused"
    )
    func writeBehindNice() async throws {
        #if os(Linux)
            for (extra, steps) in [
                ([String](), 10), (["--write-behind-nice", "0"], 0), (["--write-behind-nice", "19"], 19),
            ] {
                let daemon = try Daemon(dataDirectory: temporaryDirectory("navnice"), extra: extra)
                defer { daemon.reap() }
                _ = try await daemon.endpoints()
                let pid = daemon.process.processIdentifier
                // The workers run at the process's own nice value (whatever the test runner's is).
                let base = try #require(try Self.nice(ofThread: "nav-worker-0", in: pid))
                let expected = min(base + steps, 19)
                // The thread lowers its own priority as it starts: looked at until it has (bounded).
                let end = ContinuousClock.now + .seconds(20)
                var nice = try Self.nice(ofThread: "nav-flush", in: pid)
                while nice != expected, ContinuousClock.now < end {
                    try await Task.sleep(for: .milliseconds(10))
                    nice = try Self.nice(ofThread: "nav-flush", in: pid)
                }
                #expect(nice == expected, "with \(extra), the workers at nice \(base)")
                #expect(try Self.nice(ofThread: "nav-worker-0", in: pid) == base)
                daemon.signal(SIGTERM)
                #expect(try await daemon.exitStatus() == 0)
            }
            let refused = try Daemon(
                dataDirectory: temporaryDirectory("navnice"), extra: ["--write-behind-nice", "20"])
            defer { refused.reap() }
            #expect(try await refused.exitStatus() == 2)
            #expect(
                refused.log.contains("--write-behind-nice: writeBehindNice \"20\" is not a whole number from 0 to 19"),
                "\(refused.log)")
        #endif
    }

    /// The nice value of the thread named `name` of process `pid`, from /proc (field 19 of its
    /// `stat`); nil when it has no such thread.
    static func nice(ofThread name: String, in pid: Int32) throws -> Int? {
        let tasks = "/proc/\(pid)/task"
        for tid in try FileManager.default.contentsOfDirectory(atPath: tasks) {
            guard let comm = try? String(contentsOfFile: "\(tasks)/\(tid)/comm", encoding: .utf8),
                comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
                let stat = try? String(contentsOfFile: "\(tasks)/\(tid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the name: state (field 3) onwards, so field 19 is the 17th.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 16 ? Int(fields[16]) : nil
        }
        return nil
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
            timesOut {
                _ = try setup.client(setup.producer, endpoints, timeout: .milliseconds(500)).request(.stats(.init()))
            }
        }
        #expect(refused)
        daemon.signal(SIGTERM)
        #expect(try await daemon.exitStatus() == 0)
    }
}
