import Locking
import NavigatorCore
import NavigatorStore
import Synchronization

/// The route maps in use, replaceable at run time: the file's (SIGHUP reloads it) and, while a
/// staged rollout runs, a candidate for a share of the sessions (``RolloutKeeper``). Workers keep
/// a copy and take a new one when the generation moves, so the hot path reads one atomic; the
/// copy they take is a `snapshot`, everything read together under one lock, so a worker can
/// never hold older maps under a newer generation.
final class ResolverHolder: Sendable {
    /// A route map as loaded: its resolver, where it came from, and its version
    /// (``RouteMapVersion``).
    struct Loaded: Sendable {
        let resolver: Resolver
        let source: String
        let version: String
    }

    /// A rollout's candidate: the sessions whose bucket is below `share` resolve with it.
    struct Candidate: Sendable {
        let loaded: Loaded
        let share: Int
    }

    struct Snapshot: Sendable {
        /// The map in use: every session's, but the candidate's share while a rollout runs.
        let resolver: Resolver
        let source: String
        let version: String
        let candidate: Candidate?
        let generation: Int

        /// The version to count figures by: only while a rollout splits sessions (counting by
        /// version costs each intent a little, and with one map the totals say the same).
        func counted(_ version: String) -> String? { candidate == nil ? nil : version }

        /// The resolver that decides for `session`, and its map's version.
        func pick(_ session: String) -> (resolver: Resolver, version: String) {
            if let candidate,
                RouteMapVersion.bucket(of: session, salt: candidate.loaded.version) < candidate.share
            {
                return (candidate.loaded.resolver, candidate.loaded.version)
            }
            return (resolver, version)
        }
    }

    /// The rollout as this instance follows it: the stored row, its candidate when it loaded
    /// (nil: it did not, on this instance — the reason in `failure`), and the figures of each
    /// map when the instance took the phase up (a rollout's figures count from there).
    struct Following: Sendable {
        var stored: StoredRollout
        var candidate: Loaded?
        var failure: String?
        var baseline: [String: RouteMetrics.Tally]
    }

    private struct State {
        var file: Loaded
        var rollout: Following?
        var snapshot: Snapshot
    }

    private let state: Locked<State>
    private let counter = Atomic<Int>(0)

    init(_ loaded: Loaded) {
        PackedNames.add(loaded.resolver.map)
        let snapshot = Snapshot(
            resolver: loaded.resolver, source: loaded.source, version: loaded.version, candidate: nil, generation: 0)
        state = Locked(State(file: loaded, rollout: nil, snapshot: snapshot))
    }

    convenience init(_ resolver: Resolver, source: String, version: String = RouteMapVersion.embedded) {
        self.init(Loaded(resolver: resolver, source: source, version: version))
    }

    /// The latest generation (one atomic load: the hot path's check).
    var generation: Int { counter.load(ordering: .acquiring) }

    /// The maps, their sources and versions and the generation, consistent with each other.
    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// The map in use (not the candidate).
    var resolver: Resolver { snapshot.resolver }
    var source: String { snapshot.source }

    /// The map the file gave (the map in use but while a promoted candidate stands in for it).
    var file: Loaded { state.withLock { $0.file } }

    /// The rollout this instance follows, if any.
    var rollout: Following? { state.withLock { $0.rollout } }

    /// A reload (SIGHUP): the file's map replaces the maps for every session. A file whose map
    /// changed ends the rollout under way (or a promoted map other than the file's new one);
    /// returns it — marked ended here at once, for the caller to store — and the phase it had.
    /// An unchanged file (a SIGHUP for the access file, say) leaves the rollout as it is.
    func reload(_ loaded: Loaded, now: Int64, note: String) -> (ended: StoredRollout, was: StoredRollout.Phase)? {
        PackedNames.add(loaded.resolver.map)
        return state.withLock { state in
            let changed = state.file.version != loaded.version
            state.file = loaded
            var ended: (StoredRollout, StoredRollout.Phase)?
            if changed, var following = state.rollout,
                following.stored.phase == .rolling
                    || (following.stored.phase == .promoted && following.stored.version != loaded.version)
            {
                let was = following.stored.phase
                following.stored.phase = .ended
                following.stored.changedAt = now
                following.stored.note = note
                following.candidate = nil
                state.rollout = following
                ended = (following.stored, was)
            }
            publish(&state)
            return ended
        }
    }

    /// Follows `stored` (a revision read from the store or just written), with its candidate
    /// loaded (nil: `failure` says why); `baseline`, the figures to count its own from.
    func follow(
        _ stored: StoredRollout, candidate: Loaded?, failure: String?, baseline: [String: RouteMetrics.Tally]
    ) {
        if let candidate { PackedNames.add(candidate.resolver.map) }
        state.withLock { state in
            // The figures count from the rollout's start on this instance: a later phase of the
            // same rollout keeps them.
            let kept =
                state.rollout.map { $0.stored.startedAt == stored.startedAt && $0.stored.version == stored.version }
                ?? false
            state.rollout = Following(
                stored: stored, candidate: candidate, failure: failure,
                baseline: kept ? state.rollout!.baseline : baseline)
            publish(&state)
        }
    }

    /// Replaces the file's map (tests: as a reload does, without a rollout to end).
    func replace(with resolver: Resolver, source: String) {
        _ = reload(Loaded(resolver: resolver, source: source, version: RouteMapVersion.embedded), now: 0, note: "")
    }

    /// A new snapshot from the file's map and the rollout, under a new generation.
    private func publish(_ state: inout State) {
        let generation = state.snapshot.generation + 1
        var inUse = state.file
        var candidate: Candidate?
        if let following = state.rollout, let loaded = following.candidate {
            switch following.stored.phase {
            case .rolling: candidate = Candidate(loaded: loaded, share: following.stored.share)
            case .promoted:
                inUse = Loaded(
                    resolver: loaded.resolver, source: "\(loaded.source) (promoted by a rollout)",
                    version: loaded.version)
            case .rolledBack, .ended: break
            }
        }
        state.snapshot = Snapshot(
            resolver: inUse.resolver, source: inUse.source, version: inUse.version, candidate: candidate,
            generation: generation)
        counter.store(generation, ordering: .releasing)
    }
}
