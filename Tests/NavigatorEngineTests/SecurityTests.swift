import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

@testable import NavigatorEngine

/// A secure navigatord's keys and access file, in a temporary directory: an admin, a shell that
/// owns `s1`, a producer that owns `shop-*`.

@Suite("Security: CURVE, the ZAP handler and the access file")
struct SecurityTests {
    /// Whether `body` fails for want of an answer (a receive or send timeout).
    static func isUntouched(_ stats: Navigator_V1_Stats) -> Bool {
        stats.sessions == 0 && stats.intentsByOutcome.values.allSatisfy { $0 == 0 } && stats.rejectionsByCode.isEmpty
    }

    @Test("the wrong server key, or a key not in the access file, gets nothing through and changes nothing")
    func strangersGetNothing() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await withService(workers: 2, setup.configure) { server, endpoints in
            try await onThread {
                let stranger = try setup.client(try CurveKeyPair.generate(), endpoints, timeout: .milliseconds(500))
                let impostor = try setup.client(
                    setup.admin, endpoints, serverKey: try CurveKeyPair.generate().publicKey,
                    timeout: .milliseconds(500))
                for client in [stranger, impostor] {
                    #expect(timesOut { _ = try client.request(.stats(.init())) })
                    // Queued in the PUSH until a handshake that never completes.
                    try? client.send(wireIntent("x", [ScreenContext("settings")]), session: "s1")
                }
                // The stranger's two connections were refused by the ZAP handler (the
                // impostor's never reach it: the server cannot read its handshake).
                try waitUntil("the stranger was refused") { server.counters.authRefused.load >= 2 }
                let admin = try setup.client(setup.admin, endpoints)
                let stats = try admin.request(.stats(.init())).stats
                #expect(Self.isUntouched(stats), "\(stats)")
                #expect(try admin.request(.snapshot(.with { $0.session = "s1" })).snapshot.seq == 0)
            }
        }
    }

    @Test("a shell subscribing to another session, to s/ or to everything receives nothing; an admin receives all")
    func subscriptionsAreChecked() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await withService(workers: 2, setup.configure) { server, endpoints in
            try await onThread {
                let admin = try setup.client(setup.admin, endpoints)
                let shell = try setup.client(setup.shell, endpoints)
                let everything = try admin.subscriber([""])
                let sub = try shell.subscriber(["s/s2/", "s/", "", "a/", "s/s1/"])
                // Applied: the admin's "" and the shell's "s/s1/"; refused: the other four.
                try waitUntil("egress saw the six subscriptions") {
                    try admin.request(.stats(.init())).stats.subscribers >= 2
                        && server.counters.subscriptionsForbidden.load >= 4
                }
                #expect(server.counters.subscriptionsForbidden.load == 4)
                // s2 first, seen by the admin; then s1: the shell's first message is s1's batch.
                try admin.request(.intent(wireIntent("a", [ScreenContext("settings")], session: "s2")))
                    .expectResolved()
                #expect(try everything.nextTopic(startingWith: "s/") == "s/s2/")
                try admin.request(.intent(wireIntent("b", [ScreenContext("settings")], session: "s1")))
                    .expectResolved()
                #expect(try everything.nextTopic(startingWith: "s/") == "s/s1/")
                let first = try sub.nextPublished()
                #expect(first.topic == "s/s1/")
                #expect(try sub.tryReceiveMultipart() == nil)
            }
        }
    }

    /// A secure service with an admin client and its steady subscriber to `s/s1/`, applied;
    /// `body` runs on a thread of its own.
    func withSteadySubscriber(
        _ body: @escaping @Sendable (SecureSetup, Engine, BoundEndpoints, Client, Socket) throws -> Void
    ) async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await withService(workers: 2, setup.configure) { server, endpoints in
            try await onThread {
                let admin = try setup.client(setup.admin, endpoints)
                let steady = try admin.subscriber(["s/s1/"])
                try waitUntil("the steady subscription is applied") {
                    try admin.request(.stats(.init())).stats.subscribers >= 1
                }
                try body(setup, server, endpoints, admin, steady)
            }
        }
    }

    @Test(
        "subscribers that vanish as soon as they subscribe, 300 times over while batches flow: the service stays up and a steady subscriber misses nothing"
    )
    func vanishingSubscribers() async throws {
        // The case libzmq 4.3.4 gets wrong in manual mode: a subscription read after its
        // connection ended (its pipe freed), often with the descriptor already reused by the
        // next connection. Egress must apply none of those (``ConnectionLedger``).
        try await withSteadySubscriber { setup, server, endpoints, admin, steady in
            // Each one completes its handshake (its subscriptions go out with it), then
            // closes: the service reads its subscriptions and its end about together.
            let shell = try setup.client(setup.shell, endpoints)
            var published = 0
            for round in 0..<300 {
                let sub = try Socket(admin.context, type: .sub)
                try sub.makeCurveClient(setup.shell, serverKey: setup.server.publicKey)
                try sub.set(.linger, .milliseconds(100))
                for topic in ["s/s1/", "r/s1/", "a/s1/"] { try sub.subscribe(topic) }
                try sub.monitor("inproc://vanishing-\(round)", events: .handshakeSucceeded)
                let events = try Socket(admin.context, type: .pair)
                try events.set(.receiveTimeout, .seconds(10))
                try events.connect("inproc://vanishing-\(round)")
                try sub.connect(endpoints.commands[0])
                do {
                    _ = try events.receiveMultipart()
                } catch {
                    throw TestFailure(
                        "round \(round): the subscriber's CURVE handshake did not succeed within 10 s (\(error))")
                }
                sub.close()
                events.close()
                if round % 10 == 0 {
                    let screen = published % 2 == 0 ? "chat" : "settings"
                    let info = screen == "chat" ? ["conversationId": "\(round)"] : [:]
                    try admin.request(
                        .intent(wireIntent("v\(round)", [ScreenContext(screen, info)], session: "s1"))
                    ).expectResolved()
                    published += 1
                }
            }
            var seqs: [UInt64] = []
            for index in 0..<published {
                let message: Published
                do {
                    message = try steady.nextPublished()
                } catch {
                    throw TestFailure(
                        "batch \(index + 1) of \(published) never reached the steady subscriber (seqs so far \(seqs)): \(error)"
                    )
                }
                #expect(message.topic == "s/s1/")
                seqs.append(message.header.seq)
            }
            #expect(seqs == Array(1...UInt64(published)), "every batch, in order")
            // Nothing of the vanished ones is held: the steady topic alone.
            try waitUntil("the vanished subscribers are forgotten") {
                try admin.request(.stats(.init())).stats.subscribers == 1
            }
            // Still serving, and a subscriber that stays is served: once its subscription is
            // applied, it receives every batch. (The count of topics cannot say when that is: a
            // vanished subscriber's subscriptions, read after the count went back to one while
            // its connection was still there, count the same topics for a moment.) Until it
            // receives one, each probe's batch may go out before its subscription is applied.
            let late = try shell.subscriber(["s/s1/", "r/s1/"])
            try late.set(.receiveTimeout, .milliseconds(200))
            var seq = UInt64(published)
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                seq += 1
                try admin.request(
                    .intent(
                        wireIntent("probe\(seq)", [ScreenContext(seq % 2 == 0 ? "settings" : "home")], session: "s1"))
                )
                .expectResolved()
                #expect(try steady.nextPublished().header.seq == seq)
                if let first = try? late.nextPublished() {
                    #expect(first.topic == "s/s1/" && first.header.seq == seq)
                    break
                }
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("the late subscriber received none of the batches \(published + 1)...\(seq)")
                }
            }
            try late.set(.receiveTimeout, .seconds(10))
            try admin.request(.intent(wireIntent("last", [ScreenContext("search")], session: "s1")))
                .expectResolved()
            #expect(try late.nextPublished().header.seq == seq + 1)
            #expect(try steady.nextPublished().header.seq == seq + 1)
            // The test did what it says: every vanishing subscriber was admitted (its
            // subscriptions reached the service).
            #expect(server.counters.authAdmitted.load >= 300)
        }
    }

    @Test(
        "a message that is not a subscription on the commands socket: its sender is dropped, nothing is applied meanwhile, others are served"
    )
    func strayMessages() async throws {
        // libzmq 4.3.4 queues such a message without its pipe: until its queue is read empty,
        // each subscription read would be applied to another connection's pipe.
        try await withSteadySubscriber { setup, server, endpoints, admin, steady in
            let xsub = try Socket(admin.context, type: .xsub)
            try xsub.makeCurveClient(setup.shell, serverKey: setup.server.publicKey)
            try xsub.set(.linger, .zero)
            try xsub.connect(endpoints.commands[0])
            for round in 0..<20 {
                try xsub.send([0x02] + Array("junk \(round)".utf8))
                try xsub.send([UInt8]())
                try xsub.send([0x01] + Array("s/s1/".utf8))
            }
            try waitUntil("the sender is dropped") { server.counters.subscribersDropped.load >= 1 }
            #expect(server.counters.subscriptionsForbidden.load >= 1)
            try admin.request(.intent(wireIntent("after", [ScreenContext("settings")], session: "s1")))
                .expectResolved()
            #expect(try steady.nextPublished().header.seq == 1)
            xsub.close()
        }
    }

    @Test("a producer of shop-* moves shop sessions only; every refusal is FORBIDDEN and changes nothing")
    func producersStayInTheirSessions() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await withService(workers: 2, setup.configure) { _, endpoints in
            try await onThread {
                let admin = try setup.client(setup.admin, endpoints)
                let audit = try admin.subscriber(["r/", "a/"])
                let producer = try setup.client(setup.producer, endpoints)
                let shell = try setup.client(setup.shell, endpoints)
                // Wait until egress applied the admin's two topics.
                try waitUntil("egress applied the admin's topics") {
                    try admin.request(.stats(.init())).stats.subscribers >= 2
                }
                let mine = try producer.request(
                    .intent(wireIntent("p1", [ScreenContext("settings")], session: "shop-1")))
                mine.expectResolved()
                let record = try audit.nextPublished()
                #expect(record.topic == "a/shop-1/")
                #expect(try record.audit.client == "shop-gateway")

                let refused = try producer.request(
                    .intent(wireIntent("p2", [ScreenContext("settings")], session: "other")))
                #expect(refused.rejected.code == .forbidden, "\(refused)")
                #expect(refused.rejected.message.contains("shop-gateway"))
                // Fire and forget: the rejection goes to the session's rejection stream.
                try producer.send(wireIntent("p3", [ScreenContext("settings")]), session: "other")
                let rejection = try audit.nextPublished()
                #expect(rejection.topic == "r/other/")
                #expect(try rejection.rejection.code == .forbidden)
                // A producer does not follow, a shell does not publish, neither reads stats.
                #expect(try producer.request(.snapshot(.with { $0.session = "shop-1" })).rejected.code == .forbidden)
                #expect(try producer.request(.stats(.init())).rejected.code == .forbidden)
                #expect(
                    try shell.request(.intent(wireIntent("p4", [ScreenContext("settings")], session: "s1"))).rejected
                        .code == .forbidden)
                #expect(try shell.request(.snapshot(.with { $0.session = "s1" })).snapshot.session == "s1")
                #expect(try shell.request(.snapshot(.with { $0.session = "s2" })).rejected.code == .forbidden)

                let other = try admin.request(.snapshot(.with { $0.session = "other" })).snapshot
                #expect(other.seq == 0)
                let stats = try admin.request(.stats(.init())).stats
                #expect(stats.sessions == 1)
                #expect(stats.rejectionsByCode["forbidden"] == 6)
            }
        }
    }

    @Test("a key removed from the access file (SIGHUP) stops working, on open connections too")
    func removedKeysStopWorking() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        try await withService(workers: 2, setup.configure) { server, endpoints in
            try await onThread {
                let admin = try setup.client(setup.admin, endpoints)
                let producer = try setup.client(setup.producer, endpoints)
                let shell = try setup.client(setup.shell, endpoints)
                let sub = try shell.subscriber(["s/s1/"])
                try waitUntil("egress applied the shell's topic") {
                    try admin.request(.stats(.init())).stats.subscribers >= 1
                }
                try producer.request(.intent(wireIntent("p1", [ScreenContext("settings")], session: "shop-1")))
                    .expectResolved()

                try setup.writeAccess(shell: false, producer: false)
                try server.reloadAccessFile()

                // The open connection: refused by name.
                let refused = try producer.request(
                    .intent(wireIntent("p2", [ScreenContext("home")], session: "shop-1")))
                #expect(refused.rejected.code == .forbidden)
                // A new connection with the removed key: no handshake.
                let again = try setup.client(setup.producer, endpoints, timeout: .milliseconds(500))
                #expect(timesOut { _ = try again.request(.stats(.init())) })
                // The removed shell's subscription is gone: egress dropped its connection.
                try waitUntil("egress dropped the removed shell's subscription") {
                    try admin.request(.stats(.init())).stats.subscribers == 0
                }
                try admin.request(.intent(wireIntent("a1", [ScreenContext("settings")], session: "s1")))
                    .expectResolved()
                try sub.set(.receiveTimeout, .milliseconds(300))
                #expect(timesOut { _ = try sub.nextPublished() })
            }
        }
    }

    @Test("secure mode does not start when its ZAP handler does not answer")
    func noHandlerNoStart() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let directory = temporaryDirectory("navsec-data")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TestService.configuration(dataDirectory: directory)
        setup.configure(&configuration)
        let server = try Engine(configuration: configuration, logger: TestService.logger("zap"))
        server.supervisor.inject(into: "nav-zap")
        await #expect {
            try await server.start()
        } throws: { error in
            String(describing: error).contains("nav-zap failed")
        }
        #expect(server.endpoints.intents.isEmpty, "no socket was bound")
    }

    @Test("the start-up probe fails when no ZAP handler answers")
    func probeWithoutHandler() async throws {
        try await onThread {
            let context = try Context()
            defer { context.shutdown() }
            #expect {
                try ZAPLoop.probe(context, timeout: .milliseconds(200))
            } throws: { error in
                "\(error)".contains("the ZAP handler did not answer within 0.2 seconds; secure mode cannot start")
            }
            // A REP that takes the request and never answers fails it the same way.
            let silent = try Socket(context, type: .rep)
            try silent.bind(ZAPLoop.endpoint)
            #expect(throws: EngineError.self) { try ZAPLoop.probe(context, timeout: .milliseconds(200)) }
        }
    }
}

@Suite("Access file")
struct AccessListTests {
    static let key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

    @Test("roles and sessions decide what a client may do and read")
    func rules() throws {
        let shell = AccessList.Client(name: "a", key: Self.key, role: .shell, sessions: ["alice", "team-*"])
        #expect(shell.may(.follow(session: "alice")))
        #expect(shell.may(.follow(session: "team-7")))
        #expect(!shell.may(.follow(session: "alice2")))
        #expect(!shell.may(.publish(session: "alice")))
        #expect(!shell.may(.inspect))
        for topic in ["s/alice/", "r/alice/", "s/team-", "s/team-7/", "s/team-x"] {
            #expect(shell.maySubscribe(to: topic), "\(topic)")
        }
        // Audit records name producers and sources: a shell reads them only if granted.
        for topic in [
            "", "s", "s/", "s/alice", "s/ali", "a/", "a/alice/", "a/team-7/", "a/bob/", "s/team", "x/alice/", "r/",
        ] {
            #expect(!shell.maySubscribe(to: topic), "\(topic)")
        }
        let auditor = AccessList.Client(
            name: "a", key: Self.key, role: .shell, sessions: ["alice", "team-*"], audit: true)
        for topic in ["a/alice/", "a/team-7/", "a/team-"] { #expect(auditor.maySubscribe(to: topic), "\(topic)") }
        for topic in ["a/", "a/bob/", "a/ali"] { #expect(!auditor.maySubscribe(to: topic), "\(topic)") }
        let producer = AccessList.Client(name: "p", key: Self.key, role: .producer, sessions: ["*"])
        #expect(producer.may(.publish(session: "anything")))
        #expect(!producer.may(.follow(session: "anything")))
        #expect(!producer.maySubscribe(to: "s/anything/"))
        let admin = AccessList.Client(name: "o", key: Self.key, role: .admin, sessions: [])
        #expect(admin.may(.inspect) && admin.maySubscribe(to: "") && admin.may(.publish(session: "x")))
    }

    @Test("deploy/access.example.yaml is a valid access file")
    func example() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/access.example.yaml").path
        let list = try AccessList.load(contentsOfFile: path)
        #expect(list.clients.map(\.name) == ["push-gateway", "alice-phone", "ops"])
        #expect(list.client(named: "ops")?.may(.inspect) == true)
    }

    @Test("every problem of an access file is reported with its line")
    func problems() {
        let text = """
            clients:
              - name: one
                key: "not a key"
                role: shell
                sessions: ["a"]
              - name: one
                key: "\(Self.key)"
                role: king
                sessions: ["a*b", "x/y"]
              - name: three
                key: "\(Self.key)"
                role: producer
                color: red
                audit: true
              - name: four
                key: "\(Self.key)"
                role: shell
                sessions: ["a"]
                audit: sometimes
            """
        #expect {
            _ = try AccessList.load(text, source: "access.yaml")
        } throws: { error in
            let text = "\(error)"
            return text.contains("access.yaml:3: client one: key must be a CURVE public key")
                && text.contains("access.yaml:6: client name one appears twice")
                && text.contains("access.yaml:8: client one: role \"king\" is unknown")
                && text.contains("access.yaml:9: client one: session \"a*b\" has * inside")
                && text.contains("access.yaml:9: client one: session \"x/y\": session id \"x/y\" contains \"/\"")
                && text.contains("access.yaml:11: client three: this key is another client's too")
                && text.contains("access.yaml:13: unknown key color of a client")
                && text.contains("access.yaml:10: client three: sessions must be a list")
                && text.contains("access.yaml:14: client three: audit is for shells")
                && text.contains("access.yaml:19: client four: audit \"sometimes\" is not true or false")
        }
    }
}

/// Waits (at most 10 s) until `condition` holds.
func waitUntil(_ what: String, _ condition: () throws -> Bool) throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting until \(what)") }
    }
}

extension Socket {
    /// The topic of the next published message whose topic starts with `prefix`.
    func nextTopic(startingWith prefix: String) throws -> String {
        while true {
            let message = try nextPublished()
            if message.topic.hasPrefix(prefix) { return message.topic }
        }
    }
}
