import Foundation
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import NavigatorWire
import Testing
import ZeroMQ

@testable import NavigatorEngine
@testable import navigatord

/// Staged rollouts of a route map (issue 33): the split by a stable hash, kept across restarts
/// and shared by instances; promote, rollback, reload; the automatic rollback.
@Suite("Route map rollouts")
struct RolloutTests {
    /// deploy/routes.example.yaml as the map in use, and two candidates: without `mediaViewer`
    /// (it refuses intents for it UNKNOWN_SCREEN), and with a screen `promo` the map in use does
    /// not have (it refuses those): either tells which map decided an intent. The split tests
    /// use `promo`, so that only the candidate's share makes sessions (the others are refused),
    /// keeping 10,000 sessions' worth of intents light on a machine running the whole suite.
    static func maps(in directory: URL) throws -> (routes: String, candidate: String) {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/routes.example.yaml")
        let text = try String(contentsOf: example, encoding: .utf8)
        let start = try #require(text.range(of: "  mediaViewer:\n"))
        let end = try #require(text.range(of: "  reactions:\n"))
        let path = directory.appendingPathComponent("routes.yaml").path
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return (path, text.replacingCharacters(in: start.lowerBound..<end.lowerBound, with: ""))
    }

    static func promoMap(_ routes: String) throws -> String {
        try String(contentsOfFile: routes, encoding: .utf8) + "  promo:\n    transition: modal\n"
    }

    static func promo(_ id: String, session: String) -> Navigator_V1_Intent {
        wireIntent(id, [ScreenContext("promo")], session: session)
    }

    static let sessions = (0..<10_000).map { "s\($0)" }

    /// The sessions a rollout of `candidate` gives it at `percent` (what every instance computes).
    static func chosen(_ candidate: String, percent: Int) -> Set<String> {
        let version = RouteMapVersion.of(text: candidate)
        return Set(sessions.filter { RouteMapVersion.bucket(of: $0, salt: version) < percent * 100 })
    }

    static func startBody(_ candidate: String, share: Double, extra: String = "") throws -> String {
        let yaml = String(decoding: try JSONEncoder().encode(candidate), as: UTF8.self)
        return #"{"yaml":\#(yaml),"source":"candidate.yaml","sharePercent":\#(share)\#(extra)}"#
    }

    static func mediaViewer(_ id: String, session: String) -> Navigator_V1_Intent {
        wireIntent(id, [ScreenContext("mediaViewer", ["mediaId": "m"])], session: session)
    }

    /// The sessions of the rejections `subscribers` get until `count` have come (bounded by
    /// their receive timeouts), then whatever else is there already.
    static func rejectedSessions(_ subscribers: [Socket], count: Int) throws -> Set<String> {
        var sessions = Set<String>()
        var frames: [Message] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while sessions.count < count, ContinuousClock.now < deadline {
            var any = false
            for subscriber in subscribers {
                while let received = try subscriber.receiveMultipart(into: &frames, wait: false), received > 0 {
                    any = true
                    if let parsed = Topic.parse(frames[0].string), parsed.kind == .rejection {
                        sessions.insert(parsed.session)
                    }
                }
            }
            if !any { Thread.sleep(forTimeInterval: 0.005) }
        }
        return sessions
    }

    static func status(_ address: String) throws -> Navigator_V1_Rollout {
        try api(address, "GET", "/v1/routes/rollout").reply.routesRollout
    }

    /// Waits until the instances' figures count `total` intents in all (both maps), or until
    /// `settled` says a status will count no more (a rollout's figures freeze once it ends).
    static func waitForIntents(
        _ addresses: [String], total: UInt64, settled: (Navigator_V1_Rollout) -> Bool = { _ in false }
    ) async throws -> [Navigator_V1_Rollout] {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let statuses = try await onThread { try addresses.map { try status($0) } }
            let counted = statuses.flatMap(\.maps).reduce(0) { $0 + $1.intents }
            if counted >= total || statuses.allSatisfy(settled) { return statuses }
            guard ContinuousClock.now < deadline else {
                throw TestFailure("the instances counted \(counted) of \(total) intents: \(statuses)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test(
        "a 10% rollout over 10,000 sessions: the share within 1%, the same sessions after a restart; promoted, kept across a restart, ended by a reload of a changed file"
    )
    func split() async throws {
        let directory = temporaryDirectory("navroll")
        defer { try? FileManager.default.removeItem(at: directory) }
        let routes = try Self.maps(in: directory).routes
        let candidate = try Self.promoMap(routes)
        let data = directory.appendingPathComponent("data")
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = { $0.engine.routeMapPath = routes }
        let chosen = Self.chosen(candidate, percent: 10)
        // The hash spreads: 10% of 10,000 within 100 either way (it is 3.3 standard deviations).
        #expect(abs(chosen.count - 1_000) <= 100, "\(chosen.count) of 10,000 sessions chosen")
        let version = RouteMapVersion.of(text: candidate)
        let inside = try #require(chosen.first)
        let outside = try #require(Self.sessions.first { !chosen.contains($0) })
        @Sendable func askPromo(_ address: String, _ id: String, _ session: String) throws -> (
            status: Int, head: String, reply: Navigator_V1_Reply
        ) {
            try api(
                address, "POST", "/v1/intents?wait=true",
                body: #"{"id":"\#(id)","session":"\#(session)","path":[{"screen":"promo"}]}"#)
        }

        for run in 0..<2 {
            try await withNavigatord(dataDirectory: data, configure) { server, endpoints in
                let address = try #require(server.httpAddress)
                let (rejected, status) = try await onThread {
                    let client = try Client(endpoints)
                    if run == 0 {
                        // Refusals first: nothing to promote; a share out of range; a status
                        // request that carries a candidate.
                        let promote = try api(address, "POST", "/v1/routes/rollout/promote")
                        #expect(promote.status == 409 && promote.reply.rejected.code == .conflict)
                        #expect(promote.reply.rejected.message.hasPrefix("no rollout is under way to promote"))
                        let share = try api(
                            address, "POST", "/v1/routes/rollout", body: try Self.startBody(candidate, share: 0))
                        #expect(share.status == 400 && share.reply.rejected.code == .invalidRequest)
                        let status = try client.request(
                            .routesRollout(
                                .with {
                                    $0.yaml = candidate
                                    $0.sharePercent = 10
                                }))
                        #expect(status.rejected.code == .invalidRequest, "\(status)")
                        let started = try api(
                            address, "POST", "/v1/routes/rollout", body: try Self.startBody(candidate, share: 10))
                        #expect(started.status == 200, "\(started.reply)")
                        let rollout = started.reply.routesRollout
                        #expect(rollout.phase == .rolling && rollout.candidateVersion == version)
                        #expect(rollout.check.valid && rollout.check.changes.count == 1, "\(rollout.check)")
                        let again = try api(
                            address, "POST", "/v1/routes/rollout", body: try Self.startBody(candidate, share: 20))
                        #expect(
                            again.status == 409
                                && again.reply.rejected.message.hasPrefix("a rollout is under way already"))
                    } else {
                        #expect(try Self.status(address).phase == .rolling)  // kept across the restart
                    }
                    let subscriber = try client.subscribe("r/")
                    for session in Self.sessions {
                        try client.send(Self.promo("m\(run)-\(session)", session: session), session: session)
                    }
                    let refused = try Self.rejectedSessions([subscriber], count: Self.sessions.count - chosen.count)
                    return (Set(Self.sessions).subtracting(refused), try Self.status(address))
                }
                // Exactly the chosen sessions were not refused: the candidate has `promo`.
                #expect(rejected == chosen, "\(rejected.symmetricDifference(chosen).count) sessions differ")
                let figures = try await Self.waitForIntents([address], total: 10_000)[0].maps
                #expect(figures.map(\.role) == ["in use", "candidate"])
                #expect(figures[1].version == version && figures[1].intents == UInt64(chosen.count))
                #expect(figures[1].rejected == 0 && figures[1].rejectionRate == 0)
                #expect(figures[0].intents == UInt64(10_000 - chosen.count))
                #expect(figures[0].rejected == figures[0].intents && figures[0].rejectionRate == 1)
                #expect(status.summary.hasPrefix("candidate \(version) (candidate.yaml) for 10% of sessions"))

                guard run == 1 else { return }
                // Promoted: every session resolves with the candidate. A reload of the same file
                // (a SIGHUP for the access file, say) leaves it so.
                try await onThread {
                    let promoted = try api(address, "POST", "/v1/routes/rollout/promote")
                    #expect(promoted.reply.routesRollout.phase == .promoted, "\(promoted.reply)")
                    #expect(try askPromo(address, "p1", outside).status == 200)
                    try server.engine.reloadRouteMap()
                    #expect(try Self.status(address).phase == .promoted)
                }
            }
        }
        // A restart keeps the promoted map; a reload of a changed file ends it, for good.
        try await withNavigatord(dataDirectory: data, configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                #expect(try Self.status(address).phase == .promoted)
                #expect(try askPromo(address, "p2", outside).status == 200)
                let text = try String(contentsOfFile: routes, encoding: .utf8)
                try (text + "# reviewed\n").write(toFile: routes, atomically: true, encoding: .utf8)
                try server.engine.reloadRouteMap()
                let ended = try Self.status(address)
                #expect(ended.phase == .ended && ended.note.hasPrefix("ended by a reload (SIGHUP)"), "\(ended)")
                let refused = try askPromo(address, "p3", inside)
                #expect(refused.reply.rejected.code == .unknownScreen, "\(refused.reply)")
            }
        }
        try await withNavigatord(dataDirectory: data, configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread { () throws in
                #expect(try Self.status(address).phase == .ended)
                #expect(try askPromo(address, "p4", inside).reply.rejected.code == .unknownScreen)
            }
        }
    }

    @Test(
        "a candidate within the margin stays; one that rejects more than the margin allows is rolled back by itself")
    func automaticRollback() async throws {
        let directory = temporaryDirectory("navrollback")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (routes, candidate) = try Self.maps(in: directory)
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = { $0.engine.routeMapPath = routes }
        let harmless = try String(contentsOfFile: routes, encoding: .utf8) + "# the same map, another text\n"
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let keeper = server.engine.rolloutKeeper
            let margin = #","rollbackMarginPercent":5,"rollbackAfterIntents":50"#
            /// Starts `map` for half the sessions, sends 400 intents, and waits for a round that saw them all.
            func roll(_ map: String, _ prefix: String) async throws -> Navigator_V1_Rollout {
                try await onThread {
                    let started = try api(
                        address, "POST", "/v1/routes/rollout", body: try Self.startBody(map, share: 50, extra: margin))
                    #expect(started.reply.routesRollout.phase == .rolling, "\(started.reply)")
                    let client = try Client(endpoints)
                    for session in Self.sessions.prefix(400) {
                        try client.send(Self.mediaViewer("\(prefix)-\(session)", session: session), session: session)
                    }
                }
                // The candidate that rejects may be rolled back before all 400 are counted: its
                // figures stop there.
                _ = try await Self.waitForIntents([address], total: 400) { $0.phase == .rolledBack }
                let seen = keeper.rounds.load(ordering: .acquiring)
                let deadline = ContinuousClock.now + .seconds(30)
                while keeper.rounds.load(ordering: .acquiring) < seen + 2 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("no round judged the figures") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return try await onThread { try Self.status(address) }
            }
            // The same map in another text: no more rejections than the map in use: it stays.
            let stays = try await roll(harmless, "h")
            #expect(stays.phase == .rolling && stays.maps[1].intents > 50, "\(stays)")
            #expect(try await onThread { try api(address, "POST", "/v1/routes/rollout/rollback").status } == 200)
            // Without mediaViewer: every intent of its share refused: rolled back.
            let status = try await roll(candidate, "a")
            #expect(status.phase == .rolledBack, "\(status)")
            #expect(status.note.hasPrefix("rolled back automatically on instance"), "\(status.note)")
            #expect(status.note.contains("more than the margin of 5 percentage points"), "\(status.note)")
            // Every session resolves with the map in use again.
            let inside = try #require(Self.chosen(candidate, percent: 50).first)
            let shown = try await onThread {
                try api(
                    address, "POST", "/v1/intents?wait=true",
                    body:
                        #"{"id":"after","session":"\#(inside)","path":[{"screen":"mediaViewer","info":{"mediaId":"m"}}]}"#
                )
            }
            #expect(shown.status == 200, "\(shown.reply)")
        }
    }

    @Test(
        "three instances on PostgreSQL apply the same split; a rollback on one reaches the others",
        .enabled(if: TestPostgres.enabled))
    func acrossInstances() async throws {
        let directory = temporaryDirectory("navrollpg")
        defer { try? FileManager.default.removeItem(at: directory) }
        let routes = try Self.maps(in: directory).routes
        let candidate = try Self.promoMap(routes)
        let chosen = Self.chosen(candidate, percent: 10)
        try await TestPostgres.withDatabase { url in
            let configure: (inout NavigatordConfiguration) -> Void = {
                $0.engine.routeMapPath = routes
                $0.engine.leaseSeconds = 2
            }
            try await withNavigatords(["a", "b", "c"], url: url, configure) { navigators in
                let engines = navigators.map(\.engine)
                let addresses = try navigators.map { try #require($0.httpAddress) }
                // Every partition served, by all three.
                let deadline = ContinuousClock.now + .seconds(30)
                while engines.map({ $0.store.ownership!.served.count }).reduce(0, +) != 256
                    || engines.contains(where: { $0.store.ownership!.served.isEmpty })
                {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the partitions were not split") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let started = try await onThread {
                    try api(addresses[1], "POST", "/v1/routes/rollout", body: try Self.startBody(candidate, share: 10))
                }
                #expect(started.reply.routesRollout.phase == .rolling, "\(started.reply)")
                // The others follow the row within a round.
                while try await onThread({ try addresses.map { try Self.status($0).phase } }) != [
                    .rolling, .rolling, .rolling,
                ] {
                    guard ContinuousClock.now < deadline + .seconds(10) else {
                        throw TestFailure("not every instance took the rollout up")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                let rejected = try await onThread {
                    let clients = try engines.map { try Client($0.endpoints) }
                    let subscribers = try clients.map { try $0.subscribe("r/") }
                    // Each session's intent to the instance that serves it.
                    for session in Self.sessions {
                        let owner = try #require(
                            engines.firstIndex {
                                $0.store.ownership!.serves($0.store.ownership!.partition(of: session))
                            })
                        try clients[owner].send(Self.promo("m-\(session)", session: session), session: session)
                    }
                    let refused = try Self.rejectedSessions(subscribers, count: Self.sessions.count - chosen.count)
                    return Set(Self.sessions).subtracting(refused)
                }
                // Exactly the chosen sessions were not refused, whichever instance served them.
                #expect(rejected == chosen, "\(rejected.symmetricDifference(chosen).count) sessions differ")
                let statuses = try await Self.waitForIntents(addresses, total: 10_000)
                let candidateIntents = statuses.map { $0.maps[1].intents }
                #expect(candidateIntents.reduce(0, +) == UInt64(chosen.count), "\(candidateIntents)")
                #expect(candidateIntents.allSatisfy { $0 > 0 }, "every instance resolved some: \(candidateIntents)")

                /// Waits until every instance says `phase`.
                func everywhere(_ phase: Navigator_V1_RolloutPhase) async throws {
                    let deadline = ContinuousClock.now + .seconds(20)
                    while try await onThread({ try addresses.map { try Self.status($0).phase } }) != [
                        phase, phase, phase,
                    ] {
                        guard ContinuousClock.now < deadline else {
                            throw TestFailure("not every instance is \(phase)")
                        }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                }
                // Rolled back on the third: the first and second follow.
                let back = try await onThread { try api(addresses[2], "POST", "/v1/routes/rollout/rollback") }
                #expect(back.reply.routesRollout.phase == .rolledBack, "\(back.reply)")
                try await everywhere(.rolledBack)
                // Started again and promoted: everywhere; a reload of a changed file on one ends it
                // everywhere.
                try await onThread {
                    _ = try api(
                        addresses[0], "POST", "/v1/routes/rollout", body: try Self.startBody(candidate, share: 10))
                    _ = try api(addresses[1], "POST", "/v1/routes/rollout/promote")
                }
                try await everywhere(.promoted)
                let text = try String(contentsOfFile: routes, encoding: .utf8)
                try (text + "# reviewed\n").write(toFile: routes, atomically: true, encoding: .utf8)
                _ = try await onThread { try engines[2].reloadRouteMap() }
                try await everywhere(.ended)
            }
        }
    }
}
