import Locking
import NavigatorCore
import Synchronization

/// The last intents one worker resolved, each with its session as the resolver found it: a ring
/// of fixed size, the oldest overwritten. What `routes_impact` replays against a candidate map.
///
/// An entry holds the intent and references to the session's tree, conditions and parked intents
/// of that moment (values shared with the live session until it changes them; then the entry
/// keeps the old ones alive): about half a kilobyte each under navload's mix
/// (docs/operations.md, "Flight recorder"). Written by its worker after each intent, read by the impact thread;
/// the lock is held for a copy in or out, never while resolving.
final class FlightRecorder: Sendable {
    struct Ring: ~Copyable {
        var entries: [RecordedIntent] = []
        var next = 0
        let capacity: Int
    }

    private let ring: Locked<Ring>
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        ring = Locked(Ring(capacity: capacity))
    }

    /// Keeps an intent and its session as it was (``SessionWork/IntentChange/before``: without
    /// its remembered intent ids, which a replay does not read and an entry should not keep alive).
    func record(_ intent: Intent, before: SessionState, at now: Int64) {
        guard capacity > 0 else { return }
        let entry = RecordedIntent(intent: intent, before: before, at: now)
        ring.withLock { ring in
            if ring.entries.count < ring.capacity {
                ring.entries.append(entry)
            } else {
                ring.entries[ring.next] = entry
            }
            ring.next = (ring.next + 1) % ring.capacity
        }
    }

    /// The entries, oldest first.
    func entries() -> [RecordedIntent] {
        ring.withLock { ring in
            guard ring.entries.count == ring.capacity else { return ring.entries }
            return Array(ring.entries[ring.next...] + ring.entries[..<ring.next])
        }
    }

    /// Every worker's entries, oldest first across workers.
    static func merged(_ recorders: [FlightRecorder]) -> [RecordedIntent] {
        recorders.flatMap { $0.entries() }.sorted { $0.at < $1.at }
    }
}
