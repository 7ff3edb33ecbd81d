import ArgumentParser
import NavigatorClient
import NavigatorCore
import NavigatorWire
import NavigatorYAML
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Navctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "navctl",
        abstract: "Terminal client for Navigator: send intents, ask why, look at sessions, watch them change.",
        discussion: """
            Talks to a running navigatord (see --requests, --intents, --commands; the defaults \
            match navigatord's; against a secure navigatord, --server-key and --key-file). Every \
            command gives up with an error after --timeout if navigatord does not answer.

            Exit status: 0 done; 1 no answer, or another failure; 2 a key file or server key \
            that cannot be used; 3 navigatord refused (an intent that was or would be rejected, a \
            refused request); 64 a command-line mistake.
            """,
        version: "0.1.0",
        subcommands: [
            Send.self, Explain.self, Snapshot.self, Watch.self, Shell.self, Condition.self, Stats.self, Routes.self,
            Keygen.self, Token.self,
        ]
    )
}

/// Connection options shared by every command.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "navigatord's intents endpoint (PUSH).")
    var intents = "tcp://127.0.0.1:7401"

    @Option(help: "navigatord's requests endpoint (DEALER).")
    var requests = "tcp://127.0.0.1:7402"

    @Option(help: "navigatord's commands endpoint (SUB).")
    var commands = "tcp://127.0.0.1:7403"

    @Option(help: "Seconds to wait for navigatord before giving up.")
    var timeout: Double = 2

    @Option(
        help: ArgumentHelp(
            "Secure mode: navigatord's public key, as 40 Z85 characters or a file holding them (navigatord prints it at start). [env: NAVIGATOR_SERVER_KEY]",
            valueName: "key"))
    var serverKey: String?

    @Option(
        help: ArgumentHelp(
            "Secure mode: this client's secret key file, mode 0600 (navctl keygen writes one; its public key goes in navigatord's access file). [env: NAVIGATOR_KEY_FILE]",
            valueName: "file"))
    var keyFile: String?

    func validate() throws {
        guard timeout > 0, timeout <= 600 else {
            throw ValidationError("--timeout \(timeout) is out of range; expected 0 < seconds <= 600")
        }
        for (option, endpoint) in [("--intents", intents), ("--requests", requests), ("--commands", commands)] {
            if let problem = Endpoint.problem(with: endpoint) {
                throw ValidationError("\(option) \(endpoint): \(problem)")
            }
        }
    }

    func connect() async throws -> NavigatorConnection {
        try await NavigatorConnection(
            endpoints: ServerEndpoints(
                intents: intents, requests: requests, commands: commands,
                curve: try CurveCredentials.fromOptions(serverKey: serverKey, keyFile: keyFile)),
            timeout: .milliseconds(Int(timeout * 1000)))
    }
}

/// The intent options shared by send and explain.
struct IntentOptions: ParsableArguments {
    // Optional to the parser, so that a misspelt option among the words is reported (with a
    // suggestion) before a missing --session; required by `validate()`.
    @Option(help: "The session to navigate (required).")
    var session: String?

    @Option(help: "A deep link instead of a screen, e.g. app://chat/42.")
    var url: String?

    @Option(help: "Intent id (idempotency key); a fresh one by default.")
    var id: String?

    @Option(help: "normal, high or critical (critical may dismiss a blocking modal).")
    var priority: String = "normal"

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Milliseconds the intent may wait parked (0: the service's default).", valueName: "ms"))
    var ttl: String = "0"

    @Flag(help: "Ask the shell not to animate.")
    var noAnimate = false

    @Flag(help: "Hold the intent (within --ttl) until the session's shell says it is ready.")
    var waitForReady = false

    @Option(
        name: .customLong("set"),
        help: ArgumentHelp(
            "Set a session condition before resolving, e.g. --set authenticated=true (repeatable).",
            valueName: "name=true|false"))
    var conditions: [String] = []

    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("SCREEN key=value... [--then SCREEN key=value...]", valueName: "screen"))
    var words: [String] = []

    /// Checked while parsing, so a mistake is shown with this command's usage.
    func validate() throws { _ = try intent() }

    /// The options `words` may hold by mistake (a misspelt one is suggested from these).
    static let optionNames = [
        "--session", "--url", "--id", "--priority", "--ttl", "--no-animate", "--wait-for-ready", "--set", "--then",
        "--wait", "--listen", "--intents", "--requests", "--commands", "--timeout", "--server-key", "--key-file",
    ]

    func intent() throws -> Intent {
        let path: [ScreenContext]
        do {
            path = try IntentWords.path(words, options: Self.optionNames)
        } catch {
            throw ValidationError(error.description)
        }
        guard let session else { throw ValidationError("missing --session S: the session to navigate") }
        if let problem = SessionID.problem(with: session) { throw ValidationError("--session: \(problem)") }
        guard let ttl = UInt32(self.ttl) else {
            throw ValidationError("--ttl \(self.ttl) is not a whole number of milliseconds from 0 to 4294967295")
        }
        let setConditions = try Conditions.parse(conditions, option: "--set")
        guard let level = ["normal": Intent.Priority.normal, "high": .high, "critical": .critical][priority] else {
            throw ValidationError("--priority \(priority) is unknown; expected normal, high or critical")
        }
        if url != nil && !path.isEmpty { throw ValidationError("give a screen or --url, not both") }
        guard url != nil || !path.isEmpty else {
            throw ValidationError("missing the screen: give SCREEN key=value... or --url URL")
        }
        return Intent(
            id: id ?? "navctl-\(UInt64.random(in: 0...UInt64.max))", session: session,
            target: url.map { .url($0) } ?? .path(path), animated: !noAnimate, source: "navctl", priority: level,
            ttlMilliseconds: ttl, sentAt: wallClockNanos(), setConditions: setConditions, waitForReady: waitForReady)
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish an intent (fire and forget), or with --wait resolve it and print the outcome.",
        discussion:
            "Example: navctl send --session s1 chat conversationId=42 --then thread conversationId=42 threadId=7")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var intent: IntentOptions

    @Flag(help: "Send as an acknowledged request and print the outcome, the batch and why.")
    var wait = false

    @Option(
        help: ArgumentHelp(
            "Without --wait: seconds to listen on the session's rejections after sending (0: do not listen).",
            valueName: "seconds"))
    var listen: Double = 1

    func validate() throws {
        guard listen >= 0, listen <= 600 else {
            throw ValidationError("--listen \(listen) is out of range; expected 0 to 600 seconds")
        }
    }

    func run() async throws {
        let intent = try self.intent.intent()
        try await withConnection(connection) { client in
            if wait {
                let reply = try await client.acknowledged(intent)
                printLines(TreeText.reply(reply))
                if case .rejected? = reply.kind { throw ExitCode(3) }
                return
            }
            guard listen > 0 else {
                try await client.send(intent)
                print("sent \(intent.id) to session \(intent.session)")
                return
            }
            // Listen first, on a connection made, so that a rejection published at once is not
            // missed.
            let rejections = client.follow(.rejections(intent.session))
            await client.commandsConnected(timeout: .seconds(min(listen, 5)))
            try await client.send(intent)
            if let rejection = try await Self.rejection(of: intent.id, in: rejections, within: listen) {
                print(
                    "rejected (\(rejection.code.label)): \(rejection.message) — intent \(intent.id), session \(intent.session)"
                )
                throw ExitCode(3)
            }
            print("sent \(intent.id) to session \(intent.session) (not rejected within \(listen) s)")
        }
    }

    /// The first rejection of `id` in `stream` within `seconds`, if any.
    static func rejection(
        of id: String, in stream: AsyncThrowingStream<SessionEvent, any Error>, within seconds: Double
    ) async throws -> Navigator_V1_Rejection? {
        try await withThrowingTaskGroup(of: Navigator_V1_Rejection?.self) { group in
            group.addTask {
                for try await event in stream {
                    if case .rejection(let rejection, _) = event, rejection.intentID == id || rejection.intentID.isEmpty
                    {
                        return rejection
                    }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

struct Explain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "What an intent would do now and why (a dry run: nothing changes).")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var intent: IntentOptions

    func run() async throws {
        let intent = try self.intent.intent()
        try await withConnection(connection) { client in
            let reply = try await client.explain(intent)
            printLines(TreeText.reply(reply))
            // Exit 3 when the intent would be (or was) rejected, as send --wait does.
            if case .rejected? = reply.kind { throw ExitCode(3) }
            if case .explanation(let explanation)? = reply.kind, explanation.outcome == .rejected { throw ExitCode(3) }
        }
    }
}

struct Condition: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set or clear a session's conditions, as its shell would (releases intents waiting for them).",
        discussion: "Example: navctl condition --session s1 authenticated=true (satisfies the demo map's login guard)")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var target: SessionOption
    @Argument(help: ArgumentHelp("Conditions to set.", valueName: "name=true|false")) var conditions: [String]
    func validate() throws {
        guard !conditions.isEmpty else { throw ValidationError("give at least one condition, e.g. authenticated=true") }
        _ = try Conditions.parse(conditions, option: "condition")
    }

    func run() async throws {
        let values = try Conditions.parse(conditions, option: "condition")
        let session = try target.id
        try await withConnection(connection) { client in
            do {
                let applied = try await client.report(.conditions(values), session: session)
                print(
                    "session \(session): "
                        + values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
                        + " (seq \(applied.seq))")
                for id in applied.releasedIntentIds { print("released \(id)") }
            } catch let error as ClientError where error.code == .rejected {
                printError("navctl: \(error)")
                throw ExitCode(3)
            }
        }
    }
}

/// `--session S` of the commands about one session. Optional to the parser, so that a misspelt
/// option is reported (with a suggestion) before a missing --session; required by `validate()`.
struct SessionOption: ParsableArguments {
    @Option(help: "The session (required).") var session: String?

    /// The session; a missing one is reported here, after parsing, so that ArgumentParser
    /// reports a misspelt option first (it validates before it looks for unknown options).
    var id: String {
        get throws {
            guard let session else { throw ValidationError("missing --session S") }
            return session
        }
    }

    func validate() throws {
        if let session, let problem = SessionID.problem(with: session) {
            throw ValidationError("--session: \(problem)")
        }
    }
}

/// `name=true|false` words.
enum Conditions {
    static func parse(_ words: [String], option: String) throws -> [String: Bool] {
        var values: [String: Bool] = [:]
        for word in words {
            let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let value = Bool(parts[1].lowercased()) else {
                throw ValidationError("\(option) \(word) is not name=true or name=false")
            }
            values[parts[0]] = value
        }
        return values
    }
}

struct Snapshot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A session's tree, seq, conditions and parked intents.")

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var target: SessionOption

    func run() async throws {
        let session = try target.id
        try await withConnection(connection) { client in
            let snapshot = try await client.snapshot(session)
            let tree = try snapshot.tree.core()
            print(
                "session \(snapshot.session) — seq \(snapshot.seq), tree version \(tree.version)"
                    + (snapshot.appVersion.isEmpty ? "" : ", its shell's app version \(snapshot.appVersion)"))
            printLines(TreeText.lines(tree))
            if !snapshot.conditions.isEmpty {
                print(
                    "conditions: "
                        + snapshot.conditions.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                            separator: ", "))
            }
            for parked in snapshot.parked {
                print("parked \(parked.intent.id): \(parked.reason)")
            }
        }
    }
}

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "navigatord's counters.",
        discussion: """
            intents: every intent received (intents socket and acknowledged requests) counted once, \
            by what became of it: resolved, refreshed, ignored, parked, or rejected (refused \
            anywhere: bad frames, a bad session, the resolver, a full worker, FORBIDDEN...); they \
            add up to the intents received. released: parked intents resolved later (counted as \
            parked already). refusals by code: every refusal of anything — intents, client events \
            and requests (snapshots, stats...) — by reject code; they add up to the refusals. So \
            "rejected" counts intents only, and refusals by code count more than intents. worker \
            queues: messages handed to each worker and not yet handled.

            --routes: intents by route (the target screen; "other" when the route map has no \
            such screen), worst landing first. landed: a shell acknowledged the intent's batch \
            within the landing window (or its target was already shown); not landed: rejected, \
            expired, refused on release, or not acknowledged in time; intents still parked or \
            inside the window are neither yet. Time to land: from the producer's sent_at to the \
            acknowledgement, p50 and p99 from navigatord's histogram (upper bounds of its buckets).
            """)
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Intents by route, with their landing ratio and time to land.")
    var routes = false

    func run() async throws {
        try await withConnection(connection) { client in
            let stats = try await client.stats()
            if routes { return print(Self.routeTable(stats)) }
            print(
                "navigatord \(stats.version): \(stats.workers) workers, \(stats.sessions) sessions, \(stats.parkedIntents) parked, \(stats.subscribers) subscribed topics"
            )
            let outcomes = ["resolved", "refreshed", "ignored", "parked", "rejected"]
            let received = outcomes.reduce(UInt64(0)) { $0 + stats.intentsByOutcome[$1, default: 0] }
            print(
                "intents: \(received) received = "
                    + outcomes.map { "\($0) \(stats.intentsByOutcome[$0, default: 0])" }.joined(separator: " + ")
                    + "; released later \(stats.intentsByOutcome["released", default: 0])")
            let refusals = stats.rejectionsByCode.values.reduce(0, +)
            if refusals > 0 {
                print(
                    "refusals by code (intents, client events, requests): \(refusals) = "
                        + stats.rejectionsByCode.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                            separator: " + "))
            }
            print("worker queues: " + stats.workerQueueDepths.map(String.init).joined(separator: " "))
        }
    }
}

extension Stats {
    /// The routes of `stats` as a table, worst landing ratio first (routes nothing settled yet
    /// last).
    static func routeTable(_ stats: Navigator_V1_Stats) -> String {
        guard !stats.routes.isEmpty else { return "no intents yet" }
        func ratio(_ route: Navigator_V1_RouteStats) -> Double? {
            let settled = route.landed + route.notLanded
            return settled == 0 ? nil : Double(route.landed) / Double(settled)
        }
        let rows = stats.routes.sorted { a, b in
            switch (ratio(a), ratio(b)) {
            case (let x?, let y?): x != y ? x < y : a.route < b.route
            case (.some, nil): true
            case (nil, .some): false
            case (nil, nil): a.route < b.route
            }
        }
        let header = [
            "route", "intents", "resolved", "parked", "rejected", "expired", "landed", "not landed", "landing", "p50",
            "p99",
        ]
        var table = [header]
        for route in rows {
            let counts = route.intentsByOutcome
            let received = ["resolved", "refreshed", "ignored", "parked", "rejected"].reduce(UInt64(0)) {
                $0 + counts[$1, default: 0]
            }
            table.append([
                route.route, "\(received)", "\(counts["resolved", default: 0] + counts["refreshed", default: 0])",
                "\(counts["parked", default: 0])", "\(counts["rejected", default: 0])",
                "\(counts["expired", default: 0])",
                "\(route.landed)", "\(route.notLanded)",
                ratio(route).map { String(format: "%.1f %%", $0 * 100) } ?? "—",
                quantile(0.5, route), quantile(0.99, route),
            ])
        }
        let widths = header.indices.map { column in table.map { $0[column].count }.max()! }
        let lines = table.map { row in
            row.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return column == 0 ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }
        return (lines + ["landing window \(stats.landingWindowSeconds) s"]).joined(separator: "\n")
    }

    /// The `q` quantile of a route's time to land, as the upper bound of its bucket.
    static func quantile(_ q: Double, _ route: Navigator_V1_RouteStats) -> String {
        let bounds = route.landBucketBoundsSeconds
        guard let value = LandingHistogram.quantile(q, counts: route.landBucketCounts, bounds: bounds) else {
            return "—"
        }
        return value == .infinity ? "> \(seconds(bounds.last ?? 0))" : "≤ \(seconds(value))"
    }

    static func seconds(_ value: Double) -> String {
        value < 1 ? String(format: "%g ms", value * 1000) : String(format: "%g s", value)
    }
}

struct Routes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Route maps: the one navigatord uses, a file's problems, what changes between two, a staged rollout.",
        discussion: """
            Exit status of check and diff: 0 the map is valid (check) or both maps load (diff, with \
            or without differences); 1 a map that cannot be read or is not valid, its problems \
            listed one a line as FILE:LINE:COLUMN: KEY: PROBLEM.
            """,
        subcommands: [
            RoutesShow.self, RoutesCheck.self, RoutesDiff.self, RoutesImpact.self, RoutesRollout.self,
            RoutesPromote.self, RoutesRollback.self, RoutesStatus.self,
        ],
        defaultSubcommand: RoutesShow.self)
}

struct RoutesShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "The route map navigatord uses, as YAML (the default).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await withConnection(connection) { client in
            let routes = try await client.routes()
            print("# route map from \(routes.source)")
            print(routes.yaml, terminator: "")
        }
    }
}

struct RoutesCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate a route map file exactly as navigatord would load it; every problem with its line.",
        discussion: "Needs no navigatord. Exit status 0: valid; 1: not (each problem on a line of its own).")

    @Argument(help: ArgumentHelp("The route map (YAML or JSON).", valueName: "file")) var file: String

    func run() throws {
        let map = try RoutesFiles.load(file)
        print("\(file): valid: \(RoutesFiles.overview(map))")
    }
}

struct RoutesDiff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract:
            "What changes from one route map to another: screens, tabs, info keys, guards, blocking screens, URL patterns.",
        discussion: """
            With two files, needs no navigatord: both are validated first, as navigatord would \
            (exit status 1 if either is not valid). With one, navigatord checks it and compares \
            it with the map it uses (admins only in secure mode). One change a line: + added, \
            - removed, ~ changed (before -> after); then how many. --json: the RoutesCheck \
            message in protobuf's JSON mapping, as POST /v1/routes/check answers.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(
        help: ArgumentHelp(
            "OLD NEW: the map in use and the candidate; NEW alone: against navigatord's map.", valueName: "old-or-new"))
    var old: String?
    @Argument(help: ArgumentHelp("The candidate, after OLD.", valueName: "new")) var new: String?
    @Flag(help: "One JSON object (RoutesCheck: valid, problems, changes, summary).") var json = false

    func validate() throws {
        if old == nil {
            throw ValidationError("missing the route map: give OLD NEW, or NEW alone to compare with navigatord's")
        }
    }

    func run() async throws {
        let check: Navigator_V1_RoutesCheck
        if let new {
            let before = try RoutesFiles.load(old!)
            let after = try RoutesFiles.load(new)
            check = Navigator_V1_RoutesCheck(diff: RouteMapDiff(from: before, to: after), currentSource: old!)
        } else {
            let file = old!
            let text = try RoutesFiles.text(file)
            var answer = Navigator_V1_RoutesCheck()
            try await withConnection(connection) { client in
                answer = try await client.checkRoutes(yaml: text, source: file)
            }
            check = answer
            if !check.valid && !json {
                RoutesFiles.printProblems(check, file: file)
                throw ExitCode(1)
            }
        }
        if json {
            print((try? check.jsonString()) ?? "{}")
            if !check.valid { throw ExitCode(1) }
        } else {
            if new == nil { print("# against the map navigatord uses, from \(check.currentSource)") }
            printLines(check.changeLines)
        }
    }
}

struct RoutesImpact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "impact",
        abstract: "How the intents navigatord recorded would resolve under a candidate route map.",
        discussion: """
            navigatord replays its flight recorder (the last flightRecorderIntents intents, each \
            from its session's tree as it was) against the candidate and the map it uses; nothing \
            changes. Printed by route: how many would change, by kind (other commands, now \
            rejected with the code, now accepted, rejected differently, parked differently, other \
            outcome), each with an example. Admins only in secure mode. Exit status 1 if the \
            candidate is not valid (its problems are printed); --json: the RoutesImpact message.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: ArgumentHelp("The candidate route map.", valueName: "new")) var file: String
    @Flag(help: "One JSON object (RoutesImpact).") var json = false

    func run() async throws {
        let text = try RoutesFiles.text(file)
        var answer = Navigator_V1_RoutesImpact()
        try await withConnection(connection) { client in
            answer = try await client.routesImpact(yaml: text, source: file)
        }
        if json {
            print((try? answer.jsonString()) ?? "{}")
        } else if answer.check.valid {
            printLines(answer.lines)
        } else {
            RoutesFiles.printProblems(answer.check, file: file)
        }
        if !answer.check.valid { throw ExitCode(1) }
    }
}

struct RoutesRollout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollout",
        abstract: "Start a staged rollout: a share of sessions resolve with a candidate route map.",
        discussion: """
            A session is chosen by a stable hash of its id and the candidate's version: the same \
            sessions on every instance and across restarts. The rollout is kept in the store \
            (with several instances, PostgreSQL: every instance applies the same split within a \
            second). Then `navctl routes promote` (every session) or `navctl routes rollback`; \
            `navctl routes status` for the figures of each map. With --rollback-margin, navigatord \
            rolls back by itself when the candidate's rejection rate exceeds the other map's by \
            that many percentage points once the candidate has resolved --rollback-after intents. \
            A reload (SIGHUP) ends any rollout. Admins only in secure mode. Exit status 1 if the \
            candidate is not valid (its problems are printed), a rollout is under way already, or \
            the stored rollout cannot be read (navctl routes rollback replaces it).
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: ArgumentHelp("The candidate route map.", valueName: "new")) var file: String
    @Option(help: ArgumentHelp("Percent of sessions for the candidate (above 0, at most 100).", valueName: "percent"))
    var share: Double
    @Option(
        help: ArgumentHelp(
            "Roll back by itself when the candidate's rejection rate exceeds the other's by this many percentage points (0: never).",
            valueName: "points"))
    var rollbackMargin: Double = 0
    @Option(help: ArgumentHelp("Intents of the candidate before the margin is judged.", valueName: "intents"))
    var rollbackAfter: UInt32 = 1000
    @Flag(help: "One JSON object (Rollout).") var json = false

    func run() async throws {
        let text = try RoutesFiles.text(file)
        var answer = Navigator_V1_Rollout()
        try await withConnection(connection) { client in
            answer = try await client.routesRollout(
                .with {
                    $0.action = .start
                    $0.yaml = text
                    $0.source = file
                    $0.sharePercent = share
                    $0.rollbackMarginPercent = rollbackMargin
                    $0.rollbackAfterIntents = rollbackAfter
                })
        }
        if answer.hasCheck, !answer.check.valid {
            if json {
                print((try? answer.jsonString()) ?? "{}")
            } else {
                RoutesFiles.printProblems(answer.check, file: file)
            }
            throw ExitCode(1)
        }
        printRollout(answer, json: json)
    }
}

struct RoutesPromote: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "promote",
        abstract: "Every session resolves with the rollout's candidate.",
        discussion: """
            The candidate becomes the map in use on every instance, and stays so across restarts \
            until a reload (SIGHUP): put it into the route map file and reload to finish. Exit \
            status 1 when no rollout is under way, or when the stored rollout cannot be read \
            (navctl routes rollback replaces it).
            """)
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "One JSON object (Rollout).") var json = false

    func run() async throws { try await rolloutAction(.promote, connection, json: json) }
}

struct RoutesRollback: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Every session resolves with the map in use again; the rollout's candidate is dropped.",
        discussion: """
            Exit status 1 when no rollout is under way. Also replaces a stored rollout the instance \
            cannot read (written by a newer navigatord, or by hand) with one it reads: the rollout \
            it follows, rolled back (kept if promoted), or a rolled-back one of no candidate.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "One JSON object (Rollout).") var json = false

    func run() async throws { try await rolloutAction(.rollback, connection, json: json) }
}

struct RoutesStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Where the route map rollout stands, and each map's figures on the instance asked.",
        discussion: """
            Per map version: intents as they came, rejected, the rejection rate, landed and not \
            landed and the landing ratio, counted on the instance that answers since it took the \
            rollout up (the same by version, for every instance, in /metrics: \
            navigator_map_intents_total, navigator_map_landed_total, navigator_map_not_landed_total).
            """)
    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "One JSON object (Rollout).") var json = false

    func run() async throws { try await rolloutAction(.status, connection, json: json) }
}

private func rolloutAction(_ action: Navigator_V1_RolloutAction, _ connection: ConnectionOptions, json: Bool)
    async throws
{
    var answer = Navigator_V1_Rollout()
    try await withConnection(connection) { client in
        answer = try await client.routesRollout(.with { $0.action = action })
    }
    printRollout(answer, json: json)
}

private func printRollout(_ rollout: Navigator_V1_Rollout, json: Bool) {
    if json {
        print((try? rollout.jsonString()) ?? "{}")
        return
    }
    print(rollout.summary)
    if !rollout.note.isEmpty, rollout.phase == .rolling || rollout.phase == .promoted { print(rollout.note) }
    for map in rollout.maps {
        let rate = String(format: "%.1f%%", map.rejectionRate * 100)
        let landing = map.landed + map.notLanded == 0 ? "—" : String(format: "%.1f%%", map.landingRatio * 100)
        print(
            "\(map.role == "candidate" ? "candidate" : "in use   ") \(map.version): \(map.intents) intents, \(map.rejected) rejected (\(rate)), landed \(map.landed) of \(map.landed + map.notLanded) (\(landing))"
        )
    }
}

/// Route map files as navctl reads them: as navigatord does (``RouteMapYAML`` and the resolver's
/// own check), problems printed one a line and exit status 1.
enum RoutesFiles {
    static func load(_ path: String) throws -> RouteMap {
        do {
            let map = try RouteMapYAML.load(contentsOfFile: path)
            _ = try Resolver(map: map)  // what navigatord does next; a valid map passes
            return map
        } catch let error as RouteMapLoadError {
            for line in error.description.split(separator: "\n", omittingEmptySubsequences: false) { print(line) }
            throw ExitCode(1)
        } catch {
            print("\(path): \(error)")
            throw ExitCode(1)
        }
    }

    /// A file's text to send to navigatord; a file that cannot be read: its reason, exit 1.
    static func text(_ path: String) throws -> String {
        do {
            return try TextFile.read(path)
        } catch {
            print("\(path): \(error.reason)")
            throw ExitCode(1)
        }
    }

    /// A check's problems as navctl prints a file's: `FILE:LINE:COLUMN: KEY: PROBLEM`.
    static func printProblems(_ check: Navigator_V1_RoutesCheck, file: String) {
        let problems = check.problems.map { problem in
            RouteMapLoadError.Problem(
                line: problem.line == 0 ? nil : Int(problem.line), column: Int(problem.column),
                keyPath: problem.keyPath, message: problem.message)
        }
        print(RouteMapLoadError(source: file, problems).description)
    }

    /// `3 tabs, 12 screens (4 with a url, 2 guarded, 1 blocking)`.
    static func overview(_ map: RouteMap) -> String {
        let specs = map.screens.values
        let root = map.tabs.isEmpty ? "a single stack of \(map.rootScreen ?? "")" : "\(map.tabs.count) tabs"
        return "\(root), \(map.screens.count) screens (\(specs.filter { $0.url != nil }.count) with a url, "
            + "\(specs.filter { $0.guardCondition != nil }.count) guarded, \(specs.filter(\.blocking).count) blocking)"
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow a session live: its tree, redrawn on every batch (or JSON lines with --json).",
        discussion:
            "Takes a snapshot first, then applies batches in seq order; on a gap it resyncs. --all follows every session (batches, rejections, audit records)."
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The session to follow.") var session: String?
    @Flag(help: "One JSON object per event instead of a drawing.") var json = false
    @Flag(help: "Follow every session: batches, rejections and the audit stream.") var all = false

    func validate() throws {
        if session != nil && all { throw ValidationError("give --session S or --all, not both") }
        if session == nil && !all { throw ValidationError("give --session S (one session) or --all (every session)") }
    }

    func run() async throws {
        try await withConnection(connection) { client in
            let draw = !json && isatty(1) != 0
            for try await event in client.follow(all ? .everything : .session(session!)) {
                if json {
                    print(WatchOutput.json(event))
                } else {
                    printLines(WatchOutput.text(event, clear: draw))
                }
                fflush(nil)  // every stream: one line at a time for pipes and scripts
            }
        }
    }
}

/// Runs `body` with a connection, turning errors into a message and an exit status (README,
/// "Exit statuses": 1 no answer or another failure, 2 a key file that cannot be used, 3 refused).
func withConnection(_ options: ConnectionOptions, _ body: (NavigatorConnection) async throws -> Void) async throws {
    let client: NavigatorConnection
    do {
        client = try await options.connect()
    } catch {
        printError("navctl: \(error)")
        throw ExitCode((error as? ClientError)?.exitStatus ?? 1)
    }
    do {
        try await body(client)
        await client.close()
    } catch let exit as ExitCode {
        await client.close()
        throw exit
    } catch {
        await client.close()
        printError("navctl: \(error)")
        throw ExitCode((error as? ClientError)?.exitStatus ?? 1)
    }
}

func printLines(_ lines: [String]) {
    for line in lines { print(line) }
}

func printError(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

func wallClockNanos() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}
