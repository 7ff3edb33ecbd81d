extension Resolver {
    /// Step 1: the intent's path, each context checked against the route map and its info
    /// brought to canonical form; or what is wrong with it.
    public func validate(_ intent: Intent) throws(ResolveError) -> [ScreenContext] {
        guard !intent.id.isEmpty, intent.id.utf8.count <= 128 else {
            throw ResolveError(
                .invalidID,
                "intent id \(intent.id.isEmpty ? "is empty" : "has \(intent.id.utf8.count) bytes"); expected 1 to 128 bytes"
            )
        }
        guard !intent.session.isEmpty else {
            throw ResolveError(.invalidSession, "session is empty; expected a session id")
        }
        let path: [ScreenContext]
        switch intent.target {
        case .url(let url):
            guard let parsed = URLPattern.Parsed(url),
                let match = urlPatterns.lazy.compactMap({ entry in
                    entry.pattern.match(parsed).map { (entry.screen, $0) }
                }).first
            else {
                throw ResolveError(.unknownURL, "no route matches \(url); expected one of \(core.knownURLs)")
            }
            path = [ScreenContext(match.0, match.1)]
        case .path(let contexts):
            guard !contexts.isEmpty else {
                throw ResolveError(.emptyPath, "the intent has an empty path and no url; expected at least one screen")
            }
            guard contexts.count <= options.maxPathLength else {
                throw ResolveError(
                    .pathTooLong, "the path has \(contexts.count) screens; expected at most \(options.maxPathLength)")
            }
            path = contexts
        }
        // Nearly always every context is canonical already: the path is copied only when one
        // changes.
        var checked = path
        for index in path.indices {
            if let canonical = try canonical(path[index], at: path.count > 1 ? index : nil) {
                checked[index] = canonical
            }
        }
        return checked
    }

    /// One context: a declared screen with every required key and only declared keys, each of
    /// its declared type (returned in canonical form). `index`: its place in a longer path, for
    /// the error.
    public func validate(_ context: ScreenContext, at index: Int? = nil) throws(ResolveError) -> ScreenContext {
        try canonical(context, at: index) ?? context
    }

    /// ``validate(_:at:)``, but `nil` when the context is canonical already.
    func canonical(_ context: ScreenContext, at index: Int?) throws(ResolveError) -> ScreenContext? {
        var position: String { index.map { "path[\($0)] " } ?? "" }
        guard let entry = self.index.entry(context.screen) else {
            throw ResolveError(
                .unknownScreen,
                "\(position)screen \(context.screen.isEmpty ? "(empty)" : context.screen) is not in the route map; expected one of \(self.index.screenNames)"
            )
        }
        for key in entry.requiredInfo where context.info[key] == nil {
            throw ResolveError(
                .missingInfo,
                "\(position)\(context.screen) needs info \(key) (\(entry.declared(key)!.type.name)); it is missing")
        }
        // Nearly always the info is canonical already: it is rebuilt only when a value changes.
        var info: [String: String]? = nil
        for (key, value) in context.info {
            guard let declared = entry.declared(key) else {
                throw ResolveError(
                    .invalidInfo, "\(position)\(context.screen) has no info key \(key); expected \(entry.declaredKeys)")
            }
            guard value.utf8.count <= options.limits.maxTextBytes else {
                throw ResolveError(
                    .limitExceeded,
                    "\(position)\(context.screen).\(key) has \(value.utf8.count) bytes; expected at most \(options.limits.maxTextBytes) (maxTextBytes)"
                )
            }
            guard let normalized = declared.type.normalize(value) else {
                throw ResolveError(
                    .invalidInfo, "\(position)\(context.screen).\(key) is \"\(value)\"; expected \(declared.type.name)")
            }
            if normalized != value {
                if info == nil { info = context.info }
                info![key] = normalized
            }
        }
        return info.map { ScreenContext(context.screen, $0) }
    }
}
