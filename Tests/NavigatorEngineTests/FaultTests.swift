import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Postgres
import Synchronization
import Testing

@testable import NavigatorEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The fault suite: real navigatord processes on a real PostgreSQL, under a steady load of
/// acknowledged intents (and fire-and-forget ones), while something goes wrong. Each case
/// asserts that no acknowledged intent is lost and that the instances converge. `./dev chaos`
/// runs it longer (`CHAOS_ROUNDS`); `./dev test` runs one round of each.
@Suite("Faults", .enabled(if: TestPostgres.enabled), .serialized)
struct FaultTests {
    /// Secure mode only (the configuration deployments run) unless `CHAOS_PLAIN=1`, which
    /// `./dev chaos` sets: plain mode too.
    static var modes: [Bool] { ProcessInfo.processInfo.environment["CHAOS_PLAIN"] == "1" ? [false, true] : [true] }

    static var rounds: Int { ProcessInfo.processInfo.environment["CHAOS_ROUNDS"].flatMap(Int.init) ?? 1 }

    /// The instance the shells' mirrors follow every session through (one each case leaves
    /// alone; a restarted instance comes back on another port).
    static let mirrorSlot = 0

    /// Three instances of one deployment on `url`, each a process with its HTTP server (for
    /// `/metrics`).
    final class Deployment: Sendable {
        let url: String
        let directory: URL
        let lease: Int
        let extra: [String]
        let daemons: Locked<[Daemon?]>
        let endpoints: Locked<[BoundEndpoints?]>
        let http: Locked<[String?]>
        /// Instances not to send to (paused, stopped).
        let away = Locked<Set<Int>>([])
        /// Secure mode: the shared server key and access file, and the clients' keys.
        let secure: SecureSetup?

        init(url: String, lease: Int = 2, count: Int = 3, extra: [String] = [], secure: SecureSetup? = nil) {
            self.url = url
            self.secure = secure
            self.lease = lease
            self.extra = extra
            directory = TestService.temporaryDirectory("navchaos")
            daemons = Locked(Array(repeating: nil, count: count))
            endpoints = Locked(Array(repeating: nil, count: count))
            http = Locked(Array(repeating: nil, count: count))
        }

        func start(_ slot: Int, extra more: [String] = []) async throws {
            let daemon = try Daemon(
                dataDirectory: directory.appendingPathComponent("n\(slot)"),
                extra: [
                    "--store", url, "--instance-id", "n\(slot)", "--lease-seconds", "\(lease)",
                    "--cluster-endpoint", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0",
                ] + (secure.map { ["--secret-key-file", $0.keyFile, "--access-file", $0.accessFile] } ?? []) + extra
                    + more)
            daemons.withLock { $0[slot] = daemon }
            let bound = try await daemon.endpoints()
            let address = try await daemon.httpAddress()
            endpoints.withLock { $0[slot] = bound }
            http.withLock { $0[slot] = address }
            away.withLock { _ = $0.remove(slot) }
        }

        func daemon(_ slot: Int) -> Daemon? { daemons.withLock { $0[slot] } }

        /// A client of `endpoint`: in secure mode the producer of `shop-*` (or the admin), as
        /// a platform team's producers and tools connect.
        func client(_ endpoint: BoundEndpoints, admin: Bool = false, linger: Duration = .zero) throws -> Client {
            let curve = secure.map { ((admin ? $0.admin : $0.producer), $0.server.publicKey) }
            return try Client(
                endpoint, sendTimeout: .seconds(2), receiveTimeout: .seconds(8), linger: linger, curve: curve)
        }

        /// The instances to send to now.
        var reachable: [BoundEndpoints] {
            let away = self.away.withLock { $0 }
            return endpoints.withLock { all in
                all.enumerated().compactMap { away.contains($0.offset) ? nil : $0.element }
            }
        }

        func reapAll() {
            for daemon in daemons.withLock({ $0 }) { daemon?.reap() }
            try? FileManager.default.removeItem(at: directory)
        }

        /// A metric of instance `slot` (the sum of its samples), from its `/metrics`.
        func metric(_ slot: Int, _ name: String) throws -> Double {
            guard let address = http.withLock({ $0[slot] }) else { throw TestFailure("instance \(slot) has no HTTP") }
            let text = try NavigatorTestSupport.http(address, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").body
            var total = 0.0
            for line in text.split(separator: "\n") where line.hasPrefix(name + " ") || line.hasPrefix(name + "{") {
                total += Double(line.split(separator: " ").last ?? "") ?? 0
            }
            return total
        }

        /// The status `/readyz` of instance `slot` answers with.
        func readiness(_ slot: Int) throws -> Int {
            guard let address = http.withLock({ $0[slot] }) else { throw TestFailure("instance \(slot) has no HTTP") }
            let status = try NavigatorTestSupport.http(address, "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .status
            return Int(status.split(separator: " ").dropFirst().first ?? "") ?? 0
        }

        /// The partitions `instance` holds now, from the lease table.
        func partitions(of instance: String) throws -> Set<Int32> {
            let rows = try PostgresConnection(url: url).execute(
                "SELECT partition FROM navigator_leases WHERE owner = $1 AND expires_at > now()", [.text(instance)])
            return Set(try (0..<rows.count).map { try rows[$0, 0].int32() })
        }

        /// Partitions each instance holds now, from the lease table.
        func leases() throws -> [String: Int] {
            let rows = try PostgresConnection(url: url).execute(
                "SELECT owner, count(*) FROM navigator_leases WHERE owner IS NOT NULL AND expires_at > now() GROUP BY owner"
            )
            var held: [String: Int] = [:]
            for row in 0..<rows.count { held[try rows[row, 0].text()] = Int(try rows[row, 1].int64()) }
            return held
        }

        /// For a lease wait that timed out: the lease table by owner (expired rows too), the
        /// locks held on it and the transactions holding them — what a claim waits behind.
        func leaseDiagnosis() -> String {
            do {
                let connection = try PostgresConnection(url: url)
                let owners = try connection.execute(
                    """
                    SELECT coalesce(owner, '-'), expires_at > now(), count(*),
                        round(extract(epoch FROM max(expires_at) - now())::numeric, 2)::text
                    FROM navigator_leases GROUP BY 1, 2 ORDER BY 1, 2
                    """)
                let locks = try connection.execute(
                    """
                    SELECT l.pid, l.mode, l.granted, coalesce(a.state, '?'),
                        coalesce(round(extract(epoch FROM now() - a.xact_start)::numeric, 2)::text, '-'),
                        coalesce(left(a.query, 120), '')
                    FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.relation = 'navigator_leases'::regclass ORDER BY l.pid
                    """)
                var text = "leases by owner (owner, live, partitions, latest expiry in s):"
                for row in 0..<owners.count {
                    text +=
                        " [\(try owners[row, 0].text()) \(try owners[row, 1].text()) \(try owners[row, 2].text()) \(try owners[row, 3].text())]"
                }
                text += "; locks on navigator_leases (pid, mode, granted, state, transaction age in s, query):"
                for row in 0..<locks.count {
                    text += "\n  " + (try (0..<6).map { try locks[row, $0].text() }.joined(separator: " | "))
                }
                return locks.count == 0 ? text + " none" : text
            } catch {
                return "the lease table could not be read: \(error)"
            }
        }
    }

    /// A steady load: acknowledged intents to `sessions`, each to the next reachable instance,
    /// retried (same id) on MOVED, UNAVAILABLE, OVERLOADED and on no answer, as clients do; the
    /// last acknowledged screen of each session is kept. Fire-and-forget intents go alongside.
    final class Load: Sendable {
        let sessions: [String]
        private let state = Locked<
            (acknowledged: [String: ScreenContext], sent: Int, retries: Int, refused: [String: Int])
        >(
            ([:], 0, 0, [:]))
        private let stopping = Atomic<Bool>(false)

        init(sessions: [String]) { self.sessions = sessions }

        var acknowledged: [String: ScreenContext] { state.withLock { $0.acknowledged } }
        var sent: Int { state.withLock { $0.sent } }
        var retries: Int { state.withLock { $0.retries } }
        /// The refusals that were retried, by code.
        var refused: [String: Int] { state.withLock { $0.refused } }

        func stop() { stopping.store(true, ordering: .releasing) }

        /// Runs until ``stop()``; throws if an intent cannot be acknowledged within `patience`.
        func run(_ deployment: Deployment, patience: Duration = .seconds(60)) async throws {
            var counter = 0
            while !stopping.load(ordering: .acquiring) {
                for session in sessions where !stopping.load(ordering: .acquiring) {
                    counter += 1
                    let target = ScreenContext("chat", ["conversationId": "\(counter)"])
                    let intent = wireIntent("load-\(counter)", [target], session: session)
                    let deadline = ContinuousClock.now + patience
                    var attempt = 0
                    while true {
                        let targets = deployment.reachable
                        guard !targets.isEmpty else {
                            try await Task.sleep(for: .milliseconds(50))
                            continue
                        }
                        let endpoint = targets[(counter + attempt) % targets.count]
                        attempt += 1
                        let number = counter
                        let reply = try? await onThread {
                            let client = try deployment.client(endpoint)
                            if number % 4 == 0 {
                                // A fire-and-forget one alongside (not asserted: not acknowledged).
                                // Sessions of their own: PUSH and DEALER are not ordered with each
                                // other, so a fire-and-forget intent must not race the checked ones.
                                let other = "shop-q\(number % 24)"
                                try? client.send(
                                    wireIntent("ff-\(number)", [ScreenContext("settings")], session: other),
                                    session: other)
                            }
                            return try client.request(.intent(intent))
                        }
                        if let reply, reply.rejected.code == .unspecified {
                            // Resolved, or a retry whose first try was taken: a duplicate.
                            #expect(
                                reply.resolved.hasBatch || reply.ignored.reason.contains("duplicate"),
                                "\(session): \(reply)")
                            state.withLock {
                                $0.acknowledged[session] = target
                                $0.sent += 1
                            }
                            break
                        }
                        let code = reply.map { "\($0.rejected.code)" } ?? "no answer"
                        state.withLock {
                            $0.retries += 1
                            $0.refused[code, default: 0] += 1
                        }
                        guard ContinuousClock.now < deadline else {
                            throw TestFailure("intent load-\(counter) for \(session) was not acknowledged: \(code)")
                        }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
        }
    }

    /// Shells following every session of the load through one instance (one the case leaves
    /// alone), as NavigatorClient's followers do (Clone pattern, resync on a new epoch): each
    /// mirror must end showing its session's last acknowledged screen.
    final class Mirrors: Sendable {
        let connection: NavigatorConnection
        private let tops = Locked<[String: ScreenContext]>([:])
        private let tasks = Locked<[Task<Void, Never>]>([])

        init(_ deployment: Deployment, slot: Int, sessions: [String]) async throws {
            let bound = try #require(deployment.endpoints.withLock { $0[slot] })
            var endpoints = ServerEndpoints(
                intents: bound.intents[0], requests: bound.requests[0], commands: bound.commands[0])
            if let secure = deployment.secure {
                endpoints.curve = CurveCredentials(keys: secure.admin, serverKey: secure.server.publicKey)
            }
            connection = try await NavigatorConnection(endpoints: endpoints, timeout: .seconds(5))
            for session in sessions {
                let events = connection.follow(.session(session))
                let task = Task { [weak self] in
                    do {
                        for try await event in events {
                            switch event {
                            case .snapshot(_, let position, let tree):
                                self?.record(session, tree.top.context)
                                self?.trace(
                                    session,
                                    "snapshot \(position.epoch):\(position.seq) \(tree.top.context.info["conversationId"] ?? "-")"
                                )
                            case .batch(_, let header, let tree):
                                self?.record(session, tree.top.context)
                                self?.trace(
                                    session,
                                    "batch \(header.epoch):\(header.seq) \(tree.top.context.info["conversationId"] ?? "-")"
                                )
                            case .gap(let expected, let received):
                                self?.trace(session, "gap \(expected) \(received)")
                            case .resync(let reason):
                                self?.trace(session, "resync \(reason)")
                            default: continue
                            }
                        }
                    } catch {
                        self?.failed(session, error)
                    }
                }
                tasks.withLock { $0.append(task) }
            }
        }

        private func record(_ session: String, _ top: ScreenContext) { tops.withLock { $0[session] = top } }
        /// Each mirror's last events, for the message of a mirror that did not converge.
        private let traces = Locked<[String: [String]]>([:])
        private func trace(_ session: String, _ event: String) {
            let at = ContinuousClock.now
            traces.withLock {
                $0[session, default: []].append("\(at) \(event)")
                if $0[session]!.count > 40 { $0[session]!.removeFirst() }
            }
        }
        private let errors = Locked<[String: String]>([:])
        private func failed(_ session: String, _ error: any Error) { errors.withLock { $0[session] = "\(error)" } }

        /// Waits until every mirror shows `expected`'s screen for its session.
        func converged(to expected: [String: ScreenContext], within: Duration = .seconds(30)) async throws {
            _ = try await waitFor(
                "the shells' mirrors did not converge", timeout: within, { self.tops.withLock { $0 } },
                until: { tops in expected.allSatisfy { tops[$0.key] == $0.value } },
                details: {
                    let tops = self.tops.withLock { $0 }
                    return "followers that failed: \(self.errors.withLock { $0 }); differing: "
                        + expected.filter { tops[$0.key] != $0.value }.keys.sorted().map {
                            "\($0) shows \(tops[$0]?.info["conversationId"] ?? "nothing"), expected \(expected[$0]?.info["conversationId"] ?? "?")"
                        }.joined(separator: "; ") + "\n"
                        + expected.filter { tops[$0.key] != $0.value }.keys.sorted().map {
                            "\($0):\n  " + (self.traces.withLock { $0 }[$0] ?? []).joined(separator: "\n  ")
                        }.joined(separator: "\n")
                })
        }

        func close() async {
            for task in tasks.withLock({ $0 }) { task.cancel() }
            await connection.close()
        }
    }

    /// Every session's snapshot, through each reachable instance, shows its last acknowledged
    /// screen (waited for: a session may be changing hands).
    static func converged(_ deployment: Deployment, _ load: Load, within: Duration = .seconds(30)) async throws {
        let expected = load.acknowledged
        let deadline = ContinuousClock.now + within
        for endpoint in deployment.reachable {
            for (session, target) in expected {
                while true {
                    let reply = try? await onThread {
                        try deployment.client(endpoint, admin: true).request(.snapshot(.with { $0.session = session }))
                    }
                    if let reply, case .snapshot(let snapshot)? = reply.kind {
                        #expect(
                            try snapshot.tree.core().top.context == target, "\(session) lost an acknowledged intent")
                        break
                    }
                    guard ContinuousClock.now < deadline else {
                        throw TestFailure("\(session) did not answer a snapshot: \(String(describing: reply))")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
    }

    /// Three instances on a database of their own, started and sharing the partitions, with a
    /// load running; `body` does the damage; then the load stops and every session is checked.
    static func underLoad(
        secure: Bool, extra: [String] = [], mirrorsThrough mirrorSlot: Int? = nil, on server: ScratchPostgres? = nil,
        _ body: (Deployment, Load) async throws -> Void
    ) async throws {
        let setup = secure ? try SecureSetup() : nil
        defer { setup?.remove() }
        func withDatabase(_ body: (String) async throws -> Void) async throws {
            if let server { try await body(server.url) } else { try await TestPostgres.withDatabase(body) }
        }
        try await withDatabase { url in
            let deployment = Deployment(url: url, extra: extra, secure: setup)
            defer { deployment.reapAll() }
            for slot in 0..<3 { try await deployment.start(slot) }
            try await shared(deployment)
            let load = Load(sessions: (0..<24).map { "shop-p\($0)" })
            let mirrors = try await mirrorSlot.asyncMap {
                try await Mirrors(deployment, slot: $0, sessions: load.sessions)
            }
            let running = Task { try await load.run(deployment) }
            do {
                try await body(deployment, load)
                try await Task.sleep(for: .seconds(1))
                load.stop()
                try await running.value
                try await converged(deployment, load)
                try await mirrors?.converged(to: load.acknowledged)
            } catch {
                load.stop()
                _ = try? await running.value
                await mirrors?.close()
                throw error
            }
            await mirrors?.close()
            #expect(load.sent > 0)
        }
    }

    /// Waits until the three instances share all 256 partitions.
    static func shared(_ deployment: Deployment, timeout: Duration = .seconds(30)) async throws {
        _ = try await waitForBlocking(
            "the partitions were not shared out", timeout: timeout, { (try? deployment.leases()) ?? [:] },
            until: { $0.count == 3 && $0.values.reduce(0, +) == 256 })
    }

    @Test(
        "an instance paused (SIGSTOP) past its lease under load, then resumed: the others take its sessions, its stale writes are fenced, it rejoins; no acknowledged intent is lost",
        arguments: FaultTests.modes)
    func pausedPastLease(secure: Bool) async throws {
        // A long write-behind interval keeps the paused instance's fire-and-forget changes
        // unwritten when it stops: resumed, it tries to write them after losing its leases.
        try await Self.underLoad(
            secure: secure, extra: ["--flush-interval-milliseconds", "3000"], mirrorsThrough: Self.mirrorSlot
        ) { deployment, load in
            for round in 0..<Self.rounds {
                let slot = 1 + round % 2
                let paused = try #require(deployment.daemon(slot))
                try await Task.sleep(for: .seconds(1))
                // Changes the paused instance has applied but not written yet (to sessions the
                // checks leave alone: fire-and-forget changes may or may not survive a fault).
                try await onThread {
                    let client = try deployment.client(
                        try #require(deployment.endpoints.withLock { $0[slot] }), linger: .seconds(2))
                    for k in 0..<48 {
                        try client.send(
                            wireIntent("stale-\(round)-\(k)", [ScreenContext("settings")], session: "shop-z\(k)"),
                            session: "shop-z\(k)")
                    }
                }
                // A session the instance about to be paused serves, to ask another instance for.
                let owned = try await onThread { try deployment.partitions(of: "n\(slot)") }
                let session = try #require(
                    (0..<10_000).lazy.map { "shop-f\(round)-\($0)" }.first {
                        owned.contains(Int32(StableHash.bucket(of: $0, count: 256)))
                    })
                deployment.away.withLock { _ = $0.insert(slot) }
                paused.signal(SIGSTOP)
                let pausedAt = ContinuousClock.now
                // Forwarded to the paused owner, it is answered UNAVAILABLE by the instance the
                // client reached (after 5 s), not left unanswered.
                async let answer = onThread { () throws -> (Navigator_V1_Reply, Duration) in
                    let client = try deployment.client(try #require(deployment.endpoints.withLock { $0[0] }))
                    let sent = ContinuousClock.now
                    let reply = try client.request(
                        .intent(wireIntent("forwarded-\(round)", [ScreenContext("settings")], session: session)))
                    return (reply, ContinuousClock.now - sent)
                }
                // The others claim its partitions once its leases ran out.
                _ = try await waitForBlocking(
                    "the paused instance's partitions were not claimed", timeout: .seconds(deployment.lease * 10),
                    { (try? deployment.leases()) ?? [:] },
                    until: { $0["n\(slot)"] == nil && $0.values.reduce(0, +) == 256 },
                    details: { deployment.leaseDiagnosis() })
                let claimedAfter = ContinuousClock.now - pausedAt
                let (forwarded, waited) = try await answer
                #expect(forwarded.rejected.code == .unavailable, "\(forwarded)")
                #expect(waited < .seconds(8), "answered after \(waited)")
                try await Task.sleep(for: .seconds(deployment.lease))
                paused.signal(SIGCONT)
                let resumedAt = ContinuousClock.now
                // It notices, lets go of everything it held, and claims its share again.
                _ = try await waitForBlocking(
                    "the resumed instance did not rejoin", timeout: .seconds(deployment.lease * 15),
                    { (try? deployment.leases()) ?? [:] },
                    until: { ($0["n\(slot)"] ?? 0) > 0 && $0.values.reduce(0, +) == 256 },
                    details: { deployment.leaseDiagnosis() })
                let rejoinedAfter = ContinuousClock.now - resumedAt
                deployment.away.withLock { _ = $0.remove(slot) }
                let fenced = try await onThread { try deployment.metric(slot, "navigator_fenced_writes_total") }
                print(
                    "faults\(deployment.secure == nil ? "" : " (secure)"): paused n\(slot) for \(ContinuousClock.now - pausedAt); claimed by the others after \(claimedAfter), rejoined \(rejoinedAfter) after resuming; its fenced writes \(Int(fenced)); acknowledged so far \(load.sent), retried \(load.refused)"
                )
                #expect(paused.process.isRunning, "the resumed instance stopped:\n\(paused.log)")
            }
        }
    }

    @Test(
        "kill -9 of an instance while it stops (SIGTERM: draining, writing, handing its partitions over): the others serve its sessions, it restarts and rejoins; no acknowledged intent is lost",
        arguments: FaultTests.modes)
    func killedDuringHandOver(secure: Bool) async throws {
        try await Self.underLoad(secure: secure, mirrorsThrough: Self.mirrorSlot) { deployment, load in
            for round in 0..<Self.rounds {
                let slot = 1 + round % 2
                let victim = try #require(deployment.daemon(slot))
                try await Task.sleep(for: .seconds(1))
                deployment.away.withLock { _ = $0.insert(slot) }
                let stoppedAt = ContinuousClock.now
                victim.signal(SIGTERM)
                // While it stops — draining, writing or handing its partitions over, depending on
                // the round's delay: whichever step it is in, nothing acknowledged may be lost.
                try await victim.wait(for: "stopping", timeout: .seconds(10))
                try await Task.sleep(for: .milliseconds([0, 30, 120][round % 3]))
                victim.signal(SIGKILL)
                _ = try await victim.exitStatus()
                victim.reap()
                _ = try await waitForBlocking(
                    "the killed instance's partitions were not claimed", timeout: .seconds(deployment.lease * 10),
                    { (try? deployment.leases()) ?? [:] },
                    until: { $0["n\(slot)"] == nil && $0.values.reduce(0, +) == 256 },
                    details: { deployment.leaseDiagnosis() })
                let claimedAfter = ContinuousClock.now - stoppedAt
                try await deployment.start(slot)
                try await Self.shared(deployment, timeout: .seconds(deployment.lease * 15))
                print(
                    "faults\(secure ? " (secure)" : ""): killed n\(slot) while stopping; its partitions all served again after \(claimedAfter), back in \(ContinuousClock.now - stoppedAt); acknowledged so far \(load.sent), retried \(load.refused)"
                )
            }
        }
    }

    @Test(
        "a rolling restart of the three instances under load, one after the other: every session stays served and no acknowledged intent is lost",
        arguments: FaultTests.modes)
    func rollingRestart(secure: Bool) async throws {
        try await Self.underLoad(secure: secure) { deployment, load in
            for round in 0..<Self.rounds {
                let started = ContinuousClock.now
                for slot in 0..<3 {
                    let daemon = try #require(deployment.daemon(slot))
                    deployment.away.withLock { _ = $0.insert(slot) }
                    daemon.signal(SIGTERM)
                    #expect(try await daemon.exitStatus() == 0, "n\(slot) did not stop cleanly:\n\(daemon.log)")
                    daemon.reap()
                    try await deployment.start(slot)
                    try await Self.shared(deployment, timeout: .seconds(deployment.lease * 15))
                    try await Task.sleep(for: .seconds(1))  // traffic through the restarted instance
                }
                print(
                    "faults\(secure ? " (secure)" : ""): rolling restart \(round + 1) took \(ContinuousClock.now - started); acknowledged so far \(load.sent), retried \(load.refused)"
                )
            }
        }
    }
}

extension FaultTests {
    /// How the database goes away in ``databaseLost(secure:how:)``.
    enum Outage: String, CustomTestStringConvertible, CaseIterable {
        case stopped = "stopped for 10 s"
        case killed = "killed (SIGKILL), restarted 5 s later"
        var testDescription: String { rawValue }
    }

    static var outages: [(Bool, Outage)] { modes.flatMap { mode in Outage.allCases.map { (mode, $0) } } }

    @Test(
        "PostgreSQL stopped for 10 s, or killed -9 and restarted 5 s later, under load: the instances stay up, refuse while they cannot write, claim the partitions again and serve; no acknowledged intent is lost",
        arguments: FaultTests.outages)
    func databaseLost(secure: Bool, how outage: Outage) async throws {
        let server = try await ScratchPostgres.start()
        do {
            try await lose(server, secure: secure, how: outage)
        } catch {
            await server.remove()
            throw error
        }
        await server.remove()
    }

    private func lose(_ server: ScratchPostgres, secure: Bool, how outage: Outage) async throws {
        try await Self.underLoad(secure: secure, mirrorsThrough: Self.mirrorSlot, on: server) { deployment, load in
            for _ in 0..<Self.rounds {
                try await Task.sleep(for: .seconds(1))
                let before = load.sent
                let lostAt = ContinuousClock.now
                switch outage {
                case .stopped:
                    try await server.halt()
                    try await Task.sleep(for: .seconds(10))
                case .killed:
                    // Down past the lease (2 s): the instances lose their partitions too.
                    try await server.kill()
                    try await Task.sleep(for: .seconds(5))
                }
                let during = load.sent - before
                // Past the lease without the database, no instance is ready (a load balancer
                // takes them out); each says so on /readyz.
                let readiness = try await onThread { try (0..<3).map { try deployment.readiness($0) } }
                #expect(readiness == [503, 503, 503], "/readyz during the outage: \(readiness)")
                try await server.resume()
                let backAt = ContinuousClock.now
                try await Self.shared(deployment, timeout: .seconds(deployment.lease * 15))
                let sharedAfter = ContinuousClock.now - backAt
                // Acknowledged intents again, through every instance.
                let resumed = load.sent
                _ = try await waitFor(
                    "no intent was acknowledged after the database came back", timeout: .seconds(30), { load.sent },
                    until: { $0 >= resumed + 12 }, details: { "" })
                _ = try await waitForBlocking(
                    "an instance did not become ready again", timeout: .seconds(30),
                    { (0..<3).map { (try? deployment.readiness($0)) ?? 0 } }, until: { $0 == [200, 200, 200] })
                var failures: [Double] = []
                var rolloutFailures: [Double] = []
                for slot in 0..<3 {
                    let daemon = try #require(deployment.daemon(slot))
                    #expect(daemon.process.isRunning, "n\(slot) stopped when the database went away:\n\(daemon.log)")
                    failures.append(
                        try await onThread { try deployment.metric(slot, "navigator_lease_renewals_failed_total") })
                    rolloutFailures.append(
                        try await onThread { try deployment.metric(slot, "navigator_rollout_store_failures_total") })
                }
                if case .stopped = outage {
                    #expect(failures.allSatisfy { $0 > 0 }, "lease renewals failed: \(failures)")
                    // The rollout's row is read each second by every instance of several.
                    #expect(rolloutFailures.allSatisfy { $0 > 0 }, "rollout rounds failed: \(rolloutFailures)")
                }
                print(
                    "faults\(secure ? " (secure)" : ""): database \(outage.rawValue): out for \(backAt - lostAt), acknowledged meanwhile \(during); partitions all held again \(sharedAfter) after it was back; failed lease rounds \(failures.map { Int($0) }), failed rollout rounds \(rolloutFailures.map { Int($0) }); acknowledged so far \(load.sent), retried \(load.refused)"
                )
            }
        }
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
