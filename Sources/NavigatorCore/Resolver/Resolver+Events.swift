extension Resolver {
    /// Applies what a client shell reports. The tree changes through the same commands the
    /// event stands for (returned as `echo`, for the session's other shells); parked intents the
    /// change unblocks are released. A refused event leaves `state` as it was.
    ///
    /// `authoritative`: a sync made without a position (an app that started over), which also
    /// makes the shell not ready until its next `ready`.
    public func apply(_ event: ClientEvent, to state: inout SessionState, now: Int64, authoritative: Bool = false)
        -> EventResolution
    {
        var buffers = ResolutionBuffers()
        return apply(event, to: &state, now: now, authoritative: authoritative, buffers: &buffers)
    }

    /// ``apply(_:to:now:authoritative:)``, the result built in arrays kept in `buffers`, to be
    /// handed back when the caller is done with it (``ResolutionBuffers/recycle(_:)-(EventResolution)``).
    public func apply(
        _ event: ClientEvent, to state: inout SessionState, now: Int64, authoritative: Bool = false,
        buffers: inout ResolutionBuffers
    ) -> EventResolution {
        var echo: [Command]
        var conditions: [String: Bool] = [:]
        var readiness: Bool? = nil
        var appVersion: AppVersion?? = nil
        switch event {
        case .ready(let version):
            echo = []
            readiness = true
            appVersion = .some(version)
        case .suspended:
            echo = []
            readiness = false
        case .ack:
            echo = []
        case .poppedTo(let id):
            echo = buffers.plans.commandArray()
            echo.append(.popTo(id))
        case .dismissedTo(let id):
            echo = buffers.plans.commandArray()
            echo.append(.dismissTo(id))
        case .tabSelected(let name):
            echo = buffers.plans.commandArray()
            echo.append(.selectTab(name))
        case .pushed(let screen, let ref):
            guard screen.id.isClientAssigned else {
                return refused(
                    "pushed screen id \(screen.id) is in the service namespace; expected a client id (top bit set)")
            }
            echo = buffers.plans.commandArray()
            echo.append(.push(screen, onto: ref))
        case .presented(let modal):
            guard modal.id.isClientAssigned, modal.stack.allSatisfy(\.id.isClientAssigned) else {
                return refused("presented modal uses service-namespace ids; expected client ids (top bit set)")
            }
            echo = buffers.plans.commandArray()
            echo.append(.present(modal))
        case .sync(let tree):
            // The service's ids are the service's to issue: a shell names only those it was sent.
            let issued = state.tree.lastServiceID
            if let invented = tree.stacks.lazy.flatMap(\.screens).map(\.id).first(where: {
                !$0.isClientAssigned && $0.rawValue > issued
            }) ?? tree.modals.map(\.id).first(where: { !$0.isClientAssigned && $0.rawValue > issued }) {
                return refused(
                    "synced tree has service id \(invented), which the service never issued (highest #\(issued)); a shell's own screens take client ids (top bit set)"
                )
            }
            echo = state.tree.commands(to: tree)
            if authoritative { readiness = false }  // an app that started over is not ready yet
        case .conditions(let set):
            if let problem = conditionsProblem(set, in: state) {
                return EventResolution(echo: [], released: [], error: problem)
            }
            echo = []
            conditions = set
        }
        let version = state.tree.version
        do {
            try state.tree.apply(echo, within: options.limits)
        } catch {
            if error.code == .limitExceeded {
                return EventResolution(echo: [], released: [], error: ResolveError(.limitExceeded, error.message))
            }
            return refused("\(error.message)")
        }
        let conditionsChanged = conditions.contains { state.conditions[$0.key] != $0.value }
        if conditionsChanged { state.conditions.merge(conditions) { _, new in new } }
        let readinessChanged = readiness.map { $0 != state.shellReady } ?? false
        if let readiness { state.shellReady = readiness }
        if let appVersion { state.appVersion = appVersion }
        let changed = conditionsChanged || state.tree.version != version || readinessChanged
        guard changed, !state.parked.isEmpty else { return EventResolution(echo: echo, released: [], error: nil) }
        return EventResolution(echo: echo, released: release(in: &state, now: now, buffers: &buffers), error: nil)
    }

    /// Why a client event made on the tree at (`epoch`, `lastSeq`) may not be applied to the
    /// session at (`currentEpoch`, `seq`), or nil if it may. The rule (README, "Client events"):
    ///
    /// - `ready`, `ack` and `conditions` do not depend on the tree: never stale;
    /// - a `sync` with `last_seq` 0 and `epoch` 0 is an app's authoritative tree (after a
    ///   restart): applied as it is;
    /// - any other event is stale when its epoch is set and differs, when `lastSeq` is ahead of
    ///   the session (another epoch's seq), or when a batch the shell has not seen changed the
    ///   tree for something else than a client event (`lastSeq < lastServiceSeq`). Echoes of
    ///   client events do not make an event stale: they only repeat what shells did.
    public func staleness(
        of event: ClientEvent, lastSeq: UInt64, epoch: UInt64, session state: SessionState, seq: UInt64,
        currentEpoch: UInt64
    ) -> ResolveError? {
        switch event {
        case .ready, .suspended, .ack, .conditions: return nil
        case .sync where lastSeq == 0 && epoch == 0: return nil
        default: break
        }
        let reason: String
        if epoch != 0 && epoch != currentEpoch {
            reason = "it was made in epoch \(epoch), and the session's stream is in epoch \(currentEpoch)"
        } else if lastSeq > seq {
            reason = "its last_seq \(lastSeq) is ahead of the session's seq \(seq) (a seq of another epoch)"
        } else if lastSeq < state.lastServiceSeq {
            reason =
                "it was made on the tree of seq \(lastSeq), and batch \(state.lastServiceSeq) changed the tree since"
        } else {
            return nil
        }
        return ResolveError(
            .staleEvent,
            "stale client event: \(reason); expected a resync (snapshot at epoch \(currentEpoch), seq \(seq))")
    }

    private func refused(_ message: String) -> EventResolution {
        EventResolution(echo: [], released: [], error: ResolveError(.invalidEvent, message))
    }

    /// Re-resolves parked intents after a change, highest priority first, then oldest first.
    /// Only what can have changed is tried: a blocked intent once its blocker is gone, a guarded
    /// one once its condition holds. Those that can now be shown (or turn out to be shown
    /// already) leave the parked list.
    func release(
        in state: inout SessionState, now: Int64, except skipped: String? = nil, buffers: inout ResolutionBuffers
    ) -> [Resolution] {
        // Given a parked intent's parts, not the parked intent, which would be copied here.
        func canGo(_ id: String, _ expiresAt: Int64, _ reason: ParkReason) -> Bool {
            guard id != skipped, expiresAt > now else { return false }
            switch reason {
            case .blocked(let blocker, _): return state.tree.modalIndex(blocker) == nil
            case .guardUnmet(let condition, _): return state.isMet(condition)
            case .notReady: return state.shellReady
            }
        }
        func canGo(_ parked: UnsafePointer<ParkedIntent>, _ index: Int) -> Bool {
            canGo(parked[index].intent.id, parked[index].expiresAt, parked[index].reason)
        }
        // Most changes release nothing: find that out without copying or sorting the list.
        guard state.parked.inPlace({ parked, count in (0..<count).contains { canGo(parked, $0) } }) == true else {
            return []
        }
        var released: [Resolution] = []
        // Highest priority first, then oldest. Each entry is found again at its turn by its id
        // and when it was parked (an attempt takes its own intent off the list, or changes only
        // its reason), so only those are copied out, and the intent of each that passes the test.
        let order =
            state.parked.inPlace { parked, count in
                (0..<count).sorted { (parked[$0].intent.priority, -$0) > (parked[$1].intent.priority, -$1) }
                    .map { (id: parked[$0].intent.id, parkedAt: parked[$0].parkedAt) }
            } ?? []
        for (id, parkedAt) in order {
            guard let index = state.parked.index(ofIntent: id, parkedAt: parkedAt),
                let (intent, releasing) = state.parked.inPlace({ parked, _ -> (Intent, Releasing)? in
                    guard canGo(parked, index) else { return nil }
                    return (parked[index].intent, Releasing(id: id, parkedAt: parkedAt, reason: parked[index].reason))
                }) ?? nil,
                case .path(let path) = intent.target
            else { continue }
            let note = ExplanationStep(.release, .sentence(.retrying(parkedFor: now &- parkedAt, releasing.reason)))
            var steps = buffers.steps.take()  // the note, a plan, perhaps a back stack and a path's
            steps.append(note)
            var attempt = decide(
                intent, path: path, state: &state, now: now, steps: consume steps, releasing: releasing,
                scratch: &buffers.plans)
            if case .parked = attempt.outcome {  // still waiting; only its reason changed
                buffers.recycle(&attempt)
                continue
            }
            state.parked.remove(intent: id)
            released.append(attempt)
        }
        return released
    }

    /// Removes parked intents whose time to live has run out, and the oldest beyond
    /// ``Options/maxParked``; returns them so they can be reported.
    public func expire(_ state: inout SessionState, now: Int64) -> [ParkedIntent] {
        guard !state.parked.isEmpty else { return [] }
        var expired: [ParkedIntent] = []
        // Found in place and moved out, not copied (as `filter` and `removeAll(where:)` do).
        let expiring = state.parked.inPlace { parked, count in (0..<count).filter { parked[$0].expiresAt <= now } }
        if let expiring, !expiring.isEmpty {
            for index in expiring.reversed() { expired.append(state.parked.remove(at: index)) }
            expired.reverse()  // in the list's order, oldest first
        }
        if state.parked.count > options.maxParked {
            let excess = state.parked.count - options.maxParked
            expired += state.parked.prefix(excess)
            state.parked.removeFirst(excess)
        }
        // Kept for the dedup window after they expired, as intent ids are.
        let cutoff = now - min(options.dedupWindow, RecentIntentIDs.longestWindow)
        state.recentlyExpired.forget(expiredAtOrBefore: cutoff)
        state.recentlyExpired.append(
            expired.map {
                ExpiredIntent(
                    intentID: $0.intent.id, source: $0.intent.source, reason: $0.reason, parkedAt: $0.parkedAt,
                    expiredAt: now)
            }, keeping: ExpiredIntent.kept)
        return expired
    }
}
