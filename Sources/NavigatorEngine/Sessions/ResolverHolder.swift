import Locking
import NavigatorCore
import Synchronization

/// The resolver in use, replaceable at run time (SIGHUP reloads the route map). Workers keep a
/// copy and take a new one when the generation moves, so the hot path reads one atomic; the copy
/// they take is a `snapshot`, the resolver and its generation read together under one lock, so a
/// worker can never hold an older resolver under a newer generation.
final class ResolverHolder: Sendable {
    struct Snapshot {
        let resolver: Resolver
        let source: String
        let generation: Int
    }

    private let current: Locked<Snapshot>
    private let counter = Atomic<Int>(0)

    init(_ resolver: Resolver, source: String) {
        PackedNames.add(resolver.map)
        current = Locked(Snapshot(resolver: resolver, source: source, generation: 0))
    }

    /// The latest generation (one atomic load: the hot path's check).
    var generation: Int { counter.load(ordering: .acquiring) }

    /// The resolver, its source and its generation, consistent with each other.
    var snapshot: Snapshot { current.withLock { $0 } }

    var resolver: Resolver { snapshot.resolver }
    var source: String { snapshot.source }

    func replace(with resolver: Resolver, source: String) {
        PackedNames.add(resolver.map)
        current.withLock {
            let generation = $0.generation + 1
            $0 = Snapshot(resolver: resolver, source: source, generation: generation)
            counter.store(generation, ordering: .releasing)
        }
    }
}
