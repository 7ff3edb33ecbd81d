import NavigatorCore
import NavigatorStore
import NavigatorWire

// routes_rollout: a staged rollout of a route map (``RolloutKeeper``), answered on the route map
// desk's thread (a start loads the candidate; every change is written to the store first).
extension RequestsLoop {
    /// The most intents an automatic rollback may wait for.
    static let maxRollbackAfter = 10_000_000
    /// The longest name of a candidate (`source`), in bytes.
    static let maxRolloutSource = 256

    /// STATUS: how the rollout stands (refused when the request carries a candidate: a client
    /// that meant to start one and left `action` at its default must hear of it).
    func rolloutStatus(_ request: Navigator_V1_RoutesRolloutRequest, into answer: inout Navigator_V1_Reply) {
        guard request.yaml.isEmpty, request.sharePercent == 0 else {
            counters.refused(.invalidRequest, intent: false)
            answer.rejected = .rejection(
                .invalidRequest,
                "action is ROLLOUT_ACTION_STATUS (0, the default) but the request carries a candidate map or a share; expected action ROLLOUT_ACTION_START to start a rollout, or neither for its status"
            )
            return
        }
        answer.routesRollout = rolloutStatus()
    }

    func rollout(_ request: Navigator_V1_RoutesRolloutRequest, by: String, into answer: inout Navigator_V1_Reply) {
        func refuse(_ code: Navigator_V1_RejectCode, _ message: String) {
            counters.refused(code, intent: false)
            answer.rejected = .rejection(code, message)
        }
        let action: RolloutKeeper.Action
        var candidate: ResolverHolder.Loaded?
        var checked: Navigator_V1_RoutesCheck?
        switch request.action {
        case .status:
            return rolloutStatus(request, into: &answer)
        case .promote: action = .promote
        case .rollback: action = .rollback
        case .start:
            let share = request.sharePercent
            guard share.isFinite, share > 0, share <= 100, (share * 100).rounded() >= 1 else {
                return refuse(
                    .invalidRequest,
                    "share_percent is \(share); expected the share of sessions for the candidate in percent, above 0 (at least 0.01) and at most 100"
                )
            }
            let margin = request.rollbackMarginPercent
            guard margin.isFinite, margin == 0 || (margin >= 0.01 && margin <= 100) else {
                return refuse(
                    .invalidRequest,
                    "rollback_margin_percent is \(margin); expected 0 (no automatic rollback) or 0.01 to 100 percentage points"
                )
            }
            let after =
                request.rollbackAfterIntents == 0
                ? RolloutKeeper.defaultRollbackAfter : Int(request.rollbackAfterIntents)
            guard (10...Self.maxRollbackAfter).contains(after) else {
                return refuse(
                    .invalidRequest,
                    "rollback_after_intents is \(after); expected 10 to \(Self.maxRollbackAfter) intents of the candidate (0: 1,000)"
                )
            }
            guard request.source.utf8.count <= Self.maxRolloutSource, !request.source.contains(where: \.isNewline)
            else {
                return refuse(
                    .invalidRequest,
                    "source has \(request.source.utf8.count) bytes\(request.source.contains(where: \.isNewline) ? " and a line break" : ""); expected a name of the candidate (a file name) of at most \(Self.maxRolloutSource) bytes on one line"
                )
            }
            let source = request.source.isEmpty ? "candidate" : request.source
            let (check, resolver, _) = routesCheck(yaml: request.yaml, source: source)
            guard let resolver else {
                var status = rolloutStatus()
                status.check = check
                status.summary = "not started: the candidate does not load (\(check.summary))"
                answer.routesRollout = status
                return
            }
            candidate = .init(resolver: resolver, source: source, version: RouteMapVersion.of(text: request.yaml))
            checked = check
            action = .start(
                yaml: request.yaml, source: source, share: Int((share * 100).rounded()),
                rollbackMargin: Int((margin * 100).rounded()), rollbackAfter: after)
        case .UNRECOGNIZED(let value):
            return refuse(
                .invalidRequest,
                "action \(value) is not one this service knows; expected ROLLOUT_ACTION_STATUS, START, PROMOTE or ROLLBACK"
            )
        }
        do {
            _ = try rolloutKeeper.change(action, candidate: candidate, by: by)
            answer.routesRollout = rolloutStatus()
            if let checked { answer.routesRollout.check = checked }  // valid, with its changes
        } catch {
            refuse(error.kind == .conflict ? .conflict : .unavailable, error.message)
        }
    }

    /// Where the rollout stands on this instance, with each map's figures since it took it up,
    /// and the stored row's trouble if it cannot be read.
    func rolloutStatus() -> Navigator_V1_Rollout {
        var status = followedRollout()
        if let reason = rolloutKeeper.unreadable {
            status.summary +=
                "; the stored rollout cannot be read on this instance (\(reason)): a rollback (navctl routes rollback) replaces it"
        }
        return status
    }

    private func followedRollout() -> Navigator_V1_Rollout {
        let snapshot = resolvers.snapshot
        let file = resolvers.file
        guard let following = rolloutKeeper.following else {
            return .with {
                $0.phase = .none
                $0.baseSource = snapshot.source
                $0.baseVersion = snapshot.version
                $0.summary = "no rollout: every session resolves with \(snapshot.source) (version \(snapshot.version))"
            }
        }
        let stored = following.stored
        let (base, candidate) = rolloutKeeper.figures(following)
        let share = RolloutKeeper.percent(stored.share)
        return .with {
            $0.phase = Navigator_V1_RolloutPhase(stored.phase)
            // The map in use here: this instance's file (the one that started the rollout may
            // have had another).
            $0.baseSource = file.source
            $0.baseVersion = file.version
            $0.candidateSource = stored.source
            $0.candidateVersion = stored.version
            $0.sharePercent = Double(stored.share) / 100
            $0.rollbackMarginPercent = Double(stored.rollbackMargin) / 100
            $0.rollbackAfterIntents = UInt32(clamping: stored.rollbackAfter)
            $0.startedAtUnixNanos = stored.startedAt
            $0.changedAtUnixNanos = stored.changedAt
            $0.note = stored.note
            $0.revision = stored.revision
            $0.maps = [Navigator_V1_MapFigures(version: file.version, role: "in use", base)]
            // A rolled-back rollout of no candidate replaced a row that could not be read.
            if !stored.version.isEmpty {
                $0.maps.append(Navigator_V1_MapFigures(version: stored.version, role: "candidate", candidate))
            } else {
                $0.sharePercent = 0
            }
            let failed = following.failure.map { "; the candidate does not load on this instance: \($0)" } ?? ""
            $0.summary =
                switch stored.phase {
                case .rolling:
                    "candidate \(stored.version) (\(stored.source)) for \(share) of sessions, the others on \(file.version) (\(file.source))"
                        + (stored.rollbackMargin > 0
                            ? "; rolled back automatically if its rejection rate exceeds the other's by \(RolloutKeeper.percent(stored.rollbackMargin).dropLast()) percentage points after \(stored.rollbackAfter) intents"
                            : "") + failed
                case .promoted where file.version == stored.version:
                    "promoted: every session resolves with \(stored.version) (\(stored.source)), which \(file.source) has now"
                case .promoted:
                    "promoted: every session resolves with \(stored.version) (\(stored.source)); put it into \(file.source) and reload (SIGHUP) to make it the file's map (until then a restart keeps it)"
                        + failed
                case .rolledBack:
                    "rolled back: every session resolves with \(snapshot.version) (\(snapshot.source)); \(stored.note)"
                case .ended:
                    "ended: every session resolves with \(snapshot.version) (\(snapshot.source)); \(stored.note)"
                }
        }
    }
}

extension Navigator_V1_RolloutPhase {
    init(_ phase: StoredRollout.Phase) {
        switch phase {
        case .rolling: self = .rolling
        case .promoted: self = .promoted
        case .rolledBack: self = .rolledBack
        case .ended: self = .ended
        }
    }
}

extension Navigator_V1_MapFigures {
    init(version: String, role: String, _ tally: RouteMetrics.Tally) {
        self.init()
        self.version = version
        self.role = role
        intents = RolloutKeeper.arrived(tally)
        rejected = tally.intents[.rejected]
        landed = tally.landed
        notLanded = tally.notLanded
        rejectionRate = RolloutKeeper.rejectionRate(tally)
        landingRatio = tally.landingRatio ?? 0
    }
}
