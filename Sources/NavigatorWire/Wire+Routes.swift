import NavigatorCore

extension Navigator_V1_RouteMapChange {
    public init(_ change: RouteMapDiff.Change) {
        self.init()
        kind = change.kind.rawValue
        subject = change.subject.rawValue
        name = change.name
        before = change.old ?? ""
        after = change.new ?? ""
    }
}

extension Navigator_V1_RoutesCheck {
    /// A valid candidate and what it changes against the map in use.
    public init(diff: RouteMapDiff, currentSource: String) {
        self.init()
        valid = true
        changes = diff.changes.map(Navigator_V1_RouteMapChange.init)
        self.currentSource = currentSource
        summary = diff.summary
    }

    /// One change a line (`~ url chat: app://chat/{conversationId} -> app://c/{conversationId}`),
    /// then the summary: as `navctl routes diff` prints a ``RouteMapDiff``.
    public var changeLines: [String] {
        changes.map { change in
            RouteMapDiff.Change.line(
                RouteMapDiff.Kind(rawValue: change.kind) ?? .changed, change.subject, change.name,
                old: change.before.isEmpty ? nil : change.before, new: change.after.isEmpty ? nil : change.after)
        } + [summary]
    }
}

extension Navigator_V1_RoutesImpact {
    /// An impact report on the wire: `check` is the candidate's (valid, with its changes).
    public init(_ impact: RouteImpact, check: Navigator_V1_RoutesCheck, recorded: [RecordedIntent], capacity: Int) {
        self.init()
        self.check = check
        intents = UInt32(clamping: impact.intents)
        oldestUnixNanos = recorded.first?.at ?? 0
        newestUnixNanos = recorded.last?.at ?? 0
        changed = UInt32(clamping: impact.changed)
        summary = impact.summary
        recorderCapacity = UInt32(clamping: capacity)
        routes = impact.routes.map { route in
            .with {
                $0.route = route.route
                $0.intents = UInt32(clamping: route.intents)
                $0.same = UInt32(clamping: route.same)
                $0.changes = route.changes.map { tally in
                    .with {
                        if case .nowRejected(let code) = tally.change {
                            $0.kind = "now rejected"
                            $0.code = Navigator_V1_RejectCode(code)
                        } else {
                            $0.kind = tally.change.label
                        }
                        $0.count = UInt32(clamping: tally.count)
                        $0.exampleSession = tally.example.session
                        $0.exampleIntentID = tally.example.intentID
                        $0.before = tally.example.before
                        $0.after = tally.example.after
                    }
                }
            }
        }
    }

    /// The report for people, one line each: per route with a change, each kind with its count
    /// and an example; the routes unchanged; the summary.
    public var lines: [String] {
        var lines: [String] = []
        for route in routes where route.intents > route.same {
            lines.append("\(route.route): \(route.intents - route.same) of \(route.intents) intents would change")
            for change in route.changes {
                let kind = change.kind == "now rejected" ? "now rejected (\(change.code.label))" : change.kind
                lines.append(
                    "  \(change.count) \(kind), e.g. \(change.exampleIntentID) of session \(change.exampleSession)")
                lines.append("    in use:    \(change.before)")
                lines.append("    candidate: \(change.after)")
            }
        }
        let unchanged = routes.filter { $0.intents == $0.same }
        if !unchanged.isEmpty {
            lines.append("unchanged: \(unchanged.map { "\($0.route) (\($0.intents))" }.joined(separator: ", "))")
        }
        lines.append(summary)
        return lines
    }
}
