import Logging
import NavigatorClient
import NavigatorCore
import NavigatorWire
import Synchronization

/// Several instances: follows of sessions another instance serves, made as a shell makes them —
/// client connections to a peer's requests and commands sockets (NavigatorClient keeps the Clone
/// rule: snapshot, batches in order, a resync on a gap or a new epoch; it learns every instance
/// from the peer and listens to each, so a session that changes instances stays followed).
///
/// Each connection follows at most ``sessionsPerConnection`` sessions (an instance drops a
/// subscriber holding more than `maxSubscriptionsPerPeer` topics), and one connection is opened at
/// a time: follows that find no room wait for it, so a burst of new sessions opens one connection,
/// not one each.
final class RemoteFollows: Sendable {
    /// Sessions one connection follows (2 topics each: batches and rejections).
    static let sessionsPerConnection = 3_000

    let capacity: Int
    /// Where a peer's requests and commands sockets are, and how to prove this instance to it;
    /// nil while no other instance is known.
    private let peer: @Sendable () -> ServerEndpoints?
    let logger: Logger

    private enum Phase {
        /// No connection is being opened.
        case ready
        /// A connection is being opened; follows wait for it.
        case opening(Task<Void, any Error>)
        /// Closed: nothing is followed or opened any more.
        case closed(String)
    }

    private struct State {
        var slots: [(connection: NavigatorConnection, used: Int)] = []
        var phase = Phase.ready
        /// Connections opened and not yet closed.
        var live = 0
        /// Follows running.
        var follows = 0
    }

    private let state = Mutex(State())

    init(
        capacity: Int = sessionsPerConnection, logger: Logger, peer: @escaping @Sendable () -> ServerEndpoints?
    ) {
        self.capacity = max(1, capacity)
        self.peer = peer
        self.logger = logger
    }

    /// Connections opened and not yet closed.
    var connections: Int { state.withLock { $0.live } }
    /// Follows running.
    var count: Int { state.withLock { $0.follows } }

    /// Follows `follow`'s session through a peer, in the background; a follow that cannot be
    /// made ends, saying why.
    func start(_ follow: EngineFollow) {
        Task {
            do {
                let (connection, slot) = try await take()
                let release = Once()
                let giveBack: @Sendable () -> Void = { [self] in if release.first() { give(back: slot) } }
                let following = connection.follow(
                    .session(follow.session), audit: false,
                    onEvent: { event in
                        switch event {
                        case .snapshot(_, let position, let tree):
                            follow.deliverRemote(.snapshot(position, tree))
                        case .batch(let batch, let header, let tree):
                            follow.deliverRemote(
                                .batch(StreamPosition(epoch: header.epoch, seq: header.seq), batch), tree: tree)
                        case .rejection(let rejection, _):
                            follow.deliverRemote(.rejection(rejection))
                        case .gap, .resync, .audit, .published:
                            break  // a snapshot follows a gap or resync
                        }
                    },
                    onEnd: { error in
                        giveBack()
                        follow.lost(
                            "the instance serving session \(follow.session) could not be followed: \(error.map { "\($0)" } ?? "the connection closed")"
                        )
                    })
                if !follow.follow(remotely: {
                    connection.unfollow(following)
                    giveBack()
                }) {
                    connection.unfollow(following)
                    giveBack()
                }
            } catch let error as FollowError where error.closed {
                follow.end(error.description)
            } catch {
                follow.lost("\(error)")
            }
        }
    }

    private enum Found {
        case slot(NavigatorConnection, Int)
        case opening(Task<Void, any Error>)
        case closed(String)
    }

    /// A connection with room for one more follow, and its slot to give back.
    func take() async throws -> (NavigatorConnection, Int) {
        while true {
            let found = state.withLock { state -> Found in
                switch state.phase {
                case .closed(let reason):
                    return .closed(reason)
                case .opening(let opening):
                    if let slot = Self.room(&state, capacity) { return slot }
                    return .opening(opening)
                case .ready:
                    if let slot = Self.room(&state, capacity) { return slot }
                    // Its body waits for this lock to be released before it looks at the state.
                    let opening = Task { try await self.open() }
                    state.phase = .opening(opening)
                    return .opening(opening)
                }
            }
            switch found {
            case .slot(let connection, let index): return (connection, index)
            case .opening(let opening): try await opening.value
            case .closed(let reason): throw FollowError(reason, closed: true)
            }
        }
    }

    private static func room(_ state: inout State, _ capacity: Int) -> Found? {
        guard let index = state.slots.firstIndex(where: { $0.used < capacity }) else { return nil }
        state.slots[index].used += 1
        state.follows += 1
        return .slot(state.slots[index].connection, index)
    }

    /// Opens one more connection and makes it a slot; closes it at once if the follows were
    /// closed meanwhile (``close(_:)`` waits for that).
    private func open() async throws {
        let opened: Result<NavigatorConnection, any Error>
        do {
            guard let endpoints = peer() else {
                throw FollowError("no other instance is known yet to follow the session through; retry shortly")
            }
            opened = .success(try await NavigatorConnection(endpoints: endpoints, timeout: .seconds(5)))
        } catch {
            opened = .failure(error)
        }
        let kept = state.withLock { state -> Bool in
            if case .success = opened { state.live += 1 }
            guard case .opening = state.phase else { return false }
            state.phase = .ready
            if case .success(let connection) = opened { state.slots.append((connection, 0)) }
            return true
        }
        let connection = try opened.get()
        guard kept else {
            await connection.close()
            state.withLock { $0.live -= 1 }
            throw FollowError("navigatord is stopping", closed: true)
        }
    }

    func give(back slot: Int) {
        state.withLock { state in
            if slot < state.slots.count { state.slots[slot].used -= 1 }
            state.follows -= 1
        }
    }

    /// Closes every connection, the one being opened included, and makes no more.
    func close(_ reason: String) async {
        let (all, opening) = state.withLock { state -> ([NavigatorConnection], Task<Void, any Error>?) in
            let opening: Task<Void, any Error>? = if case .opening(let opening) = state.phase { opening } else { nil }
            state.phase = .closed(reason)
            defer { state.slots = [] }
            return (state.slots.map(\.connection), opening)
        }
        for connection in all { await connection.close() }
        state.withLock { $0.live -= all.count }
        _ = try? await opening?.value
    }
}

/// Why a follow could not be made or went on.
struct FollowError: Error, CustomStringConvertible {
    let description: String
    /// The follows were closed (the service stops): not worth another attempt.
    let closed: Bool
    init(_ description: String, closed: Bool = false) {
        self.description = description
        self.closed = closed
    }
}

/// True the first time only.
final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}
