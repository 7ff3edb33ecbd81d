import NavigatorCore
import NavigatorWire
import SwiftProtobuf

/// One follower, confined to the client's I/O thread. For a session it keeps a mirror tree by
/// the Clone pattern: subscribe, take a snapshot, drop batches with seq <= the snapshot's, apply
/// the rest in order; resync from a new snapshot on a gap, on a batch of another epoch, on a
/// reconnect (``IOLoop`` calls for it) and on a batch that does not apply. A snapshot asked for
/// while the commands socket made a connection is asked for again, unseen by the sink.
final class SessionFollower {
    enum Verdict {
        case ok, resync
        /// Ask for the snapshot again shortly (the session is changing hands between instances).
        case retryLater
        /// The follow ended (its sink was told why): take it off the connection. Kept, it would
        /// stay subscribed and keep every batch of its session while it waited for a snapshot
        /// that was never to be asked for again.
        case ended
    }

    private enum State {
        /// Waiting for a snapshot; batches meanwhile are kept.
        case waiting(buffered: [(FrameHeader, Navigator_V1_CommandBatch)])
        case live(tree: ScreenTree, position: StreamPosition)
    }

    let id: Int
    let target: FollowTarget
    private let sink: FollowSink
    private var state: State = .waiting(buffered: [])

    /// Whether audit records are wanted (a session's or everything's).
    let audit: Bool
    /// Whether a snapshot ever came: the service answered this follow before.
    private(set) var hadSnapshot = false
    /// Snapshot requests in a row that got no reply in time.
    private var unanswered = 0
    /// Whether the sink was told the follow ended: it is told once.
    private var ended = false
    /// Whether a snapshot request of this follower is out (asked, not answered yet).
    private var asking = false
    /// Whether the commands socket made a connection while that request was out: the snapshot
    /// may then have been taken before this follower's subscriptions reached the service, and
    /// a batch published between the two would be missing until the session's next batch.
    private var connectedWhileAsking = false
    /// Snapshots set aside in a row for that reason. A connection that keeps being made and
    /// dropped (a peer refusing this connection's subscriptions, say) must not keep the follow
    /// from ever going live: after ``maxSetAside`` the next answer is taken, and a batch it
    /// lacks shows as a gap.
    private var setAside = 0
    static let maxSetAside = 2
    /// How many snapshot requests in a row may go unanswered, once the service has answered
    /// this follow, before the follow ends with the error: a session changing instances (an
    /// owner paused or killed) can take one or two timeouts; a service gone for good cannot.
    static let unansweredLimit = 5
    /// The most batches kept while a snapshot is awaited (a session publishing fast while its
    /// snapshot is retried): the newest, so that what the snapshot may not have is kept.
    static let maxBuffered = 1_000

    /// A snapshot request went unanswered in time: true if it is to be asked again (a resync
    /// event says so), false if the follow ends (never answered at all, or too many in a row).
    func snapshotUnanswered(_ error: any Error) -> Bool {
        asking = false
        guard hadSnapshot, unanswered < Self.unansweredLimit else { return false }
        unanswered += 1
        sink.event(.resync(reason: "no snapshot in time (\(error)); asking again"))
        return true
    }

    init(id: Int, target: FollowTarget, audit: Bool = true, sink: FollowSink) {
        self.id = id
        self.target = target
        self.audit = audit
        self.sink = sink
    }

    var topics: [String] {
        switch target {
        case .session(let session):
            [Topic.batches(session), Topic.rejections(session)] + (audit ? [Topic.audit(session)] : [])
        case .rejections(let session): [Topic.rejections(session)]
        case .everything: [Topic.allBatches, Topic.allRejections] + (audit ? [Topic.allAudit] : [])
        }
    }

    func wants(_ kind: FrameHeader.Kind, _ session: String) -> Bool {
        switch target {
        case .session(let wanted): session == wanted
        case .rejections(let wanted): kind == .rejection && session == wanted
        case .everything: true
        }
    }

    /// A snapshot was asked for: keep batches until it comes (those kept so far stay).
    func awaitSnapshot() {
        if case .live = state { state = .waiting(buffered: []) }
        asking = true
        connectedWhileAsking = false
    }

    func receive(snapshot reply: Navigator_V1_Reply) -> Verdict {
        asking = false
        if case .rejected(let rejected)? = reply.kind, rejected.code == .moved || rejected.code == .unavailable {
            // Several instances: no instance serves the session this moment (a failover or a
            // hand-over); it will shortly.
            sink.event(.resync(reason: "the session is changing instances: \(rejected.message)"))
            return .retryLater
        }
        guard case .snapshot(let snapshot)? = reply.kind else {
            fail(NavigatorConnection.unexpected(reply, "a snapshot"))
            return .ended
        }
        guard case .waiting(let buffered) = state else { return .ok }
        let tree: ScreenTree
        do {
            tree = try snapshot.tree.core()
        } catch {
            fail(ClientError(.malformed, "the snapshot's tree is not valid: \(error)"))
            return .ended
        }
        if connectedWhileAsking, setAside < Self.maxSetAside {
            // Perhaps taken before the new connection carried the subscriptions: asked again,
            // the batches kept so far kept. The sink sees only the snapshot that counts.
            setAside += 1
            hadSnapshot = true
            unanswered = 0
            return .resync
        }
        setAside = 0
        let position = StreamPosition(epoch: snapshot.epoch, seq: snapshot.seq)
        state = .live(tree: tree, position: position)
        hadSnapshot = true
        unanswered = 0
        sink.event(.snapshot(session: snapshot.session, position: position, tree: tree))
        // Batches of another epoch than the snapshot's came before it: the snapshot has them.
        let current = buffered.filter { $0.0.epoch == snapshot.epoch }.sorted { $0.0.seq < $1.0.seq }
        for (header, batch) in current where apply(header, batch) == .resync {
            return .resync
        }
        return .ok
    }

    func receive(_ kind: FrameHeader.Kind, header: FrameHeader, payload: [UInt8]) -> Verdict {
        switch (kind, target) {
        case (.batch, .session):
            guard let batch = try? Navigator_V1_CommandBatch(serializedBytes: payload) else { return .ok }
            if case .waiting(var buffered) = state {
                state = .waiting(buffered: [])  // the array held once: appended in place, not copied
                if buffered.count >= Self.maxBuffered {
                    // The oldest go: those the snapshot has are not needed, and if it has not, the
                    // first batch after it shows the gap and a new snapshot is asked for.
                    buffered.removeFirst(buffered.count - Self.maxBuffered + 1)
                }
                buffered.append((header, batch))
                state = .waiting(buffered: buffered)
                return .ok
            }
            return apply(header, batch)
        case (.batch, .rejections):
            break
        case (.batch, .everything):
            if let batch = try? Navigator_V1_CommandBatch(serializedBytes: payload) {
                sink.event(.published(batch, header: header))
            }
        case (.rejection, _):
            if let rejection = try? Navigator_V1_Rejection(serializedBytes: payload) {
                sink.event(.rejection(rejection, header: header))
            }
        case (.audit, _):
            if audit, let record = try? Navigator_V1_AuditRecord(serializedBytes: payload) {
                sink.event(.audit(record, header: header))
            }
        }
        return .ok
    }

    /// The connection to the commands socket was made again: batches may have been lost
    /// meanwhile, and nothing would show it until a later batch.
    func reconnected() -> Verdict {
        guard case .session = target else { return .ok }
        guard case .live = state else {
            if asking { connectedWhileAsking = true }
            return .ok
        }
        sink.event(.resync(reason: "reconnected to the commands socket"))
        state = .waiting(buffered: [])
        return .resync
    }

    private func apply(_ header: FrameHeader, _ batch: Navigator_V1_CommandBatch) -> Verdict {
        guard case .live(var tree, let position) = state else { return .ok }
        let next = StreamPosition(epoch: header.epoch, seq: header.seq)
        guard next.epoch == position.epoch else {
            // The seqs started over (the service lost changes, or another instance took over).
            sink.event(.resync(reason: "batch of epoch \(next.epoch); the mirror is of epoch \(position.epoch)"))
            state = .waiting(buffered: [(header, batch)])
            return .resync
        }
        if position.covers(next) { return .ok }  // already in the snapshot
        guard position.isFollowed(by: next) else {
            sink.event(.gap(expected: position.seq + 1, received: next.seq))
            state = .waiting(buffered: [(header, batch)])
            return .resync
        }
        do {
            try tree.apply(try batch.coreCommands())
        } catch {
            // The mirror no longer matches the service: start again from a snapshot.
            sink.event(.resync(reason: "batch \(header.seq) does not apply to the mirror: \(error)"))
            state = .waiting(buffered: [])
            return .resync
        }
        state = .live(tree: tree, position: next)
        sink.event(.batch(batch, header: header, tree: tree))
        return .ok
    }

    func fail(_ error: any Error) {
        guard !ended else { return }
        ended = true
        sink.end(error)
    }

    func finish() {
        guard !ended else { return }
        ended = true
        sink.end(nil)
    }
}

/// A connection's followers, found by the session a published message is about: a message
/// costs the followers of its session (and those of everything), not one look at each follower.
struct Followers {
    private var byID: [Int: SessionFollower] = [:]
    /// Followers of one session (its mirror or its rejections), by that session.
    private var bySession: [String: Set<Int>] = [:]
    /// Followers of every session.
    private var everything: Set<Int> = []

    var isEmpty: Bool { byID.isEmpty }
    var all: Dictionary<Int, SessionFollower>.Values { byID.values }

    subscript(id: Int) -> SessionFollower? { byID[id] }

    mutating func add(_ follower: SessionFollower) {
        byID[follower.id] = follower
        if let session = follower.target.session {
            bySession[session, default: []].insert(follower.id)
        } else {
            everything.insert(follower.id)
        }
    }

    mutating func remove(_ id: Int) -> SessionFollower? {
        guard let follower = byID.removeValue(forKey: id) else { return nil }
        if let session = follower.target.session {
            bySession[session]?.remove(id)
            if bySession[session]?.isEmpty == true { bySession[session] = nil }
        } else {
            everything.remove(id)
        }
        return follower
    }

    /// Followers in the by-session and everything indexes (equal to the followers held).
    var indexed: Int { bySession.values.reduce(everything.count) { $0 + $1.count } }

    /// Calls `body` with each follower that wants a message of `kind` about `session`.
    func each(wanting kind: FrameHeader.Kind, _ session: String, _ body: (SessionFollower) -> Void) {
        for id in bySession[session] ?? [] {
            if let follower = byID[id], follower.wants(kind, session) { body(follower) }
        }
        for id in everything {
            if let follower = byID[id], follower.wants(kind, session) { body(follower) }
        }
    }
}

extension FollowTarget {
    /// The one session followed (nil: every session).
    var session: String? {
        switch self {
        case .session(let session), .rejections(let session): session
        case .everything: nil
        }
    }
}

/// Where a follower's events go: an AsyncThrowingStream's continuation, or callbacks.
struct FollowSink: Sendable {
    /// Each event, in order, on the connection's I/O thread.
    let event: @Sendable (SessionEvent) -> Void
    /// Once, when following ends: the error that ended it, or nil.
    let end: @Sendable ((any Error)?) -> Void

    init(event: @escaping @Sendable (SessionEvent) -> Void, end: @escaping @Sendable ((any Error)?) -> Void) {
        self.event = event
        self.end = end
    }

    init(_ continuation: AsyncThrowingStream<SessionEvent, any Error>.Continuation) {
        event = { continuation.yield($0) }
        end = { error in
            if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        }
    }
}
