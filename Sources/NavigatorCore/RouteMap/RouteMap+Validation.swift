extension RouteMap {
    /// The most problems ``validate()`` lists (then how many more there are).
    public static let maxProblems = 1_000

    /// Names for a message: at most 20 (a map of thousands of screens must not make every problem
    /// a list of all of them), each cut to 64 bytes.
    static func list(_ names: [String]) -> String {
        func short(_ name: String) -> String {
            name.utf8.count <= 64 ? name : String(decoding: name.utf8.prefix(61), as: UTF8.self) + "…"
        }
        let shown = names.prefix(20).map(short).joined(separator: ", ")
        return names.count <= 20 ? shown : shown + ", … (\(names.count) in all)"
    }

    /// Every problem with the map, each naming its key path; empty when the map is usable.
    public func validate() -> [RouteMapError] {
        var errors: [RouteMapError] = []
        var more = 0
        // At most `maxProblems`: each names what it is about, and a map made to fail everywhere
        // must not make its problems' text grow with the square of its size.
        func fail(_ path: [String], _ message: String) {
            if errors.count < Self.maxProblems { errors.append(RouteMapError(path, message)) } else { more += 1 }
        }
        let names = screens.keys.sorted()
        let declared = Self.list(names)
        let tabList = Self.list(tabs.map(\.name))
        func known(_ name: String) -> Bool { screens[name] != nil }

        // The root: tabs or a single root screen.
        switch (tabs.isEmpty, rootScreen) {
        case (true, nil): fail([], "neither tabs nor root is given; expected a list of tabs or a root screen")
        case (false, _?): fail(["root"], "root is given together with tabs; expected one of them")
        case (true, let root?) where !known(root):
            fail(["root"], "screen \(root) is not declared under screens; expected one of \(declared)")
        default: break
        }
        var tabNames = Set<String>()
        for (index, tab) in tabs.enumerated() {
            let path = ["tabs", "\(index)"]
            if tab.name.isEmpty { fail(path + ["name"], "tab name is empty") }
            if !tabNames.insert(tab.name).inserted { fail(path + ["name"], "tab \(tab.name) is declared twice") }
            if let spec = screens[tab.root] {
                if !spec.requiredInfo.isEmpty {
                    fail(
                        path + ["root"],
                        "tab root \(tab.root) requires info \(spec.requiredInfo.joined(separator: ", ")); expected a tab root that needs none"
                    )
                }
            } else {
                fail(path + ["root"], "screen \(tab.root) is not declared under screens; expected one of \(declared)")
            }
        }
        if let initialTab, !tabNames.contains(initialTab) {
            fail(["initialTab"], "tab \(initialTab) is not declared; expected one of \(tabList)")
        }
        if screens.isEmpty { fail(["screens"], "no screens are declared") }

        var patterns: [String: String] = [:]
        for name in names {
            let spec = screens[name]!
            let path = ["screens", name]
            if name.isEmpty || name.contains("/") {
                fail(path, "screen name \"\(name)\" must be non-empty without \"/\"")
            }
            if let home = spec.homeTab, !tabNames.contains(home) {
                fail(path + ["homeTab"], "tab \(home) is not declared; expected one of \(tabList)")
            }
            for key in spec.identity {
                if let info = spec.info[key] {
                    if !info.required {
                        fail(path + ["identity"], "identity key \(key) is optional; identity keys must be required")
                    }
                } else {
                    fail(path + ["identity"], "identity key \(key) is not declared under info; expected a declared key")
                }
            }
            if Set(spec.identity).count != spec.identity.count {
                fail(path + ["identity"], "identity lists a key twice")
            }
            for (key, info) in spec.info {
                if case .oneOf(let values) = info.type, values.isEmpty {
                    fail(path + ["info", key], "enum has no values; expected at least one")
                }
            }
            if let parent = spec.parent {
                if let parentSpec = screens[parent] {
                    for key in parentSpec.requiredInfo where spec.info[key]?.required != true {
                        fail(
                            path + ["parent"],
                            "parent \(parent) requires info \(key), which \(name) does not require; "
                                + "expected \(name) to carry every key its parent needs")
                    }
                } else {
                    fail(path + ["parent"], "screen \(parent) is not declared; expected one of \(declared)")
                }
                var seen: Set<String> = [name]
                var next: String? = parent
                while let current = next {
                    if !seen.insert(current).inserted {
                        fail(path + ["parent"], "parent chain loops back to \(current); expected a chain that ends")
                        break
                    }
                    next = screens[current]?.parent
                }
            }
            if let guardSpec = spec.guardCondition {
                if guardSpec.condition.isEmpty { fail(path + ["guard", "condition"], "condition is empty") }
                if let redirect = screens[guardSpec.redirect] {
                    if !redirect.requiredInfo.isEmpty {
                        fail(
                            path + ["guard", "redirect"],
                            "redirect screen \(guardSpec.redirect) requires info; expected one that needs none")
                    }
                    if redirect.guardCondition != nil {
                        fail(
                            path + ["guard", "redirect"],
                            "redirect screen \(guardSpec.redirect) has a guard itself; expected an unguarded screen")
                    }
                } else {
                    fail(
                        path + ["guard", "redirect"],
                        "screen \(guardSpec.redirect) is not declared; expected one of \(declared)")
                }
            }
            if let fallback = spec.fallback {
                if spec.since == nil {
                    fail(
                        path + ["fallback"],
                        "fallback is given without since; expected since: <the first app version with \(name)>")
                }
                let requiredHere = Set(spec.requiredInfo)
                func needsOnly(_ other: String, _ extra: Set<String>) {
                    guard let otherSpec = screens[other] else {
                        return fail(
                            path + ["fallback"], "screen \(other) is not declared; expected one of \(declared)")
                    }
                    for key in otherSpec.requiredInfo where !requiredHere.contains(key) && !extra.contains(key) {
                        fail(
                            path + ["fallback"],
                            "fallback \(other) requires info \(key), which \(name) does not require; expected a fallback that needs only info \(name) carries"
                        )
                    }
                }
                switch fallback {
                case .parent:
                    if spec.parent == nil {
                        fail(
                            path + ["fallback"],
                            "fallback is parent, but \(name) has no parent; expected a parent, or another fallback")
                    }
                case .screen(let other):
                    needsOnly(other, [])
                case .webView(let other, let template):
                    needsOnly(other, ["url"])
                    if let otherSpec = screens[other], otherSpec.info["url"] == nil {
                        fail(
                            path + ["fallback", "url"],
                            "screen \(other) does not declare info url; expected the web-view screen to take the page's URL as its info url"
                        )
                    }
                    for key in URLTemplate.placeholders(template) where !requiredHere.contains(key) {
                        fail(
                            path + ["fallback", "url"],
                            "the url's {\(key)} is not required info of \(name); expected placeholders among \(spec.requiredInfo.joined(separator: ", "))"
                        )
                    }
                }
                var seen: Set<String> = [name]
                var next = fallbackScreen(of: name)
                while let current = next {
                    if !seen.insert(current).inserted {
                        fail(path + ["fallback"], "fallbacks loop back to \(current); expected a chain that ends")
                        break
                    }
                    next = screens[current]?.since == nil ? nil : fallbackScreen(of: current)
                }
            }
            if let url = spec.url {
                do {
                    let pattern = try URLPattern(url)
                    for key in pattern.captures where spec.info[key] == nil {
                        fail(path + ["url"], "url captures {\(key)}, which is not declared under info")
                    }
                    let shape =
                        pattern.scheme + "://"
                        + pattern.segments.map {
                            if case .literal(let text) = $0 { text } else { "{}" }
                        }.joined(separator: "/")
                    if let other = patterns[shape] {
                        fail(
                            path + ["url"],
                            "url \(url) matches the same links as the url of \(other); expected distinct patterns")
                    } else {
                        patterns[shape] = name
                    }
                } catch {
                    fail(path + ["url"], error.message)
                }
            }
        }
        if more > 0 { errors.append(RouteMapError([], "and \(more) more problems")) }
        return errors
    }

    /// The screen a screen falls back to, if it has a fallback.
    func fallbackScreen(of name: String) -> String? {
        guard let spec = screens[name] else { return nil }
        switch spec.fallback {
        case .parent: return spec.parent
        case .screen(let other), .webView(let other, _): return other
        case nil: return nil
        }
    }

    /// The map if it is valid, else every problem at once.
    public func validated() throws(RouteMapErrors) -> RouteMap {
        let errors = validate()
        guard errors.isEmpty else { throw RouteMapErrors(errors) }
        return self
    }
}
