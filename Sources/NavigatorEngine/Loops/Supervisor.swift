import Locking
import Synchronization

/// Watches the service's parts: the first to fail for a reason other than a stop is recorded and
/// `onFailure` runs at once (logged; ``Engine/readiness`` is not ready from then). The failed part's service
/// then throws it (``LoopPart``), its group stops the others, and navigatord exits non-zero —
/// it never goes on without one of its parts.
final class Supervisor: Sendable {
    struct Failure: Error, CustomStringConvertible, Sendable {
        /// The part: its thread's name (nav-requests, nav-worker-N, nav-egress, nav-flush,
        /// nav-zap).
        let part: String
        let reason: String
        var description: String { "\(part) failed: \(reason)" }
    }

    private let first = Locked<Failure?>(nil)
    private let onFailure: @Sendable (Failure) -> Void
    /// Parts told to fail (tests inject faults); `anyInjected` keeps the loops' check to one load.
    private let injected = Locked<Set<String>>([])
    private let anyInjected = Atomic<Bool>(false)

    init(onFailure: @escaping @Sendable (Failure) -> Void) {
        self.onFailure = onFailure
    }

    /// The first failure, if any so far.
    var failure: Failure? { first.withLock { $0 } }

    /// Records that `part` cannot go on; only the first failure acts.
    func fail(_ part: String, _ error: any Error) {
        let failure = Failure(part: part, reason: "\(error)")
        let isFirst = first.withLock { recorded -> Bool in
            guard recorded == nil else { return false }
            recorded = failure
            return true
        }
        guard isFirst else { return }
        onFailure(failure)
    }

    /// Makes `part` fail at its next turn (tests).
    func inject(into part: String) {
        _ = injected.withLock { $0.insert(part) }
        anyInjected.store(true, ordering: .releasing)
    }

    /// Called by each loop once per turn: throws if a fault was injected into `part`.
    func checkInjected(_ part: String) throws {
        guard anyInjected.load(ordering: .acquiring) else { return }
        if injected.withLock({ $0.remove(part) }) != nil {
            throw EngineError(.partFailed, "a fault injected into \(part)")
        }
    }
}
