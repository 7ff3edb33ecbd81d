extension Resolver {
    /// Applies what a client shell reports. The tree changes through the same commands the
    /// event stands for (returned as `echo`, for the session's other shells); parked intents the
    /// change unblocks are released. A refused event leaves the state as it was.
    public func apply(_ event: ClientEvent, to state: SessionState, now: Int64) -> EventResolution {
        var newState = state
        let echo: [Command]
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
                    state,
                    "pushed screen id \(screen.id) is in the service namespace; expected a client id (top bit set)")
            }
            echo = [.push(screen, onto: ref)]
        case .presented(let modal):
            guard modal.id.isClientAssigned, modal.stack.allSatisfy(\.id.isClientAssigned) else {
                return refused(state, "presented modal uses service-namespace ids; expected client ids (top bit set)")
            }
            echo = [.present(modal)]
        case .sync(let tree):
            echo = state.tree.commands(to: tree)
        case .conditions(let conditions):
            newState.conditions.merge(conditions) { _, new in new }
            echo = []
        }
        do {
            try newState.tree.apply(echo)
        } catch {
            return refused(state, "\(error.message)")
        }
        let unchanged = newState == state && event != .ready
        guard !unchanged, !newState.parked.isEmpty else {
            return EventResolution(state: newState, echo: echo, released: [], error: nil)
        }
        let (released, finalState) = release(in: newState, now: now)
        return EventResolution(state: finalState, echo: echo, released: released, error: nil)
    }

    private func refused(_ state: SessionState, _ message: String) -> EventResolution {
        EventResolution(state: state, echo: [], released: [], error: ResolveError(.invalidEvent, message))
    }

    /// Re-resolves parked intents after a change, highest priority first, then oldest first.
    /// Those that can now be shown (or turn out to be shown already) leave the parked list.
    func releaseParked(after resolution: Resolution, now: Int64) -> Resolution {
        guard !resolution.state.parked.isEmpty else { return resolution }
        var result = resolution
        let (released, state) = release(in: resolution.state, now: now, except: resolution.intent.id)
        result.released = released
        result.state = state
        return result
    }

    func release(in state: SessionState, now: Int64, except skipped: String? = nil) -> ([Resolution], SessionState) {
        var state = state
        var released: [Resolution] = []
        let order = state.parked.enumerated().sorted {
            ($0.element.intent.priority, -$0.offset) > ($1.element.intent.priority, -$1.offset)
        }.map(\.element)
        for parked in order where parked.intent.id != skipped && parked.expiresAt > now {
            guard case .path(let path) = parked.intent.target else { continue }
            let note = ExplanationStep(
                .release, "parked \(Self.ago(now - parked.parkedAt)) (\(parked.reason)); trying again")
            let attempt = decide(parked.intent, path: path, state: state, now: now, steps: [note], releasing: parked)
            if case .parked(let reason, _) = attempt.outcome {
                // Still waiting. Nothing else changes: a guard's screen the user has left is not
                // shown again on every change of the session.
                if let index = state.parked.firstIndex(where: { $0.intent.id == parked.intent.id }) {
                    state.parked[index].reason = reason
                }
                continue
            }
            state = attempt.state
            state.parked.removeAll { $0.intent.id == parked.intent.id }
            released.append(attempt)
        }
        return (released, state)
    }

    /// Removes parked intents whose time to live has run out, and the oldest beyond
    /// ``Options/maxParked``; returns them so they can be reported.
    public func expire(_ state: SessionState, now: Int64) -> (state: SessionState, expired: [ParkedIntent]) {
        guard !state.parked.isEmpty else { return (state, []) }
        var state = state
        var expired = state.parked.filter { $0.expiresAt <= now }
        state.parked.removeAll { $0.expiresAt <= now }
        if state.parked.count > options.maxParked {
            let excess = state.parked.count - options.maxParked
            expired += state.parked.prefix(excess)
            state.parked.removeFirst(excess)
        }
        return (state, expired)
    }
}
