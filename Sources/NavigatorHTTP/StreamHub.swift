import Foundation
import Locking
import Logging
import NIOCore
import NavigatorCore
import NavigatorPort
import NavigatorTokens
import NavigatorWire
import SwiftProtobuf
import Synchronization

/// The HTTP session streams of this instance: for each session streamed, one follow of it
/// through the ``NavigatorPort`` (the engine serves it in process), a short history of its
/// batches, and the connections streaming it. Events are encoded once per session, whatever the
/// number of connections; the hub keeps no tree of its own — a connection that needs a snapshot
/// (a new one that cannot resume, a reader that fell behind) gets the one the engine takes.
final class StreamHub: Sendable {
    let settings: StreamSettings
    let logger: Logger
    private let port: any NavigatorPort
    /// The sessions kept, by name, and when ``forgetIdle(_:beyond:)`` may look again after a
    /// look that found too few idle ones.
    private struct Kept {
        var byName: [String: StreamedSession] = [:]
        var forgetAgainAt: ContinuousClock.Instant? = nil
    }
    private let sessions = Locked(Kept())
    private let open = Atomic<Int>(0)
    private let closing = Atomic<Bool>(false)

    init(settings: StreamSettings, port: any NavigatorPort, logger: Logger) {
        self.settings = settings
        self.port = port
        self.logger = logger
    }

    /// Ends every stream and takes no new one (the service is stopping).
    func shutDown() {
        closing.store(true, ordering: .releasing)
        let all = sessions.withLock { sessions -> [StreamedSession] in
            defer { sessions.byName = [:] }
            return Array(sessions.byName.values)
        }
        for session in all { session.end() }
    }

    static let stoppingError = HTTPAPI.APIError(.shuttingDown, "navigatord is stopping and opens no new stream; retry")

    /// Stream connections open now.
    var connections: Int { open.load(ordering: .relaxed) }

    /// Sessions streamed (followed) now.
    var streamedSessions: Int { sessions.withLock { $0.byName.count } }

    /// Opens a stream of `session` for `caller`, resuming from `since` if given. Its queue's
    /// first items are a snapshot, or `recovered` and the batches missed.
    func subscribe(_ session: String, since: StreamPosition?, as caller: Caller) throws(HTTPAPI.APIError)
        -> StreamSubscription
    {
        guard !closing.load(ordering: .acquiring) else { throw Self.stoppingError }
        if let refusal = port.refusal(toFollow: session, by: caller) {
            throw HTTPAPI.APIError(refusal.code, refusal.message)
        }
        guard open.add(1, ordering: .relaxed).newValue <= settings.maxStreams else {
            open.subtract(1, ordering: .relaxed)
            throw HTTPAPI.APIError(
                .overloaded,
                "this instance streams \(settings.maxStreams) connections already (maxStreams); expected fewer — retry later or on another instance"
            )
        }
        let queue = StreamQueue(capacity: settings.queueSize)
        while true {
            let (streamed, fresh, forgotten) = sessions.withLock {
                sessions -> (StreamedSession, Bool, [StreamedSession]) in
                if let streamed = sessions.byName[session] { return (streamed, false, []) }
                let forgotten = Self.forgetIdle(&sessions, beyond: settings.maxStreams)
                let streamed = StreamedSession(session: session, settings: settings)
                sessions.byName[session] = streamed
                return (streamed, true, forgotten)
            }
            for idle in forgotten { idle.end() }
            // A session whose follow ended meanwhile is replaced by a fresh one.
            guard let id = streamed.join(queue, since: since, as: caller) else {
                sessions.withLock { if $0.byName[session] === streamed { $0.byName[session] = nil } }
                continue
            }
            if fresh {
                // Joined first: the follow's first snapshot starts this connection.
                do {
                    streamed.following(
                        try port.follow(session, as: caller) { [weak streamed] update in streamed?.receive(update) })
                } catch {
                    sessions.withLock { if $0.byName[session] === streamed { $0.byName[session] = nil } }
                    streamed.end()
                    open.subtract(1, ordering: .relaxed)
                    throw HTTPAPI.APIError(error.code, error.message)
                }
            }
            return StreamSubscription(hub: self, streamed: streamed, id: id, queue: queue, caller: caller)
        }
    }

    /// Sessions kept for resuming are at most `limit` (`maxStreams`): a session nobody streams
    /// is kept for `historySeconds`, and a client opening and closing streams of ever new
    /// sessions would otherwise have the instance follow all of them. At the limit, the tenth of
    /// it idle longest is forgotten (taken out and marked ended here, their follows let go by the
    /// caller outside the lock): their clients get a snapshot instead of the batches they missed.
    /// Sessions streamed now are never forgotten; there are fewer of them than the limit, since
    /// each has a connection. Finding the idle ones reads every session: when a look finds fewer
    /// than it wanted (nearly every session streamed), the next is made a second later, or once
    /// the sessions are a tenth over the limit, whichever comes first — not at every new session.
    private static func forgetIdle(_ kept: inout Kept, beyond limit: Int) -> [StreamedSession] {
        guard kept.byName.count >= limit else { return [] }
        let now = ContinuousClock.now
        if let after = kept.forgetAgainAt, now < after, kept.byName.count < limit + limit / 10 { return [] }
        let idle = kept.byName.values.compactMap { streamed in streamed.idleSince.map { (streamed, $0) } }
            .sorted { $0.1 < $1.1 }
        let excess = kept.byName.count - limit + 1
        // Ended here, each in one step with its idleness: a connection joining meanwhile either
        // came first (the session is kept) or is refused and starts a fresh session.
        let forgotten = idle.prefix(max(excess, limit / 10)).map(\.0).filter { $0.endIfIdle() }
        for streamed in forgotten { kept.byName[streamed.session] = nil }
        kept.forgetAgainAt = forgotten.count < max(excess, limit / 10) ? now + .seconds(1) : nil
        return forgotten
    }

    /// The access file changed: streams whose caller may no longer follow their session end,
    /// each told why.
    func reauthorize(_ all: [StreamedSession]) {
        var ended = 0
        for streamed in all {
            ended += streamed.revoke { [port] caller in
                port.refusal(toFollow: streamed.session, by: caller).map {
                    $0.message.replacingOccurrences(of: "; nothing was changed", with: "")
                        + " (the access file changed)"
                }
            }
        }
        if ended > 0 { logger.info("streams ended by an access change", metadata: ["streams": "\(ended)"]) }
    }

    func leave(_ streamed: StreamedSession, id: Int) {
        streamed.leave(id)
        open.subtract(1, ordering: .relaxed)
    }

    /// Heartbeats to idle streams, and sessions nobody has streamed for `historySeconds`
    /// forgotten; runs until cancelled, then closes every stream.
    /// Each second the sessions of one slot of `heartbeatSeconds` get their heartbeat: every
    /// stream has one each `heartbeatSeconds`, and thousands of streams do not all get theirs
    /// (and all wake their event loops) in the same moment.
    func maintain() async {
        let slots = max(1, settings.heartbeatSeconds)
        var tick = 0
        var accessRevision = port.accessRevision
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            tick += 1
            let now = ContinuousClock.now
            let all = sessions.withLock { Array($0.byName.values) }
            if port.accessRevision != accessRevision {
                accessRevision = port.accessRevision
                reauthorize(all)
            }
            for streamed in all where streamed.heartbeatSlot % slots == tick % slots { streamed.heartbeat() }
            let idleFor = Duration.seconds(settings.historySeconds)
            for streamed in all where streamed.idle(since: now - idleFor) || streamed.hasEnded {
                let removed = sessions.withLock { sessions -> Bool in
                    guard sessions.byName[streamed.session] === streamed,
                        streamed.idle(since: now - idleFor) || streamed.hasEnded
                    else { return false }
                    sessions.byName[streamed.session] = nil
                    return true
                }
                if removed { streamed.end() }
            }
        }
        shutDown()
    }
}
