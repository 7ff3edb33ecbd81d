/// Decides, for one session, which commands make its tree show what an intent asks for.
///
/// A pure reducer: `resolve(intent, into: &state, now:)` changes the session state and returns the
/// outcome, the commands and an explanation; it does no I/O and keeps no state of its own.
/// ``explain(_:in:now:)`` answers dry runs on a copy.
///
/// Steps, the first decisive one wins: validation, dedup, guards, already shown, context
/// switchers, blocking modals, the transition provider, back-stack synthesis; a path intent goes
/// through them context by context into one atomic batch.
public struct Resolver: Sendable {
    public struct Options: Hashable, Sendable {
        /// How long an intent id is remembered for dedup, in nanoseconds.
        public var dedupWindow: Int64 = 10 * 60 * 1_000_000_000
        /// How many ids a session remembers at most (the oldest go first).
        public var dedupCapacity: Int = 256
        /// The key of the ids' hashes (``RecentIntentIDs``): the state file's.
        public var dedupKey = DedupKey(k0: 0, k1: 0)
        /// How long an intent may stay parked when it does not say, in nanoseconds.
        public var defaultTTL: Int64 = 5 * 60 * 1_000_000_000
        /// The longest path an intent may give.
        public var maxPathLength: Int = 16
        /// The most intents one session may keep parked: one more is refused (`limitExceeded`).
        /// ``Resolver/expire(_:now:)`` expires the oldest beyond it (a lowered limit).
        public var maxParked: Int = 64
        /// How large a session's tree may grow.
        public var limits = TreeLimits()
        /// The most conditions one session may hold, and the longest condition name (bytes).
        public var maxConditions: Int = 64
        public var maxConditionKeyBytes: Int = 64

        public init() {}
    }

    /// What never changes after `init`, behind one reference: a resolver (and every
    /// ``PlanningContext`` made from it) is copied for one reference count, not one per field.
    final class Core: Sendable {
        let map: RouteMap
        let switchers: [any ContextSwitcher]
        let transitions: any TransitionProvider
        let urlPatterns: [(pattern: URLPattern, screen: String)]
        let index: RouteIndex
        /// The switchers' names, for explanations, worked out once.
        let switcherNames: [String]
        /// The URL patterns, for errors.
        let knownURLs: String
        /// A new session's state (``Resolver/initialState()``), made once: each new session's
        /// copy shares its arrays until the session changes them (its first change copies the
        /// tab bar and the one stack it changes, not every tab's stack made anew).
        let initial: SessionState

        init(map: RouteMap, switchers: [any ContextSwitcher], transitions: any TransitionProvider) {
            self.map = map
            self.switchers = switchers
            self.transitions = transitions
            index = RouteIndex(map)
            switcherNames = switchers.map(\.name)
            urlPatterns = map.screens.keys.sorted().compactMap { name in
                map.screens[name]!.url.flatMap { try? URLPattern($0) }.map { ($0, name) }
            }
            knownURLs = urlPatterns.map(\.pattern.text).joined(separator: ", ")
            initial = SessionState(tree: map.initialTree())
        }
    }

    let core: Core
    public var options: Options

    public var map: RouteMap { core.map }
    public var switchers: [any ContextSwitcher] { core.switchers }
    public var transitions: any TransitionProvider { core.transitions }
    var urlPatterns: [(pattern: URLPattern, screen: String)] { core.urlPatterns }
    var index: RouteIndex { core.index }
    var switcherNames: [String] { core.switcherNames }

    public static let defaultSwitchers: [any ContextSwitcher] = [ExistingScreenSwitcher(), TabRootSwitcher()]

    /// A resolver for a route map, which is validated first.
    public init(
        map: RouteMap, switchers: [any ContextSwitcher] = Resolver.defaultSwitchers,
        transitions: any TransitionProvider = RouteMapTransitions(), options: Options = Options()
    ) throws(RouteMapErrors) {
        core = Core(map: try map.validated(), switchers: switchers, transitions: transitions)
        self.options = options
    }

    /// The state of a session nobody has navigated yet.
    public func initialState() -> SessionState { core.initial }

    var context: PlanningContext { PlanningContext(resolver: self) }

    // MARK: Resolving an intent

    /// Resolves an intent, changing the session: the reducer. `now` is unix nanoseconds.
    ///
    /// A rejected intent leaves `state` exactly as it was. The state is changed in place, so a
    /// caller that owns it uniquely pays no copy.
    public func resolve(_ intent: Intent, into state: inout SessionState, now: Int64) -> Resolution {
        var buffers = ResolutionBuffers()
        return resolve(intent, into: &state, now: now, buffers: &buffers)
    }

    /// ``resolve(_:into:now:)``, the resolution built in arrays kept in `buffers`: a caller
    /// that resolves again and again hands each resolution back when it is done with it
    /// (``ResolutionBuffers/recycle(_:)-(Resolution)``), and the common intent makes no array of its own.
    public func resolve(
        _ intent: Intent, into state: inout SessionState, now: Int64, buffers: inout ResolutionBuffers
    ) -> Resolution {
        var steps = buffers.steps.take()  // validate, a plan, perhaps a back stack or a path's note
        var path: [ScreenContext]
        do {
            path = try validate(intent)
        } catch {
            steps.append(.init(.validate, Detail(error.message), decisive: true))
            return Resolution(intent: intent, outcome: .rejected(error), explanation: steps, released: [])
        }
        steps.append(.init(.validate, .validPath(path)))
        var fallback: String? = nil
        if state.appVersion != nil {
            do {
                let adapted = try adapted(path, for: state)
                path = adapted.path
                for reason in adapted.reasons { steps.append(.init(.validate, Detail(reason))) }
                if !adapted.reasons.isEmpty { fallback = adapted.reasons.joined(separator: "; ") }
            } catch {
                steps.append(.init(.validate, Detail(error.message), decisive: true))
                return Resolution(intent: intent, outcome: .rejected(error), explanation: steps, released: [])
            }
        }

        let idHash = options.dedupKey.intentIDHash(intent.id)
        if let seen = state.recentIntentIDs.seen(idHash, within: options.dedupWindow, now: now) {
            steps.append(
                .init(.dedup, "intent id \(intent.id) was already seen \(Self.ago(now - seen))", decisive: true))
            return Resolution(
                intent: intent, outcome: .ignored("duplicate intent id \(intent.id)"), explanation: steps, released: [])
        }
        var normalized = intent
        normalized.target = .path(path)
        var previousConditions: [String: Bool]? = nil
        let conditionsChanged = intent.setConditions.contains { state.conditions[$0.key] != $0.value }
        if let problem = conditionsProblem(intent.setConditions, in: state) {
            steps.append(.init(.validate, Detail(problem.message), decisive: true))
            return Resolution(intent: intent, outcome: .rejected(problem), explanation: steps, released: [])
        }
        if conditionsChanged {
            previousConditions = state.conditions
            state.conditions.merge(intent.setConditions) { _, new in new }
        }
        let version = state.tree.version
        var resolution = decide(
            normalized, path: path, state: &state, now: now, steps: consume steps, releasing: nil,
            scratch: &buffers.plans)
        resolution.fallback = fallback
        if case .rejected = resolution.outcome {
            if let previousConditions { state.conditions = previousConditions }
            return resolution
        }
        state.recentIntentIDs.insert(
            idHash, now: now, window: options.dedupWindow, capacity: options.dedupCapacity)
        if conditionsChanged || state.tree.version != version {
            resolution.released = release(in: &state, now: now, except: intent.id, buffers: &buffers)
        }
        return resolution
    }

    /// What resolving `intent` would do now, without changing anything (a dry run).
    public func explain(_ intent: Intent, in state: SessionState, now: Int64) -> Resolution {
        var copy = state
        return resolve(intent, into: &copy, now: now)
    }

    /// Guards, then each context of the path in turn (already shown, switchers, blocking,
    /// transition) into one batch applied to `state` — or a park, or a rejection that leaves
    /// `state` as it was. When `parked` is being released and must wait again, only its reason
    /// changes: a guard's screen the user has left is not shown again.
    func decide(
        _ intent: Intent, path: [ScreenContext], state: inout SessionState, now: Int64,
        steps: consuming [ExplanationStep], releasing parked: Releasing?, scratch: inout PlanScratch
    ) -> Resolution {
        var steps = steps  // taken over, not copied: the caller's is consumed
        let context = self.context
        func finish(_ outcome: Resolution.Outcome) -> Resolution {
            Resolution(intent: intent, outcome: outcome, explanation: steps, released: [])
        }

        // New screens take service ids above the highest issued; the namespace ends below 2^63.
        guard state.tree.lastServiceID < NodeID.clientBit - UInt64(1 << 20) else {
            let error = ResolveError(
                .limitExceeded,
                "the session's service ids are used up (highest #\(state.tree.lastServiceID)); expected a fresh session"
            )
            steps.append(.init(.transition, Detail(error.message), decisive: true))
            return finish(.rejected(error))
        }

        // Waiting for a ready shell (a deep link while the app starts).
        if intent.waitForReady && !state.shellReady {
            if parked == nil, let full = parkingFull(state) {
                steps.append(.init(.ready, Detail(full.message), decisive: true))
                return finish(.rejected(full))
            }
            steps.append(.init(.ready, "the session's shell is not ready; the intent waits for it", decisive: true))
            state.park(intent, reason: .notReady, now: now, previous: parked, options: options)
            return finish(.parked(.notReady, redirect: []))
        }

        // 3. Guards.
        for element in path {
            guard let guardSpec = index.entry(element.screen)?.spec.guardCondition, !state.isMet(guardSpec.condition)
            else {
                continue
            }
            let reason = ParkReason.guardUnmet(condition: guardSpec.condition, redirect: guardSpec.redirect)
            if parked == nil, let full = parkingFull(state) {
                steps.append(
                    .init(.guard, "\(element.screen) needs \(guardSpec.condition); \(full.message)", decisive: true))
                return finish(.rejected(full))
            }
            var redirect: [Command] = []
            var note: Detail = "\(element.screen) needs \(guardSpec.condition)"
            scratch.ids = IDAllocator(after: state.tree)
            if parked != nil {
                note += "; still not met"
            } else if let step = try? planStep(
                to: ScreenContext(guardSpec.redirect), in: state.tree, scratch: &scratch, context: context),
                blocker(of: step.plan.commands, in: state.tree) == nil
            {
                redirect = step.plan.commands
                note +=
                    redirect.isEmpty
                    ? "; \(guardSpec.redirect) is already shown"
                    : "; showing \(guardSpec.redirect): \(step.plan.detail)"
            } else {
                note += "; \(guardSpec.redirect) cannot be shown now"
            }
            steps.append(.init(.guard, note + "; the intent waits", decisive: true))
            do {
                try state.tree.apply(redirect, within: options.limits)
            } catch {
                return finish(.rejected(ResolveError(treeError: error, "guard redirect")))
            }
            state.park(intent, reason: reason, now: now, previous: parked, options: options)
            return finish(.parked(reason, redirect: redirect))
        }

        // What the batch does once its commands are applied to `state.tree`.
        func conclude(_ commands: consuming [Command]) -> Resolution {
            if let parked { state.parked.remove(intent: parked.id) }
            if commands.isEmpty {
                scratch.keepCommands(&commands)  // its room, for the next plan
                steps.append(
                    .init(.alreadyShown, .sentence(.nothingToDo(path.last!)), decisive: true))
                return finish(.ignored("\(path.last!) is already shown"))
            }
            let onlyRefresh = commands.allSatisfy { if case .refresh = $0 { true } else { false } }
            if let last = steps.indices.last(where: { steps[$0].step != .backStack }) { steps[last].decisive = true }
            if path.count > 1 {
                steps.append(
                    .init(.path, .sentence(.pathResolved(contexts: path.count, commands: commands.count))))
            }
            return finish(onlyRefresh ? .refreshed(commands) : .resolved(commands))
        }

        // 4-8 for one context (nearly every intent), when nothing is to be undone first: planned
        // on the session's tree and, unless a blocking modal is in the way, applied to it (all or
        // nothing) without a working copy of the whole tree: ``ScreenTree/apply(_:within:)``
        // changes it in place and puts back what it changed if the batch is refused.
        scratch.ids = IDAllocator(after: state.tree)
        let idsAtStart = scratch.ids
        var blockedPlan: (step: StepPlan, by: (index: Int, modal: Modal))? = nil
        if path.count == 1, !reconciledRootNeeded(for: state.tree), !dismissesRedirect(of: parked, in: state.tree) {
            var step: StepPlan
            do {
                step = try planStep(to: path[0], in: state.tree, scratch: &scratch, context: context)
            } catch {
                steps.append(.init(.transition, Detail(error.message), decisive: true))
                return finish(.rejected(error))
            }
            let blocking = blocker(of: step.plan.commands, in: state.tree)
            if blocking == nil {
                let note = step.plan.detail
                step.plan.detail = ""
                steps.append(.init(step.kind, note))
                if !step.plan.synthesized.isEmpty {
                    steps.append(.init(.backStack, .sentence(.built(step.plan.synthesized))))
                }
                var commands: [Command] = []
                swap(&commands, &step.plan.commands)  // the plan's array, held once
                do {
                    try state.tree.apply(commands, within: options.limits)
                } catch {
                    steps.append(.init(step.kind, Detail(error.message), decisive: true))
                    return finish(.rejected(ResolveError(treeError: error, "the planned commands do not apply")))
                }
                return conclude(consume commands)
            }
            // The intent parks, or (critical) dismisses the modal first: below, from this plan and
            // this blocker.
            blockedPlan = (step, blocking!)
        }

        // 4-8, for each context of the path, planned on a working copy of the tree.
        var tree = state.tree
        var commands: [Command] = []
        var composed = path.count > 1  // several plans in one batch: publish their net effect
        if let root = reconciledRoot(for: tree, ids: &scratch.ids) {
            // The route map was reloaded with other tabs (or another kind of root): plans name
            // the map's tabs, so the session starts again from the map's initial root.
            let reset = Command.setRoot(root)
            do {
                try tree.apply(reset, within: options.limits)
            } catch {
                return finish(.rejected(ResolveError(treeError: error, "resetting the root to the route map's")))
            }
            commands.append(reset)
            composed = true
            steps.append(
                .init(.transition, "the route map's root differs from the session's tree (reloaded); the root is reset")
            )
        }
        if case .guardUnmet(_, let redirectScreen)? = parked?.reason,
            let index = tree.modals.firstIndex(where: { $0.stack[0].context.screen == redirectScreen })
        {
            // The guard is met now: the screen shown instead (login) has done its job.
            let dismiss = Command.dismissTo(index == 0 ? nil : tree.modals[index - 1].id)
            if (try? tree.apply(dismiss, within: options.limits)) != nil {
                commands.append(dismiss)
                composed = true
                steps.append(.init(.release, "\(redirectScreen) is no longer needed; dismissing it"))
            }
        }
        for (index, element) in path.enumerated() {
            let label: Detail = path.count > 1 ? .pathStep(index + 1, of: path.count, element) : ""
            var step: StepPlan
            let idsBefore = index == 0 && blockedPlan != nil ? idsAtStart : scratch.ids
            do {
                if index == 0, let blockedPlan {
                    step = blockedPlan.step  // planned above on this very tree
                } else {
                    step = try planStep(to: element, in: tree, scratch: &scratch, context: context)
                }
            } catch {
                steps.append(.init(.transition, label + Detail(error.message), decisive: true))
                return finish(.rejected(error))
            }
            // The plan's detail is taken out of the plan, so the label goes in front of it in place.
            var note = step.plan.detail
            step.plan.detail = ""
            note.prefix(label)
            steps.append(.init(step.kind, note))
            if !step.plan.synthesized.isEmpty {
                var built = Detail.sentence(.built(step.plan.synthesized))
                built.prefix(label)
                steps.append(.init(.backStack, built))
            }
            // 6. Blocking modals.
            let blockedBy =
                index == 0 && blockedPlan != nil ? blockedPlan!.by : blocker(of: step.plan.commands, in: tree)
            if let (blockIndex, modal) = blockedBy {
                let blocking = modal.stack[0]
                guard intent.priority == .critical else {
                    if parked == nil, let full = parkingFull(state) {
                        steps.append(.init(.blocking, label + Detail(full.message), decisive: true))
                        return finish(.rejected(full))
                    }
                    var note = Detail.sentence(.wouldCover(blocking))
                    note.prefix(label)
                    steps.append(.init(.blocking, note, decisive: true))
                    let reason = ParkReason.blocked(by: modal.id, screen: blocking.context.screen)
                    state.park(intent, reason: reason, now: now, previous: parked, options: options)
                    // The plan is not used: its array goes back, held once (the blocked plan let go).
                    blockedPlan = nil
                    scratch.keepCommands(&step.plan.commands)
                    return finish(.parked(reason, redirect: []))
                }
                let dismiss = Command.dismissTo(blockIndex == 0 ? nil : tree.modals[blockIndex - 1].id)
                do {
                    try tree.apply(dismiss, within: options.limits)
                    commands.append(dismiss)
                    composed = true
                    scratch.ids = idsBefore  // the first plan is discarded, and so are its ids
                    step = try planStep(to: element, in: tree, scratch: &scratch, context: context)
                } catch {
                    steps.append(.init(.blocking, label + Detail(String(describing: error)), decisive: true))
                    return finish(.rejected(ResolveError(.internalError, "\(error)")))
                }
                steps.append(
                    .init(
                        .blocking,
                        label + "critical priority: dismissing the blocking \(blocking); then \(step.plan.detail)"))
            }
            do {
                try tree.apply(step.plan.commands, within: options.limits)
            } catch {
                steps.append(.init(step.kind, label + Detail(error.message), decisive: true))
                return finish(.rejected(ResolveError(treeError: error, "the planned commands do not apply")))
            }
            if commands.isEmpty {
                swap(&commands, &step.plan.commands)  // the plan's own array: nothing copied
            } else {
                commands += step.plan.commands
            }
            scratch.keepCommands(&step.plan.commands)  // for the next context's plan
        }

        if composed {
            // Later steps may undo earlier ones (a push into a sheet that the next step
            // dismisses): publish the way from where the user is to where the path ends.
            do {
                // The batch as a whole, exactly as a shell will apply it.
                var batch = try state.tree.change(to: tree, within: options.limits, into: scratch.commandArray())
                swap(&batch, &commands)
                scratch.keepCommands(&batch)
            } catch {
                return finish(.rejected(ResolveError(treeError: error, "the batch does not apply")))
            }
        } else {
            // One plan, already applied as a whole to a copy of this very tree just above: that
            // copy is the result (applying the batch again would only repeat the work).
            state.tree = tree
        }
        return conclude(consume commands)
    }

    /// Whether ``reconciledRoot(for:ids:)`` would reset the tree's root (without building it).
    func reconciledRootNeeded(for tree: ScreenTree) -> Bool {
        guard case .tabs(let bar) = tree.root else { return false }
        let names = index.tabNames
        guard !names.isEmpty, bar.tabs.count == names.count else { return true }
        // Each tab's name read where it is: `zip` copied every tab out (its name and its stack
        // retained and released), twice for every intent.
        for position in names.indices where bar.tabs[position].name != names[position] { return true }
        return false
    }

    /// Whether the released guard's redirect screen is up in a modal, to be dismissed first.
    func dismissesRedirect(of parked: Releasing?, in tree: ScreenTree) -> Bool {
        guard case .guardUnmet(_, let redirectScreen)? = parked?.reason else { return false }
        return tree.modals.contains { $0.stack[0].context.screen == redirectScreen }
    }

    /// The route map's initial root with fresh ids, if `tree`'s tab bar does not match the map's
    /// (other tab names or order, or a tab bar under a single-stack map): nil when it matches.
    func reconciledRoot(for tree: ScreenTree, ids: inout IDAllocator) -> Root? {
        // Nearly always the tabs match: find that out without building the initial tree.
        guard reconciledRootNeeded(for: tree) else { return nil }
        switch (tree.root, core.initial.tree.root) {
        case (.tabs(let have), .tabs(var want)):
            guard have.tabs.map(\.name) != want.tabs.map(\.name) else { return nil }
            for index in want.tabs.indices {
                want.tabs[index].stack = want.tabs[index].stack.map { Screen(id: ids.take(), $0.context) }
            }
            return .tabs(want)
        case (.tabs, .stack(let screens)):
            return .stack(screens.map { Screen(id: ids.take(), $0.context) })
        case (.stack, _):
            // A single stack under a tab-bar map is a set-root screen's doing: transitions
            // restore the tab bar themselves.
            return nil
        }
    }

    /// A parked intent being released, as ``decide(_:path:state:now:steps:releasing:scratch:)``
    /// needs it: its id and when it was parked (to take it off the list once shown, or to change
    /// its reason when it must wait again) and why it waited; not the whole parked intent, whose
    /// copy retains every string, array and dictionary of its intent.
    struct Releasing {
        let id: String
        let parkedAt: Int64
        let reason: ParkReason
    }

    struct StepPlan {
        var plan: Plan
        var kind: ExplanationStep.Step
    }

    /// Steps 4, 5 and 7 for one context: already shown, switchers, transition.
    func planStep(
        to target: ScreenContext, in tree: ScreenTree, scratch: inout PlanScratch, context: PlanningContext
    ) throws(ResolveError) -> StepPlan {
        let top = tree.top
        if context.matches(top, target) {
            let refresh = context.refresh(top, to: target)
            var detail = Detail.sentence(.alreadyOnTop(top))
            if !refresh.isEmpty { detail += "; refreshing its info" }
            return StepPlan(plan: Plan(refresh, detail), kind: .alreadyShown)
        }
        for (switcher, name) in zip(switchers, switcherNames) {
            if var plan = switcher.plan(to: target, in: tree, context: context, scratch: &scratch) {
                if !plan.detail.namesItsSwitcher { plan.detail.prefix(name, ": ") }
                return StepPlan(plan: plan, kind: .switcher)
            }
        }
        return StepPlan(
            plan: try transitions.plan(to: target, in: tree, context: context, scratch: &scratch), kind: .transition)
    }

    /// The first blocking modal the commands would dismiss, cover or change beneath, if any.
    ///
    /// Decided on the result, not command by command: the commands may change stacks inside
    /// the blocking modal (or a modal above it) and refresh info, but not the root, not the
    /// modals beneath it, not present anything over it, and not remove or replace a blocking
    /// screen.
    func blocker(of commands: [Command], in tree: ScreenTree) -> (index: Int, modal: Modal)? {
        let context = self.context
        guard let first = tree.modals.firstIndex(where: context.isBlocking) else { return nil }
        let verdict = (first, tree.modals[first])
        guard !commands.isEmpty else { return nil }
        // Nearly every plan made while a blocking modal is up dismisses every modal first (a
        // push onto a home tab, a screen found in a tab) or sets the root: the blocking modal
        // would go, and that is the verdict, found without applying the batch to a copy of the
        // tree (which copies every array the batch changes).
        for command in commands {
            switch command {
            case .setRoot, .dismissTo(nil): return verdict
            case .dismissTo(let id?):
                guard let index = tree.modalIndex(id), index >= first else { return verdict }
            default: continue
            }
        }
        return blocksOnTheResult(commands, in: tree, first: first) ? verdict : nil
    }

    /// Whether the commands, applied to a copy of `tree` whose first blocking modal is at
    /// `first`, change the root or the modals beneath it, present over it, or remove or replace
    /// a blocking screen (or do not apply): ``blocker(of:in:)``'s decision on the result.
    func blocksOnTheResult(_ commands: [Command], in tree: ScreenTree, first: Int) -> Bool {
        guard let after = try? tree.applying(commands) else { return true }
        if after.root != tree.root || after.modals.count > tree.modals.count { return true }
        if after.modals.count < first || Array(after.modals.prefix(first)) != Array(tree.modals.prefix(first)) {
            return true
        }
        let context = self.context
        let blockingScreens = tree.modals[first...].flatMap(\.stack).filter(context.isBlocking)
        return blockingScreens.contains { after.locate($0.id)?.screen.context.screen != $0.context.screen }
    }

    /// Why the session cannot park one more intent, if it cannot.
    func parkingFull(_ state: SessionState) -> ResolveError? {
        guard state.parked.count >= options.maxParked else { return nil }
        return ResolveError(
            .limitExceeded,
            "the session has \(state.parked.count) parked intents; expected fewer than \(options.maxParked) (maxParkedPerSession) before one more may wait"
        )
    }

    /// Why setting these conditions would break a limit, if it would.
    func conditionsProblem(_ set: [String: Bool], in state: SessionState) -> ResolveError? {
        guard !set.isEmpty else { return nil }
        if let long = set.keys.first(where: { $0.utf8.count > options.maxConditionKeyBytes || $0.isEmpty }) {
            return ResolveError(
                .limitExceeded,
                "condition name of \(long.utf8.count) bytes; expected 1 to \(options.maxConditionKeyBytes) bytes (maxConditionKeyBytes)"
            )
        }
        let count = state.conditions.count + set.keys.filter { state.conditions[$0] == nil }.count
        guard count <= options.maxConditions else {
            return ResolveError(
                .limitExceeded,
                "the session would hold \(count) conditions; expected at most \(options.maxConditions) (maxConditions)")
        }
        return nil
    }

    static func ago(_ nanoseconds: Int64) -> String {
        let milliseconds = nanoseconds / 1_000_000
        return milliseconds < 1000 ? "\(milliseconds) ms ago" : "\(milliseconds / 1000) s ago"
    }
}

extension SessionState {
    /// Parks (or re-parks, keeping its place and expiry) an intent.
    mutating func park(
        _ intent: Intent, reason: ParkReason, now: Int64, previous: Resolver.Releasing?, options: Resolver.Options
    ) {
        if let previous, let index = parked.index(ofIntent: previous.id, parkedAt: previous.parkedAt) {
            parked[index].reason = reason
            return
        }
        let ttl = intent.ttlMilliseconds > 0 ? Int64(intent.ttlMilliseconds) * 1_000_000 : options.defaultTTL
        parked.append(ParkedIntent(intent: intent, reason: reason, parkedAt: now, expiresAt: now + ttl))
    }
}
