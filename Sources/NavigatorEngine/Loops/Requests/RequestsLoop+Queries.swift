import NavigatorCore
import NavigatorWire
import NavigatorYAML

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
        let resolution = resolvers.resolver.explain(intent, in: record.state, now: WallClock.now())
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

    /// A candidate route map checked as a reload would load it, and compared with the map in use.
    /// Nothing is loaded.
    func routesCheck(_ candidate: Navigator_V1_RoutesCheckRequest) -> Navigator_V1_RoutesCheck {
        let current = resolvers.snapshot
        let source = candidate.source.isEmpty ? "candidate" : candidate.source
        func refused(_ problems: [Navigator_V1_RouteMapProblem]) -> Navigator_V1_RoutesCheck {
            .with {
                $0.currentSource = current.source
                $0.problems = problems
                $0.summary = "\(problems.count) problem\(problems.count == 1 ? "" : "s")"
            }
        }
        let map: RouteMap
        do {
            map = try RouteMapYAML.load(candidate.yaml, source: source)
        } catch {
            return refused(error.problems.map(Navigator_V1_RouteMapProblem.init))
        }
        do {
            _ = try Resolver(map: map, options: current.resolver.options)  // what a reload does next
        } catch {
            return refused(
                error.errors.map { problem in
                    .with {
                        $0.keyPath = problem.keyPath
                        $0.message = problem.message
                    }
                })
        }
        return Navigator_V1_RoutesCheck(
            diff: RouteMapDiff(from: current.resolver.map, to: map), currentSource: current.source)
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
