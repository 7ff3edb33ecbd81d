import NavigatorCore
import Synchronization

/// The resolver in use, replaceable at run time (SIGHUP reloads the route map). Workers keep a
/// copy and take a new one when the generation moves, so the hot path reads one atomic.
final class ResolverHolder: Sendable {
    private let current: Mutex<(resolver: Resolver, source: String)>
    private let counter = Atomic<Int>(0)

    init(_ resolver: Resolver, source: String) {
        current = Mutex((resolver, source))
    }

    var generation: Int { counter.load(ordering: .acquiring) }

    var resolver: Resolver { current.withLock { $0.resolver } }
    var source: String { current.withLock { $0.source } }

    func replace(with resolver: Resolver, source: String) {
        current.withLock { $0 = (resolver, source) }
        counter.wrappingAdd(1, ordering: .releasing)
    }
}
