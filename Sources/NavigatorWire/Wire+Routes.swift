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
