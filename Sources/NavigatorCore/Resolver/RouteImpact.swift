/// An intent as it met its session: what the flight recorder keeps to replay it.
public struct RecordedIntent: Sendable {
    public var intent: Intent
    /// The session as the resolver found it: its tree, conditions, parked intents, whether its
    /// shell was ready and its app version (not its remembered intent ids: dedup does not depend
    /// on the route map).
    public var before: SessionState
    /// When it was resolved, unix nanoseconds.
    public var at: Int64

    public init(intent: Intent, before: SessionState, at: Int64) {
        self.intent = intent
        self.before = before
        self.at = at
    }
}

/// How recorded intents would resolve under a candidate route map, against the map in use:
/// each intent resolved again by both from the session as it was (``Resolver/explain(_:in:now:)``,
/// on copies: nothing changes), compared, and grouped by route.
public struct RouteImpact: Hashable, Sendable {
    /// How an intent's outcome differs.
    public enum Change: Hashable, Sendable, Comparable {
        /// Resolved (or refreshed) both ways, with other commands: it lands elsewhere.
        case otherCommands
        /// Not rejected in use, rejected with the candidate: the code says why.
        case nowRejected(ResolveError.Code)
        /// Rejected in use, not with the candidate.
        case nowAccepted
        /// Rejected both ways, with another code.
        case rejectedDifferently
        /// Parked one way and not the other, or parked for another reason.
        case parkedDifferently
        /// Any other difference of outcome (ignored one way, resolved the other).
        case otherOutcome
        /// The same outcome, but other parked intents released by it (or released otherwise).
        case releasedDifferently

        /// `now rejected (unknown_screen)`.
        public var label: String {
            switch self {
            case .otherCommands: "other commands"
            case .nowRejected(let code): "now rejected (\(code.rawValue))"
            case .nowAccepted: "now accepted"
            case .rejectedDifferently: "rejected differently"
            case .parkedDifferently: "parked differently"
            case .otherOutcome: "other outcome"
            case .releasedDifferently: "released differently"
            }
        }

        public static func < (lhs: Change, rhs: Change) -> Bool { lhs.label < rhs.label }
    }

    /// One intent that changed, as an example of its kind.
    public struct Example: Hashable, Sendable {
        public var session: String
        public var intentID: String
        /// The outcome in use and with the candidate, each in one line.
        public var before: String
        public var after: String
    }

    public struct Tally: Hashable, Sendable {
        public var change: Change
        public var count: Int
        /// The first recorded intent of its kind.
        public var example: Example
    }

    public struct Route: Hashable, Sendable {
        /// The target screen (the last of the path; a deep link's, as the map in use reads it).
        public var route: String
        public var intents: Int
        public var same: Int
        /// By kind of change, the most first.
        public var changes: [Tally]

        public var changed: Int { intents - same }
    }

    /// How many intents were replayed.
    public var intents: Int
    /// Routes with a change first (the most changed first), then by name.
    public var routes: [Route]

    public var changed: Int { routes.reduce(0) { $0 + $1.changed } }

    /// Replays `recorded` with `current` (the map in use) and `candidate`.
    public init(replaying recorded: [RecordedIntent], current: Resolver, candidate: Resolver) {
        var rows: [String: Route] = [:]
        for entry in recorded {
            let before = current.explain(entry.intent, in: entry.before, now: entry.at)
            let after = candidate.explain(entry.intent, in: entry.before, now: entry.at)
            let route = Self.route(of: entry.intent, current)
            var row = rows[route] ?? Route(route: route, intents: 0, same: 0, changes: [])
            row.intents += 1
            if let change = Self.change(from: before, to: after) {
                if let index = row.changes.firstIndex(where: { $0.change == change }) {
                    row.changes[index].count += 1
                } else {
                    let example = Example(
                        session: entry.intent.session, intentID: entry.intent.id, before: Self.describe(before),
                        after: Self.describe(after))
                    row.changes.append(Tally(change: change, count: 1, example: example))
                }
            } else {
                row.same += 1
            }
            rows[route] = row
        }
        intents = recorded.count
        routes = rows.values.map { row in
            var row = row
            row.changes.sort { ($0.count, $1.change) > ($1.count, $0.change) }
            return row
        }.sorted { ($0.changed, $1.route) > ($1.changed, $0.route) }
    }

    /// The route an intent counts under.
    static func route(of intent: Intent, _ resolver: Resolver) -> String {
        switch intent.target {
        case .path(let path): return path.last?.screen ?? "(empty path)"
        case .url:
            guard let path = try? resolver.validate(intent), let screen = path.last?.screen else { return "(url)" }
            return screen
        }
    }

    /// How `after` differs from `before`; nil when they are the same (outcome and commands, and
    /// the parked intents released with theirs).
    static func change(from before: Resolution, to after: Resolution) -> Change? {
        if let change = outcomeChange(from: before, to: after) { return change }
        guard before.released.count == after.released.count else { return .releasedDifferently }
        for (old, new) in zip(before.released, after.released)
        where old.intent.id != new.intent.id || outcomeChange(from: old, to: new) != nil {
            return .releasedDifferently
        }
        return nil
    }

    static func outcomeChange(from before: Resolution, to after: Resolution) -> Change? {
        switch (before.outcome, after.outcome) {
        case (.rejected(let old), .rejected(let new)):
            return old.code == new.code ? nil : .rejectedDifferently
        case (_, .rejected(let error)):
            return .nowRejected(error.code)
        case (.rejected, _):
            return .nowAccepted
        case (.parked(let old, let oldRedirect), .parked(let new, let newRedirect)):
            return old == new && oldRedirect == newRedirect ? nil : .parkedDifferently
        case (.parked, _), (_, .parked):
            return .parkedDifferently
        case (.resolved(let old), .resolved(let new)), (.refreshed(let old), .refreshed(let new)):
            return old == new ? nil : .otherCommands
        case (.ignored, .ignored):
            return nil
        default:
            return .otherOutcome
        }
    }

    /// An outcome in one line: `resolved: …`, `rejected unknown_screen: …`.
    static func describe(_ resolution: Resolution) -> String {
        let kind: String
        switch resolution.outcome {
        case .resolved: kind = "resolved"
        case .refreshed: kind = "refreshed"
        case .ignored: kind = "ignored"
        case .parked: kind = "parked"
        case .rejected(let error): return "rejected \(error.code.rawValue): \(error.message)"
        }
        return "\(kind): \(resolution.summary)"
    }

    /// `12 of 40 recorded intents would change, on 3 of 7 routes`.
    public var summary: String {
        let touched = routes.filter { $0.changed > 0 }.count
        return "\(changed) of \(intents) recorded intents would change, on \(touched) of \(routes.count) routes"
    }
}
