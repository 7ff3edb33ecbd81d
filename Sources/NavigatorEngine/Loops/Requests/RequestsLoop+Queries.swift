import NavigatorCore
import NavigatorWire
import NavigatorYAML
import ZeroMQ

// Queries: what the requests thread answers itself, reading the store under its shard locks —
// snapshots, dry runs and stats (the session id was checked where the request came in).
extension RequestsLoop {
    func snapshot(_ session: String) -> Navigator_V1_Snapshot {
        let record = store.read(session)
        // Listed for the dedup window after they expired (a packed session forgets them then).
        let cutoff = WallClock.now() - min(resolvers.resolver.options.dedupWindow, RecentIntentIDs.longestWindow)
        return .with {
            $0.session = session
            $0.seq = record.seq
            $0.epoch = store.epoch(of: session)
            $0.tree = .init(record.state.tree)
            $0.conditions = record.state.conditions
            $0.appVersion = record.state.appVersion?.text ?? ""
            $0.recentlyExpired = record.state.recentlyExpired.filter { $0.expiredAt > cutoff }.map { expired in
                .with {
                    $0.session = session
                    $0.intentID = expired.intentID
                    $0.source = expired.source
                    $0.code = .expired
                    $0.message = expired.rejectionMessage
                    $0.atUnixNanos = expired.expiredAt
                }
            }
            $0.parked = record.state.parked.map { parked in
                .with {
                    $0.intent = .init(parked.intent)
                    $0.reason = parked.reason.description
                    $0.expiresAtUnixNanos = parked.expiresAt
                    if case .guardUnmet(let condition, _) = parked.reason { $0.guardCondition = condition }
                }
            }
        }
    }

    func explain(_ wire: Navigator_V1_Intent, into answer: inout Navigator_V1_Reply) {
        let intent: Intent
        do {
            intent = try wire.core()
        } catch {
            answer.rejected = .rejection(error)
            return
        }
        let record = store.read(wire.session)
        let resolution = resolvers.snapshot.pick(intent.session).resolver.explain(
            intent, in: record.state, now: WallClock.now())
        answer.explanationSteps = resolution.explanation.map(Navigator_V1_ExplanationStep.init)
        answer.explanation = .with {
            $0.outcome = Navigator_V1_Outcome(resolution.outcome)
            $0.batch = Navigator_V1_CommandBatch(
                session: wire.session, seq: 0, intentID: intent.id, animated: intent.animated,
                commands: resolution.commands,
                treeVersion: 0, summary: resolution.summary, cause: .intent)
            switch resolution.outcome {
            case .ignored(let reason): $0.reason = reason
            case .parked(let reason, _): $0.reason = reason.description
            case .rejected(let error): $0.rejection = .rejection(Navigator_V1_RejectCode(error.code), error.message)
            case .resolved, .refreshed: break
            }
        }
    }

    func stats() -> Navigator_V1_Stats {
        counters.stats(workers: workers, store: store, startedAt: startedAt)
    }

    /// Answers a route map request on the route map desk's thread (one at a time: another
    /// meanwhile is refused OVERLOADED at once); `make` fills the reply there.
    func onRouteMapDesk(
        requestID: String, _ routingID: ZeroMQ.Message, delimited: Bool, _ sockets: Sockets,
        _ make: @escaping @Sendable (inout Navigator_V1_Reply) -> Void
    ) throws {
        let started = routeMapDesk.start(
            routingID: routingID.bytes, delimiter: [delimited ? 1 : 0], requestID: requestID
        ) {
            var answer = Navigator_V1_Reply()
            answer.requestID = requestID
            make(&answer)
            return answer
        }
        guard started else {
            return try refuse(
                .overloaded,
                "a route map check, impact report or rollout change is being made; one is made at a time: retry when it is answered",
                requestID: requestID, intent: false, to: routingID, delimited: delimited, sockets)
        }
    }

    /// The most YAML nodes a candidate map may make (aliases expanded), and the most problems
    /// an answer lists: what a client sends bounds the work and the answer.
    static let candidateNodes = 50_000
    static let listedProblems = 100

    /// Replays the flight recorder against a candidate map (on the route map desk's thread).
    /// An invalid candidate is answered with its problems; with the recorder off, UNAVAILABLE.
    func impact(_ candidate: Navigator_V1_RoutesImpactRequest, into answer: inout Navigator_V1_Reply) {
        let (check, next, current) = routesCheck(yaml: candidate.yaml, source: candidate.source)
        let capacity = recorders.reduce(0) { $0 + $1.capacity }
        guard let next else {
            answer.routesImpact = .with { $0.check = check }
            return
        }
        guard capacity > 0 else {
            counters.refused(.unavailable, intent: false)
            answer.rejected = .rejection(
                .unavailable,
                "the flight recorder is off (flightRecorderIntents 0), so there are no intents to replay; expected a setting above 0"
            )
            return
        }
        let recorded = FlightRecorder.merged(recorders)
        // The map the candidate was compared with, even if a reload came since.
        let impact = RouteImpact(replaying: recorded, current: current, candidate: next)
        answer.routesImpact = Navigator_V1_RoutesImpact(impact, check: check, recorded: recorded, capacity: capacity)
    }

    /// A candidate route map checked as a reload would load it (within ``candidateNodes``), and
    /// compared with the map in use; its resolver when it is valid, and the one in use. Nothing
    /// is loaded.
    func routesCheck(yaml: String, source candidateSource: String) -> (
        check: Navigator_V1_RoutesCheck, resolver: Resolver?, current: Resolver
    ) {
        let current = resolvers.snapshot
        let source = candidateSource.isEmpty ? "candidate" : candidateSource
        func refused(_ problems: [Navigator_V1_RouteMapProblem]) -> (Navigator_V1_RoutesCheck, Resolver?, Resolver) {
            let check = Navigator_V1_RoutesCheck.with {
                $0.currentSource = current.source
                $0.problems = Array(problems.prefix(Self.listedProblems))
                $0.summary =
                    "\(problems.count) problem\(problems.count == 1 ? "" : "s")"
                    + (problems.count > Self.listedProblems ? " (the first \(Self.listedProblems) listed)" : "")
            }
            return (check, nil, current.resolver)
        }
        let map: RouteMap
        do {
            map = try RouteMapYAML.load(yaml, source: source, maxNodes: Self.candidateNodes)
        } catch {
            return refused(error.problems.map(Navigator_V1_RouteMapProblem.init))
        }
        let resolver: Resolver
        do {
            resolver = try Resolver(map: map, options: current.resolver.options)  // what a reload does next
        } catch {
            return refused(
                error.errors.map { problem in
                    .with {
                        $0.keyPath = problem.keyPath
                        $0.message = problem.message
                    }
                })
        }
        return (
            Navigator_V1_RoutesCheck(
                diff: RouteMapDiff(from: current.resolver.map, to: map), currentSource: current.source),
            resolver, current.resolver
        )
    }
}

extension EngineCounters {
    /// What a `stats` request is answered (and the dashboard's history samples): the counters,
    /// the store's sizes, the routes' landing figures.
    func stats(workers: Int, store: SessionStore, startedAt: Int64) -> Navigator_V1_Stats {
        let counters = self
        return .with {
            $0.version = NavigatorVersion.current
            $0.startedAtUnixNanos = startedAt
            $0.workers = UInt32(workers)
            $0.sessions = UInt64(store.sessionCount)
            $0.parkedIntents = UInt64(store.parkedCount)
            $0.subscribers = counters.subscribedTopics.load
            for outcome in [Navigator_V1_Outcome.resolved, .refreshed, .ignored, .parked, .rejected] {
                $0.intentsByOutcome[outcome.label] = counters.outcomes[outcome.rawValue].load
            }
            // Parked intents resolved later; each was counted once already, as parked.
            $0.intentsByOutcome["released"] = counters.released.load
            for (raw, counter) in counters.rejections.enumerated() where counter.load > 0 {
                $0.rejectionsByCode[Navigator_V1_RejectCode(rawValue: raw)?.label ?? "code_\(raw)"] = counter.load
            }
            $0.workerQueueDepths = (0..<workers).map(counters.queueDepth)
            let routes = counters.routes
            $0.landingWindowSeconds = UInt32(routes.landingWindow / 1_000_000_000)
            let bounds = RouteMetrics.latencyBuckets.map { Double(RouteMetrics.nanoseconds($0)) / 1e9 }
            $0.routes = routes.tallies.sorted { $0.key < $1.key }.map { route, tally in
                .with {
                    $0.route = route
                    for (outcome, count) in tally.intents { $0.intentsByOutcome[outcome.rawValue] = count }
                    $0.landed = tally.landed
                    $0.notLanded = tally.notLanded
                    $0.landBucketBoundsSeconds = bounds
                    $0.landBucketCounts = tally.landingTimes
                }
            }
        }
    }
}

/// The version `navigatord --version` and stats report.
public enum NavigatorVersion {
    public static let current = "0.1.0"
}

extension Navigator_V1_RouteMapProblem {
    init(_ problem: RouteMapLoadError.Problem) {
        self.init()
        line = UInt32(clamping: problem.line ?? 0)
        column = UInt32(clamping: problem.column ?? 0)
        keyPath = problem.keyPath
        message = problem.message
    }
}
