/// What changed between two route maps: screens, tabs, info keys, guards, blocking screens, URL
/// patterns and every other field of a screen, each added, removed or changed.
///
/// Changes come in a fixed order (the root and tabs first, then screen by screen, names sorted),
/// so the same two maps always give the same list.
public struct RouteMapDiff: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable, Codable {
        case added, removed, changed

        /// `+`, `-`, `~`.
        public var sign: String {
            switch self {
            case .added: "+"
            case .removed: "-"
            case .changed: "~"
            }
        }
    }

    /// What a change is about.
    public enum Subject: String, Hashable, Sendable, Codable, CaseIterable {
        /// The single-stack root screen, or the switch between tabs and a single stack.
        case root
        case tab
        /// The order of the tabs (names kept, order changed).
        case tabOrder = "tab order"
        case initialTab = "initial tab"
        case screen
        case transition
        case homeTab = "home tab"
        case parent
        case identity
        case infoKey = "info key"
        case uniqueInStack = "unique in stack"
        case blocking
        case `guard`
        case url
        /// The first app version with the screen.
        case since
        case fallback
    }

    public struct Change: Hashable, Sendable, CustomStringConvertible {
        public var kind: Kind
        public var subject: Subject
        /// What it is about: a screen (`chat`), a tab (`chats`), an info key (`chat.conversationId`).
        public var name: String
        /// The value before (nil when added) and after (nil when removed), in words.
        public var old: String?
        public var new: String?

        public init(_ kind: Kind, _ subject: Subject, _ name: String, old: String? = nil, new: String? = nil) {
            self.kind = kind
            self.subject = subject
            self.name = name
            self.old = old
            self.new = new
        }

        /// `~ url chat: app://chat/{conversationId} -> app://c/{conversationId}`
        public var description: String {
            Self.line(kind, subject.rawValue, name, old: old, new: new)
        }

        /// A change in one line, from its parts (also as the wire carries them).
        public static func line(_ kind: Kind, _ subject: String, _ name: String, old: String?, new: String?) -> String {
            var text = "\(kind.sign) \(subject)"
            if !name.isEmpty { text += " \(name)" }
            switch (old, new) {
            case (let old?, let new?): text += ": \(old) -> \(new)"
            case (nil, let new?): text += ": \(new)"
            case (let old?, nil): text += " (was: \(old))"
            case (nil, nil): break
            }
            return text
        }
    }

    public var changes: [Change]

    public var isEmpty: Bool { changes.isEmpty }

    /// Every difference from `old` to `new`.
    public init(from old: RouteMap, to new: RouteMap) {
        var changes: [Change] = []
        func note(_ kind: Kind, _ subject: Subject, _ name: String, old: String? = nil, new: String? = nil) {
            changes.append(Change(kind, subject, name, old: old, new: new))
        }

        // The root: tabs, or a single stack.
        switch (old.tabs.isEmpty, new.tabs.isEmpty) {
        case (true, true):
            if old.rootScreen != new.rootScreen {
                note(.changed, .root, "", old: old.rootScreen ?? "none", new: new.rootScreen ?? "none")
            }
        case (true, false):
            note(
                .changed, .root, "", old: "single stack of \(old.rootScreen ?? "none")",
                new: "tabs \(new.tabs.map(\.name).joined(separator: ", "))")
        case (false, true):
            note(
                .changed, .root, "", old: "tabs \(old.tabs.map(\.name).joined(separator: ", "))",
                new: "single stack of \(new.rootScreen ?? "none")")
        case (false, false):
            break
        }
        let oldTabs = Dictionary(old.tabs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let newTabs = Dictionary(new.tabs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for tab in old.tabs where newTabs[tab.name] == nil {
            note(.removed, .tab, tab.name, old: "root \(tab.root)")
        }
        for tab in new.tabs {
            if let before = oldTabs[tab.name] {
                if before.root != tab.root {
                    note(.changed, .tab, tab.name, old: "root \(before.root)", new: "root \(tab.root)")
                }
            } else {
                note(.added, .tab, tab.name, new: "root \(tab.root)")
            }
        }
        let keptOld = old.tabs.map(\.name).filter { newTabs[$0] != nil }
        let keptNew = new.tabs.map(\.name).filter { oldTabs[$0] != nil }
        if keptOld != keptNew {
            note(.changed, .tabOrder, "", old: keptOld.joined(separator: ", "), new: keptNew.joined(separator: ", "))
        }
        let oldInitial = old.tabs.isEmpty ? nil : (old.initialTab ?? old.tabs[0].name)
        let newInitial = new.tabs.isEmpty ? nil : (new.initialTab ?? new.tabs[0].name)
        if let oldInitial, let newInitial, oldInitial != newInitial {
            note(.changed, .initialTab, "", old: oldInitial, new: newInitial)
        }

        // Screens, names sorted.
        for name in Set(old.screens.keys).union(new.screens.keys).sorted() {
            switch (old.screens[name], new.screens[name]) {
            case (let before?, nil):
                note(.removed, .screen, name, old: before.summary)
                // What a reader looks for by itself is listed too: a guard, a url, a blocker.
                if let rule = before.guardCondition { note(.removed, .guard, name, old: rule.summary) }
                if before.blocking { note(.removed, .blocking, name) }
                if let url = before.url { note(.removed, .url, name, old: url) }
            case (nil, let after?):
                note(.added, .screen, name, new: after.summary)
                if let rule = after.guardCondition { note(.added, .guard, name, new: rule.summary) }
                if after.blocking { note(.added, .blocking, name) }
                if let url = after.url { note(.added, .url, name, new: url) }
            case (let before?, let after?):
                Self.compare(name, before, after, into: &changes)
            case (nil, nil):
                break
            }
        }
        self.changes = changes
    }

    static func compare(_ name: String, _ before: ScreenSpec, _ after: ScreenSpec, into changes: inout [Change]) {
        func note(_ kind: Kind, _ subject: Subject, _ name: String, old: String? = nil, new: String? = nil) {
            changes.append(Change(kind, subject, name, old: old, new: new))
        }
        func optional(_ subject: Subject, _ old: String?, _ new: String?) {
            switch (old, new) {
            case (nil, let new?): note(.added, subject, name, new: new)
            case (let old?, nil): note(.removed, subject, name, old: old)
            case (let old?, let new?) where old != new: note(.changed, subject, name, old: old, new: new)
            default: break
            }
        }
        if before.transition != after.transition {
            note(.changed, .transition, name, old: before.transition.summary, new: after.transition.summary)
        }
        optional(.homeTab, before.homeTab, after.homeTab)
        optional(.parent, before.parent, after.parent)
        if before.identity != after.identity {
            note(
                .changed, .identity, name, old: Self.list(before.identity), new: Self.list(after.identity))
        }
        for key in Set(before.info.keys).union(after.info.keys).sorted() {
            switch (before.info[key], after.info[key]) {
            case (let old?, nil): note(.removed, .infoKey, "\(name).\(key)", old: old.summary)
            case (nil, let new?): note(.added, .infoKey, "\(name).\(key)", new: new.summary)
            case (let old?, let new?) where old != new:
                note(.changed, .infoKey, "\(name).\(key)", old: old.summary, new: new.summary)
            default: break
            }
        }
        if before.uniqueInStack != after.uniqueInStack {
            note(after.uniqueInStack ? .added : .removed, .uniqueInStack, name)
        }
        if before.blocking != after.blocking { note(after.blocking ? .added : .removed, .blocking, name) }
        optional(.guard, before.guardCondition?.summary, after.guardCondition?.summary)
        optional(.url, before.url, after.url)
        optional(.since, before.since?.text, after.since?.text)
        optional(.fallback, before.fallback?.description, after.fallback?.description)
    }

    static func list(_ keys: [String]) -> String { keys.isEmpty ? "none" : keys.joined(separator: ", ") }

    /// How many changes of each kind, in words: `3 changes: 1 added, 1 removed, 1 changed`.
    public var summary: String {
        guard !changes.isEmpty else { return "no changes" }
        let counts = [Kind.added, .removed, .changed].compactMap { kind -> String? in
            let count = changes.filter { $0.kind == kind }.count
            return count == 0 ? nil : "\(count) \(kind.rawValue)"
        }
        return "\(changes.count) change\(changes.count == 1 ? "" : "s"): \(counts.joined(separator: ", "))"
    }

    /// One change a line, then the summary.
    public var description: String { (changes.map(\.description) + [summary]).joined(separator: "\n") }
}

extension ScreenSpec.Transition {
    /// `push`, `modal (sheet)`, `setRoot`, `replace`.
    public var summary: String {
        switch self {
        case .push: "push"
        case .modal(let style): "modal (\(style.rawValue))"
        case .setRoot: "setRoot"
        case .replace: "replace"
        }
    }
}

extension ScreenSpec.Guard {
    /// `authenticated, else login`.
    public var summary: String { "\(condition), else \(redirect)" }
}

extension InfoSpec {
    /// `int, required`.
    public var summary: String { "\(type.name), \(required ? "required" : "optional")" }
}

extension ScreenSpec {
    /// The screen's main facts in one line, for a screen added or removed.
    public var summary: String {
        var parts = [transition.summary]
        if let homeTab { parts.append("home tab \(homeTab)") }
        if let parent { parts.append("parent \(parent)") }
        if let since { parts.append("since \(since)") }
        if !info.isEmpty {
            parts.append("info \(info.keys.sorted().map { "\($0) (\(info[$0]!.summary))" }.joined(separator: ", "))")
        }
        return parts.joined(separator: "; ")
    }
}
