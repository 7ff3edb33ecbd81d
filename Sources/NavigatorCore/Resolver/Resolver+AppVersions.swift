extension Resolver {
    /// The path as the session's shell can show it: a screen marked `since:` a later app version
    /// than the shell's is replaced by its fallback (followed while the fallback is too new as
    /// well), each replacement with its reason; with no fallback the intent is refused
    /// (`app_too_old`). A shell that did not say its version is taken to have every screen.
    func adapted(_ path: [ScreenContext], for state: SessionState) throws(ResolveError) -> (
        path: [ScreenContext], reasons: [String]
    ) {
        guard let version = state.appVersion else { return (path, []) }
        var result = path
        var reasons: [String] = []
        for index in path.indices {
            var context = path[index]
            // Validated maps have no fallback loops; the bound only keeps this total.
            for _ in 0...map.screens.count {
                guard let spec = map.screens[context.screen], let since = spec.since, version < since else { break }
                guard let fallback = spec.fallback else {
                    throw ResolveError(
                        .appTooOld,
                        "\(context.screen) needs app version \(since) or later, and the session's shell runs \(version); the route map gives no fallback for it (expected a shell of version \(since) or later, or fallback: under screens.\(context.screen))"
                    )
                }
                let replacement = try self.replacement(for: context, fallback, spec)
                reasons.append(
                    "\(context.screen) needs app version \(since) or later and the session's shell runs \(version): its fallback \(replacement) is shown instead"
                )
                context = replacement
            }
            result[index] = context
        }
        return (result, reasons)
    }

    private func replacement(for context: ScreenContext, _ fallback: ScreenSpec.Fallback, _ spec: ScreenSpec)
        throws(ResolveError) -> ScreenContext
    {
        let made: ScreenContext
        switch fallback {
        case .parent:
            guard let parent = self.context.parent(of: context) else {
                throw ResolveError(.internalError, "the fallback of \(context.screen) is its parent, which it has not")
            }
            made = parent
        case .screen(let name):
            let declared = map.screens[name]?.info ?? [:]
            made = ScreenContext(name, context.info.filter { declared[$0.key] != nil })
        case .webView(let name, let template):
            made = ScreenContext(name, ["url": URLTemplate.fill(template, with: context.info)])
        }
        return try validate(made)
    }
}
