extension Resolver {
    /// Applies what a client shell reports. The tree changes through the same commands the
    /// event stands for (returned as `echo`, for the session's other shells); parked intents the
    /// change unblocks are released. A refused event leaves `state` as it was.
    public func apply(_ event: ClientEvent, to state: inout SessionState, now: Int64) -> EventResolution {
        let echo: [Command]
        var conditions: [String: Bool] = [:]
        switch event {
        case .ready, .ack:
            echo = []
        case .poppedTo(let id):
            echo = [.popTo(id)]
        case .dismissedTo(let id):
            echo = [.dismissTo(id)]
        case .tabSelected(let name):
            echo = [.selectTab(name)]
        case .pushed(let screen, let ref):
            guard screen.id.isClientAssigned else {
                return refused(
                    "pushed screen id \(screen.id) is in the service namespace; expected a client id (top bit set)")
            }
            echo = [.push(screen, onto: ref)]
        case .presented(let modal):
            guard modal.id.isClientAssigned, modal.stack.allSatisfy(\.id.isClientAssigned) else {
                return refused("presented modal uses service-namespace ids; expected client ids (top bit set)")
            }
            echo = [.present(modal)]
        case .sync(let tree):
            echo = state.tree.commands(to: tree)
        case .conditions(let set):
            echo = []
            conditions = set
        }
        let version = state.tree.version
        do {
            try state.tree.apply(echo)
        } catch {
            return refused("\(error.message)")
        }
        let conditionsChanged = conditions.contains { state.conditions[$0.key] != $0.value }
        if conditionsChanged { state.conditions.merge(conditions) { _, new in new } }
        let changed = conditionsChanged || state.tree.version != version || event == .ready
        guard changed, !state.parked.isEmpty else { return EventResolution(echo: echo, released: [], error: nil) }
        return EventResolution(echo: echo, released: release(in: &state, now: now), error: nil)
    }

    private func refused(_ message: String) -> EventResolution {
        EventResolution(echo: [], released: [], error: ResolveError(.invalidEvent, message))
    }

    /// Re-resolves parked intents after a change, highest priority first, then oldest first.
    /// Only what can have changed is tried: a blocked intent once its blocker is gone, a guarded
    /// one once its condition holds. Those that can now be shown (or turn out to be shown
    /// already) leave the parked list.
    func release(in state: inout SessionState, now: Int64, except skipped: String? = nil) -> [Resolution] {
        func canGo(_ parked: ParkedIntent) -> Bool {
            guard parked.intent.id != skipped, parked.expiresAt > now else { return false }
            switch parked.reason {
            case .blocked(let blocker, _): return state.tree.modalIndex(blocker) == nil
            case .guardUnmet(let condition, _): return state.isMet(condition)
            }
        }
        // Most changes release nothing: find that out without copying or sorting the list.
        guard state.parked.contains(where: canGo) else { return [] }
        var released: [Resolution] = []
        let order = state.parked.indices.sorted {
            (state.parked[$0].intent.priority, -$0) > (state.parked[$1].intent.priority, -$1)
        }.map { state.parked[$0] }
        for parked in order where canGo(parked) {
            guard case .path(let path) = parked.intent.target else { continue }
            let note = ExplanationStep(
                .release, "parked \(Self.ago(now - parked.parkedAt)) (\(parked.reason)); trying again")
            let attempt = decide(parked.intent, path: path, state: &state, now: now, steps: [note], releasing: parked)
            if case .parked = attempt.outcome { continue }  // still waiting; only its reason changed
            state.parked.removeAll { $0.intent.id == parked.intent.id }
            released.append(attempt)
        }
        return released
    }

    /// Removes parked intents whose time to live has run out, and the oldest beyond
    /// ``Options/maxParked``; returns them so they can be reported.
    public func expire(_ state: inout SessionState, now: Int64) -> [ParkedIntent] {
        guard !state.parked.isEmpty else { return [] }
        var expired: [ParkedIntent] = []
        if state.parked.contains(where: { $0.expiresAt <= now }) {
            expired = state.parked.filter { $0.expiresAt <= now }
            state.parked.removeAll { $0.expiresAt <= now }
        }
        if state.parked.count > options.maxParked {
            let excess = state.parked.count - options.maxParked
            expired += state.parked.prefix(excess)
            state.parked.removeFirst(excess)
        }
        return expired
    }
}
