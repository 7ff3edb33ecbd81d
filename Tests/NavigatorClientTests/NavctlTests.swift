import Foundation
import NavigatorClient
import NavigatorCore
import NavigatorEngine
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Synchronization
import Testing

@testable import navctl

@Suite("Intent words")
struct IntentWordsTests {
    @Test("screens, key=value pairs and --then make a path")
    func path() throws {
        #expect(
            try IntentWords.path(["chat", "conversationId=42", "draft=a=b", "--then", "thread", "threadId=7"]) == [
                ScreenContext("chat", ["conversationId": "42", "draft": "a=b"]),
                ScreenContext("thread", ["threadId": "7"]),
            ])
        #expect(try IntentWords.path([]) == [])
    }

    @Test(
        "mistakes say what was expected",
        arguments: [
            (["key=1"], "key=1 comes before a screen"),
            (["chat", "--then"], "--then must be followed by a screen"),
            (["--then", "chat"], "--then must follow a screen"),
            (["chat", "other"], "other is neither key=value nor after --then"),
            (["chat", "=1"], "=1 has no key"),
            (["chat", "--bogus"], "unknown option --bogus"),
        ])
    func mistakes(words: [String], message: String) {
        #expect { try IntentWords.path(words) } throws: { "\($0)".contains(message) }
    }
}

/// Runs the built navctl and returns its exit status and output.
func navctl(_ arguments: [String], until: ((String) -> Bool)? = nil) async throws -> (status: Int32, output: String) {
    try await runBuilt("navctl", arguments, until: until)
}

@Suite("navctl", .serialized)
struct NavctlTests {
    func options(_ server: Engine) -> [String] {
        let endpoints = server.endpoints
        // navctl's 2-s wait for a reply, stretched as the tests' deadlines are under a sanitizer.
        let wait = TestTiming.slowdown > 1 ? ["--timeout", "\(2 * TestTiming.slowdown)"] : []
        return [
            "--intents", endpoints.intents[0], "--requests", endpoints.requests[0], "--commands", endpoints.commands[0],
        ] + wait
    }

    @Test("send, then watch --json shows the batch")
    func sendAndWatch() async throws {
        try await withConnection { connection, server in
            let options = self.options(server)
            async let watched = navctl(["watch", "--session", "w1", "--json"] + options) {
                $0.contains(#""batch":{"#)
            }
            // Send once the watcher has its snapshot (it subscribed before asking for it).
            while try await connection.stats().subscribers == 0 { try await Task.sleep(for: .milliseconds(5)) }
            let sent = try await navctl(
                ["send", "--session", "w1", "--id", "n1", "chat", "conversationId=9"] + options)
            #expect(sent.status == 0)
            #expect(sent.output.contains("sent n1 to session w1"))
            let output = try await watched.output
            // Each line is a navigator.v1.StreamEvent in protobuf's canonical JSON mapping.
            let events = try output.split(separator: "\n").map { try Navigator_V1_StreamEvent(jsonString: String($0)) }
            // A loaded machine may make the watcher resync (a "resync" line, then a snapshot
            // again); what counts is a snapshot, then the batch.
            let snapshots = events.enumerated().compactMap { index, event -> (Int, Navigator_V1_Snapshot)? in
                if case .snapshot(let snapshot)? = event.kind { return (index, snapshot) }
                return nil
            }
            let batches = events.enumerated().compactMap { index, event -> (Int, Navigator_V1_CommandBatch)? in
                if case .batch(let batch)? = event.kind { return (index, batch) }
                return nil
            }
            guard let (first, snapshot) = snapshots.first, let (at, batch) = batches.first, first < at else {
                Issue.record("expected a snapshot and a batch, got \(output)")
                return
            }
            #expect(snapshot.session == "w1" && snapshot.seq == 0 && !snapshot.tree.root.tabBar.tabs.isEmpty)
            #expect(batch.intentID == "n1" && batch.seq == 1)
            #expect(output.contains(#"{"selectTab":{"tab":"chats"}}"#))
            #expect(output.contains(#""seq":"1""#), "uint64 as a string, as the mapping says")
        }
    }

    @Test(
        "routes check and diff: a file's problems with their lines; the changes, from two files and against navigatord's map"
    )
    func routesCheckAndDiff() async throws {
        let directory = TestService.temporaryDirectory("navctl-routes")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let example = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/routes.example.yaml")
        let text = try String(contentsOf: example, encoding: .utf8)
        // The docs' example: a guard added to thread, mediaViewer removed, the chat's URL changed.
        var candidate = text.replacingOccurrences(
            of: "    url: app://chat/{conversationId}\n", with: "    url: app://c/{conversationId}\n")
        candidate = candidate.replacingOccurrences(
            of: "  thread:\n", with: "  thread:\n    guard: { condition: verified, redirect: login }\n")
        let viewer = try #require(candidate.range(of: "  mediaViewer:\n"))
        let next = try #require(candidate.range(of: "  reactions:\n"))
        candidate.removeSubrange(viewer.lowerBound..<next.lowerBound)
        let old = directory.appendingPathComponent("old.yaml").path
        let new = directory.appendingPathComponent("new.yaml").path
        let bad = directory.appendingPathComponent("bad.yaml").path
        try text.write(toFile: old, atomically: true, encoding: .utf8)
        try candidate.write(toFile: new, atomically: true, encoding: .utf8)
        try candidate.replacingOccurrences(
            of: "homeTab: chats\n    parent: chatList", with: "homeTab: chatz\n    parent: chatList"
        )
        .write(toFile: bad, atomically: true, encoding: .utf8)

        let valid = try await navctl(["routes", "check", new])
        #expect(valid.status == 0)
        #expect(valid.output.contains("new.yaml: valid: 4 tabs, 16 screens (15 with a url, 3 guarded, 1 blocking)"))
        let invalid = try await navctl(["routes", "check", bad])
        #expect(invalid.status == 1)
        #expect(
            invalid.output.contains(
                "bad.yaml:58:5: screens.chat.homeTab: tab chatz is not declared; expected one of home, search, chats, profile"
            ),
            "\(invalid.output)")
        let expected = """
            ~ url chat: app://chat/{conversationId} -> app://c/{conversationId}
            - screen mediaViewer (was: modal (overCurrent); info mediaId (string, required))
            - url mediaViewer (was: app://media/{mediaId})
            + guard thread: verified, else login
            4 changes: 1 added, 2 removed, 1 changed
            """
        let files = try await navctl(["routes", "diff", old, new])
        #expect(files.status == 0)
        #expect(files.output == expected + "\n")
        #expect(try await navctl(["routes", "diff", old, bad]).status == 1)

        let version = RouteMapVersion.of(text: candidate)
        // One file: navigatord checks it against the map it uses (the demo map, equal to old).
        try await withConnection { connection, server in
            let served = try await navctl(["routes", "diff", new] + self.options(server))
            #expect(served.status == 0)
            #expect(served.output == "# against the map navigatord uses, from embedded demo\n" + expected + "\n")
            let json = try await navctl(["routes", "diff", "--json", new] + self.options(server))
            let check = try Navigator_V1_RoutesCheck(jsonString: json.output)
            #expect(check.valid && check.changes.count == 4 && check.currentSource == "embedded demo")
            #expect(
                check.changes[3].kind == "added" && check.changes[3].subject == "guard"
                    && check.changes[3].name == "thread")
            let refused = try await navctl(["routes", "diff", bad] + self.options(server))
            #expect(refused.status == 1)
            #expect(refused.output.contains("bad.yaml:58:5: screens.chat.homeTab: tab chatz is not declared"))

            // Impact: recorded traffic replayed against the candidate. Signed-in users open 5
            // threads, 3 media viewers, 4 chat links and 6 settings screens.
            func send(_ id: String, _ session: String, _ target: Intent.Target) async throws {
                let intent = Intent(
                    id: id, session: session, target: target, setConditions: ["authenticated": true])
                _ = try await connection.acknowledged(intent)
            }
            for n in 1...5 {
                try await send(
                    "t\(n)", "u\(n)", .path([ScreenContext("thread", ["conversationId": "\(n)", "threadId": "7"])]))
            }
            for n in 1...3 { try await send("m\(n)", "u\(n)", .path([ScreenContext("mediaViewer", ["mediaId": "x"])])) }
            for n in 1...4 { try await send("c\(n)", "v\(n)", .url("app://chat/4\(n)")) }
            for n in 1...6 { try await send("s\(n)", "w\(n)", .path([ScreenContext("settings")])) }
            let impact = try await navctl(["routes", "impact", new] + self.options(server))
            #expect(impact.status == 0, "\(impact.output)")
            let lines = impact.output.split(separator: "\n").map(String.init)
            #expect(lines.first == "thread: 5 of 5 intents would change", "\(impact.output)")
            #expect(lines.contains("  5 parked differently, e.g. t1 of session u1"))
            #expect(lines.contains("chat: 4 of 4 intents would change"))
            #expect(lines.contains("  4 now rejected (unknown_url), e.g. c1 of session v1"))
            #expect(lines.contains("mediaViewer: 3 of 3 intents would change"))
            #expect(lines.contains("  3 now rejected (unknown_screen), e.g. m1 of session u1"))
            #expect(lines.contains("unchanged: settings (6)"))
            #expect(lines.last == "12 of 18 recorded intents would change, on 3 of 4 routes")
            let reported = try await navctl(["routes", "impact", "--json", new] + self.options(server))
            let report = try Navigator_V1_RoutesImpact(jsonString: reported.output)
            #expect(report.intents == 18 && report.changed == 12 && report.recorderCapacity >= 4096)
            #expect(report.check.valid && report.check.changes.count == 4)
            #expect(
                report.routes.first?.changes.first?.before.hasPrefix("resolved: transition: pushing thread") == true)
            let invalid = try await navctl(["routes", "impact", bad] + self.options(server))
            #expect(invalid.status == 1 && invalid.output.contains("bad.yaml:58:5: screens.chat.homeTab"))
            // Nothing changed: the sessions are as the intents left them.
            #expect(try await connection.snapshot("u1").seq == 2)

            // A staged rollout: the candidate for every session, its figures, then rolled back.
            let rollout = try await navctl(["routes", "rollout", new, "--share", "100"] + self.options(server))
            #expect(rollout.status == 0, "\(rollout.output)")
            #expect(
                rollout.output.hasPrefix(
                    "candidate \(version) (\(new)) for 100% of sessions, the others on embedded (embedded demo)\n"),
                "\(rollout.output)")
            let viewer = try await connection.acknowledged(
                Intent(id: "m9", session: "u9", target: .path([ScreenContext("mediaViewer", ["mediaId": "x"])])))
            #expect(viewer.rejected.code == .unknownScreen, "\(viewer)")
            let status = try await navctl(["routes", "status"] + self.options(server))
            #expect(
                status.output.contains("candidate \(version): 1 intents, 1 rejected (100.0%), landed 0 of 1 (0.0%)"),
                "\(status.output)")
            let twice = try await navctl(["routes", "rollout", new, "--share", "10"] + self.options(server))
            #expect(twice.status != 0 && twice.output.contains("a rollout is under way already"), "\(twice.output)")
            let back = try await navctl(["routes", "rollback"] + self.options(server))
            #expect(back.status == 0)
            #expect(back.output.hasPrefix("rolled back: every session resolves with embedded (embedded demo)"))
            let nothing = try await navctl(["routes", "promote"] + self.options(server))
            #expect(nothing.status != 0 && nothing.output.contains("no rollout is under way to promote"))
            let refusedRollout = try await navctl(["routes", "rollout", bad, "--share", "10"] + self.options(server))
            #expect(refusedRollout.status == 1 && refusedRollout.output.contains("bad.yaml:58:5: screens.chat.homeTab"))
            #expect(
                try await connection.acknowledged(
                    Intent(id: "m10", session: "u9", target: .path([ScreenContext("mediaViewer", ["mediaId": "x"])]))
                ).resolved.batch.seq > 0)
        }
    }

    @Test("send --wait prints each outcome kind")
    func waitOutcomes() async throws {
        try await withConnection { _, server in
            let options = self.options(server)
            let resolved = try await navctl(
                ["send", "--wait", "--session", "o", "--id", "a", "chat", "conversationId=1"] + options)
            #expect(resolved.status == 0 && resolved.output.hasPrefix("resolved: batch seq 1"))
            let refreshed = try await navctl(
                ["send", "--wait", "--session", "o", "chat", "conversationId=1", "draft=x"] + options)
            #expect(refreshed.output.hasPrefix("refreshed: batch seq 2"))
            let ignored = try await navctl(["send", "--wait", "--session", "o", "--id", "a", "home"] + options)
            #expect(ignored.output.hasPrefix("ignored: duplicate intent id a"))
            let parked = try await navctl(["send", "--wait", "--session", "o", "editProfile"] + options)
            #expect(parked.output.hasPrefix("parked: waiting for authenticated (showing login)"))
            let rejected = try await navctl(["send", "--wait", "--session", "o", "chat", "conversationId=x"] + options)
            #expect(rejected.status == 3)
            #expect(rejected.output.hasPrefix("rejected (invalid_info): chat.conversationId is \"x\"; expected int"))
            let explained = try await navctl(["explain", "--session", "o", "--url", "app://settings"] + options)
            #expect(explained.output.contains("would be resolved"))
            #expect(explained.output.contains("why:"))
        }
    }

    @Test("a fire-and-forget rejection is reported (exit 3) and shown inline by watch; a condition releases a guard")
    func rejectionsAndConditions() async throws {
        try await withConnection { connection, server in
            let options = self.options(server)
            async let watched = navctl(["watch", "--session", "g", "--json"] + options) {
                $0.contains(#""rejection":{"#)
            }
            while try await connection.stats().subscribers < 3 { try await Task.sleep(for: .milliseconds(5)) }
            // It returns as the rejection arrives; the long listen is for a machine under load.
            let typo = try await navctl(
                ["send", "--session", "g", "--id", "t1", "--listen", "15", "chta", "x=1"] + options)
            #expect(typo.status == 3)
            #expect(typo.output.contains("rejected (unknown_screen): screen chta is not in the route map"))
            #expect(try await watched.output.contains(#""intentId":"t1""#))

            let invalid = try await navctl(["send", "--session", "a/b", "home"] + options)
            #expect(invalid.status == 64)
            #expect(invalid.output.contains("--session: session id \"a/b\" contains \"/\""))

            let parked = try await navctl(["send", "--wait", "--session", "g", "--id", "e1", "editProfile"] + options)
            #expect(parked.output.hasPrefix("parked: waiting for authenticated"))
            #expect(try await connection.snapshot("g").parked.map(\.guardCondition) == ["authenticated"])
            let condition = try await navctl(["condition", "--session", "g", "authenticated=true"] + options)
            #expect(condition.status == 0)
            #expect(condition.output.contains("released e1"))
            let cleared = try await navctl(
                ["send", "--wait", "--session", "g", "--set", "authenticated=false", "home"] + options)
            #expect(cleared.status == 0)
            #expect(try await connection.snapshot("g").conditions["authenticated"] == false)

            let wouldFail = try await navctl(["explain", "--session", "g", "chat", "conversationId=x"] + options)
            #expect(wouldFail.status == 3 && wouldFail.output.hasPrefix("would be rejected"))
            // The counts add up, as stats --help defines them.
            let stats = try await navctl(["stats"] + options).output
            func numbers(_ prefix: String) -> [UInt64] {
                let line = stats.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init) ?? ""
                let head = line.split(separator: ";").first.map(String.init) ?? ""
                return head.split { !$0.isNumber }.compactMap { UInt64($0) }
            }
            let intents = numbers("intents: ")
            #expect(intents.count == 6 && intents[0] == intents.dropFirst().reduce(0, +), "\(stats)")
            let refusals = numbers("refusals by code")
            #expect(refusals.count >= 2 && refusals[0] == refusals.dropFirst().reduce(0, +), "\(stats)")
            let both = try await navctl(["watch", "--session", "g", "--all"] + options)
            #expect(both.status == 64 && both.output.contains("give --session S or --all, not both"))
        }
    }

    @Test(
        "argument mistakes: exit 64, saying what was expected, with a suggestion for a misspelt option",
        arguments: [
            (["send", "--sesion", "demo", "home"], "unknown option --sesion; did you mean --session?"),
            (["send", "--session", "demo", "--ttl", "-5", "home"], "--ttl -5 is not a whole number of milliseconds"),
            (["send", "home"], "missing --session S"),
            (
                ["stats", "--requests", "foo"],
                "--requests foo: unknown transport; expected tcp://, ipc:// or inproc://"
            ),
            (["snapshot", "--sesion", "x"], "Did you mean '--session'?"),
            (["snapshot"], "missing --session S"),
            (["condition", "--session", "x", "authenticated=yes"], "condition authenticated=yes is not name=true"),
        ])
    func argumentMistakes(arguments: [String], message: String) async throws {
        let result = try await navctl(arguments)
        #expect(result.status == 64, "\(result.output)")
        #expect(result.output.contains(message), "\(result.output)")
    }

    @Test("an unreachable service: a clear error and a non-zero exit within the timeout")
    func unreachable() async throws {
        let result = try await navctl(["stats", "--requests", "tcp://127.0.0.1:9", "--timeout", "0.3"])
        #expect(result.status == 1)
        #expect(
            result.output.contains(
                "navctl: no reply from navigatord at tcp://127.0.0.1:9 within 0.3 seconds (is navigatord running?"))
    }
}

@Suite("navctl in secure mode", .serialized)
struct NavctlSecureTests {
    @Test(
        "keygen writes a pair (secret 0600, never overwritten); navctl and NavigatorConnection get in with their keys only"
    )
    func keygenAndConnect() async throws {
        // Not made beforehand: keygen makes it, for its owner only.
        let directory = TestService.temporaryDirectory("navkeys")
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["server", "ops", "alice"] {
            let made = try await navctl(["keygen", name, "--directory", directory.path])
            #expect(made.status == 0, "\(made.output)")
            #expect(made.output.contains("public key: "))
        }
        let made = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((made[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let secret = directory.appendingPathComponent("ops.key").path
        let attributes = try FileManager.default.attributesOfItem(atPath: secret)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let again = try await navctl(["keygen", "ops", "--directory", directory.path])
        #expect(again.status != 0 && again.output.contains("it exists already (keys are never overwritten)"))

        func publicKey(_ name: String) throws -> String {
            try String(contentsOfFile: directory.appendingPathComponent("\(name).pub").path, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let access = directory.appendingPathComponent("access.yaml").path
        try """
        clients:
          - name: ops
            key: "\(try publicKey("ops"))"
            role: admin
          - name: alice
            key: "\(try publicKey("alice"))"
            role: shell
            sessions: ["alice"]
        """.write(toFile: access, atomically: true, encoding: .utf8)

        let data = TestService.temporaryDirectory("navkeys-data")
        defer { try? FileManager.default.removeItem(at: data) }
        var configuration = TestService.configuration(dataDirectory: data)
        configuration.secretKeyFile = directory.appendingPathComponent("server.key").path
        configuration.accessFile = access
        let server = try Engine(configuration: configuration, logger: TestService.logger("navctl-secure"))
        try await server.start()
        do {
            try await checkClients(server, directory: directory, secret: secret, publicKey: publicKey)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    func checkClients(
        _ server: Engine, directory: URL, secret: String, publicKey: (String) throws -> String
    ) async throws {
        let endpoints = server.endpoints
        let base = [
            "--intents", endpoints.intents[0], "--requests", endpoints.requests[0], "--commands", endpoints.commands[0],
        ]
        let serverPub = directory.appendingPathComponent("server.pub").path

        let stats = try await navctl(["stats", "--server-key", serverPub, "--key-file", secret] + base)
        #expect(stats.status == 0, "\(stats.output)")
        #expect(stats.output.contains("sessions"))
        let plain = try await navctl(["stats", "--timeout", "0.5"] + base)
        #expect(plain.status == 1)
        #expect(plain.output.contains("does it run in secure mode"), "\(plain.output)")
        let stranger = try await navctl(
            // --server-key=KEY: a Z85 key may begin with "-", which would read as an option.
            ["stats", "--timeout", "0.5", "--server-key=\(try publicKey("alice"))", "--key-file", secret] + base)
        #expect(stranger.output.contains("authentication may have failed"), "\(stranger.output)")
        let half = try await navctl(["stats", "--key-file", secret] + base)
        #expect(half.status != 0 && half.output.contains("--key-file needs --server-key"), "\(half.output)")

        // On a terminal, a shell of another session says why it gets nothing.
        let refusedShell = try PseudoTerminalShell(
            [
                "--session", "bob", "--server-key", serverPub, "--key-file",
                directory.appendingPathComponent("alice.key").path,
            ]
                + base, rows: 20, columns: 100)
        defer { refusedShell.stop() }
        try await refusedShell.waitFor("the refusal in the header") {
            $0.first?.contains("refused: ") == true && $0.joined().contains("may not follow session bob")
        }

        // A shell follows its own session through NavigatorConnection, and only that.
        let alice = try await NavigatorConnection(
            endpoints: ServerEndpoints(
                intents: endpoints.intents[0], requests: endpoints.requests[0], commands: endpoints.commands[0],
                curve: try CurveCredentials.load(
                    keyFile: directory.appendingPathComponent("alice.key").path, serverKey: serverPub)),
            timeout: .seconds(10))
        #expect(try await alice.snapshot("alice").session == "alice")
        await #expect {
            _ = try await alice.snapshot("bob")
        } throws: { error in
            (error as? ClientError)?.rejectCode == .forbidden
        }
        await alice.close()
    }
}

@Suite("navctl stats --routes")
struct RouteTableTests {
    static func route(_ name: String, landed: UInt64, notLanded: UInt64, land: [UInt64] = [0, 0, 0])
        -> Navigator_V1_RouteStats
    {
        .with {
            $0.route = name
            $0.intentsByOutcome = ["resolved": landed + notLanded, "parked": 1]
            $0.landed = landed
            $0.notLanded = notLanded
            $0.landBucketBoundsSeconds = [0.0025, 0.01]
            $0.landBucketCounts = land
        }
    }

    @Test("worst landing first, routes nothing settled last; p50 and p99 are the upper bounds of their buckets")
    func table() {
        let stats = Navigator_V1_Stats.with {
            $0.landingWindowSeconds = 10
            $0.routes = [
                Self.route("chat", landed: 99, notLanded: 1, land: [90, 9, 0]),
                Self.route("editProfile", landed: 0, notLanded: 5),
                Self.route("home", landed: 0, notLanded: 0),
                Self.route("settings", landed: 3, notLanded: 1, land: [0, 1, 2]),
            ]
        }
        let lines = Stats.routeTable(stats).split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("route") && lines[0].hasSuffix("p99"))
        #expect(
            lines.dropFirst().prefix(4).map { $0.split(separator: " ")[0] } == [
                "editProfile", "settings", "chat", "home",
            ])
        #expect(lines[1].contains("0.0 %") && lines[2].contains("75.0 %") && lines[3].contains("99.0 %"))
        // chat: 99 acknowledged, 90 within 2.5 ms (p50), the 99th within 10 ms (p99).
        #expect(lines[3].hasSuffix("≤ 2.5 ms  ≤ 10 ms"), "\(lines[3])")
        // settings: half beyond the last bound.
        #expect(lines[2].hasSuffix("> 10 ms"), "\(lines[2])")
        #expect(lines[4].contains("—"))
        #expect(lines.last == "landing window 10 s")
        #expect(Stats.routeTable(Navigator_V1_Stats()) == "no intents yet")
    }
}
