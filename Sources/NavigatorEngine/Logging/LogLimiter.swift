import Logging
import NavigatorPort
import ZeroMQ

/// Who sent a message, for ``LogLimiter``: the peer's address (tcp), else `fallback` (ipc and
/// inproc peers have none).
func peerKey(_ frame: Message, _ fallback: String) -> String {
    guard let address = frame.property("Peer-Address"), !address.isEmpty else { return fallback }
    return address
}

/// Keeps one peer from choosing how much is logged: each peer may write ``budget`` rejection
/// lines per ``window``; the rest are counted, and the count is logged when the peer's next
/// window opens. Owned by one socket loop's thread (not shared).
final class LogLimiter {
    /// Lines per peer and window.
    static let budget = 10
    /// The window, in nanoseconds.
    static let window: Int64 = 10_000_000_000
    /// Peers tracked at once; beyond it, peers share one budget.
    static let peers = 1024

    private var entries: [String: (start: Int64, logged: Int, dropped: Int)] = [:]
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Whether a line about `peer` may be logged now.
    func allow(_ peer: String, now: Int64 = MonotonicClock.now()) -> Bool {
        let key = entries[peer] != nil || entries.count < Self.peers ? peer : "(other peers)"
        var entry = entries[key] ?? (now, 0, 0)
        if now - entry.start >= Self.window {
            if entry.dropped > 0 {
                logger.notice(
                    "rejection lines not logged (more than \(Self.budget) in \(Self.window / 1_000_000_000) s)",
                    metadata: ["peer": "\(LogText(key))", "dropped": "\(entry.dropped)"])
            }
            entry = (now, 0, 0)
            if entries.count >= Self.peers { entries.removeAll(keepingCapacity: true) }
        }
        let allowed = entry.logged < Self.budget
        if allowed { entry.logged += 1 } else { entry.dropped += 1 }
        entries[key] = entry
        return allowed
    }
}
