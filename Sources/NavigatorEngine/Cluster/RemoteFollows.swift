import Locking
import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorWire
import Synchronization

/// Several instances: follows of sessions another instance serves, made as a shell makes them —
/// client connections to a peer's requests and commands sockets (NavigatorClient keeps the Clone
/// rule: snapshot, batches in order, a resync on a gap or a new epoch; it learns every instance
/// from the peer and listens to each, so a session that changes instances stays followed).
///
/// Each connection follows at most `capacity` sessions (an instance drops a subscriber holding
/// more than `maxSubscriptionsPerPeer` topics), and one connection is opened at a time: follows
/// that find no room wait for it, so a burst of new sessions opens one connection, not one each.
/// A connection belongs to the peer it was opened to; once that peer is no longer the one to use
/// (it left), the connection takes no new follow and is closed when its last follow ends.
final class RemoteFollows: Sendable {
    let capacity: Int
    /// Where a live peer's requests and commands sockets are, and how to prove this instance to
    /// it; nil while no other instance is known.
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

    private struct Slot {
        let connection: NavigatorConnection
        let peer: ServerEndpoints
        var used: Int
    }

    private struct State {
        var slots: [Int: Slot] = [:]
        var nextSlot = 0
        var phase = Phase.ready
        /// Follows running.
        var follows = 0
    }

    private let state = Locked(State())

    init(capacity: Int, logger: Logger, peer: @escaping @Sendable () -> ServerEndpoints?) {
        self.capacity = max(1, capacity)
        self.peer = peer
        self.logger = logger
    }

    /// Connections open.
    var connections: Int { state.withLock { $0.slots.count } }
    /// Follows running.
    var count: Int { state.withLock { $0.follows } }

    /// Follows `follow`'s session through a peer, in the background, as attempt `attempt`; an
    /// attempt that cannot be made or ends tells the follow (``EngineFollow/lost(_:attempt:)``).
    func start(_ follow: EngineFollow, attempt: Int) {
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
                            follow.deliverRemote(.snapshot(position, tree), attempt: attempt)
                        case .batch(let batch, let header, let tree):
                            follow.deliverRemote(
                                .batch(StreamPosition(epoch: header.epoch, seq: header.seq), batch), tree: tree,
                                attempt: attempt)
                        case .rejection(let rejection, _):
                            follow.deliverRemote(.rejection(rejection), attempt: attempt)
                        case .gap, .resync, .audit, .published:
                            break  // a snapshot follows a gap or resync
                        }
                    },
                    onEnd: { error in
                        giveBack()
                        follow.lost(
                            "the instance serving session \(follow.session) could not be followed: \(error.map { "\($0)" } ?? "the connection closed")",
                            attempt: attempt)
                    })
                if !follow.follow(
                    remotely: {
                        connection.unfollow(following)
                        giveBack()
                    }, attempt: attempt)
                {
                    connection.unfollow(following)
                    giveBack()
                }
            } catch let error as FollowError where error.code == .closed {
                follow.end(FollowEnd(.stopping, error.description))
            } catch {
                follow.lost("\(error)", attempt: attempt)
            }
        }
    }

    private enum Found {
        case slot(NavigatorConnection, Int)
        case opening(Task<Void, any Error>)
        case closed(String)
        case noPeer
    }

    /// A connection to the peer to use now with room for one more follow, and its slot to give
    /// back.
    func take() async throws -> (NavigatorConnection, Int) {
        while true {
            let current = peer()
            let (found, stale) = state.withLock { state -> (Found, [NavigatorConnection]) in
                switch state.phase {
                case .closed(let reason):
                    return (.closed(reason), [])
                case .opening(let opening):
                    if let current, let slot = Self.room(&state, capacity, current) { return (slot, []) }
                    return (.opening(opening), [])
                case .ready:
                    let stale = Self.dropStale(&state, current)
                    guard let current else { return (.noPeer, stale) }
                    if let slot = Self.room(&state, capacity, current) { return (slot, stale) }
                    // Its body waits for this lock to be released before it looks at the state.
                    let opening = Task { try await self.open(current) }
                    state.phase = .opening(opening)
                    return (.opening(opening), stale)
                }
            }
            for connection in stale { await connection.close() }
            switch found {
            case .slot(let connection, let index): return (connection, index)
            case .opening(let opening): try await opening.value
            case .closed(let reason): throw FollowError(.closed, reason)
            case .noPeer:
                throw FollowError(
                    .noPeer, "no other instance is known yet to follow the session through; retry shortly")
            }
        }
    }

    private static func room(_ state: inout State, _ capacity: Int, _ peer: ServerEndpoints) -> Found? {
        guard let (index, _) = state.slots.first(where: { $0.value.peer == peer && $0.value.used < capacity }) else {
            return nil
        }
        state.slots[index]!.used += 1
        state.follows += 1
        return .slot(state.slots[index]!.connection, index)
    }

    /// Removes the idle connections to a peer that is not the one to use any more.
    private static func dropStale(_ state: inout State, _ current: ServerEndpoints?) -> [NavigatorConnection] {
        let stale = state.slots.filter { $0.value.used == 0 && $0.value.peer != current }
        for index in stale.keys { state.slots[index] = nil }
        return stale.values.map(\.connection)
    }

    /// Opens one more connection to `peer` and makes it a slot; closes it at once if the follows
    /// were closed meanwhile (``close(_:)`` waits for that).
    private func open(_ peer: ServerEndpoints) async throws {
        let opened: Result<NavigatorConnection, any Error>
        do {
            let connection = try await NavigatorConnection(endpoints: peer, timeout: .seconds(5))
            // Its follows' first snapshots are asked for once its commands socket is connected
            // (NavigatorClient holds them until then): taken before the subscriptions reach the
            // peer, they would miss the batches published between the two.
            opened = .success(connection)
        } catch {
            opened = .failure(error)
        }
        let kept = state.withLock { state -> Bool in
            guard case .opening = state.phase else { return false }
            state.phase = .ready
            if case .success(let connection) = opened {
                state.slots[state.nextSlot] = Slot(connection: connection, peer: peer, used: 0)
                state.nextSlot += 1
            }
            return true
        }
        let connection = try opened.get()
        guard kept else {
            await connection.close()
            throw FollowError(.closed, "navigatord is stopping")
        }
    }

    func give(back slot: Int) {
        state.withLock { state in
            if state.slots[slot] != nil { state.slots[slot]!.used -= 1 }
            state.follows -= 1
        }
    }

    /// Closes every connection, the one being opened included, and makes no more.
    func close(_ reason: String) async {
        let (all, opening) = state.withLock { state -> ([NavigatorConnection], Task<Void, any Error>?) in
            let opening: Task<Void, any Error>? = if case .opening(let opening) = state.phase { opening } else { nil }
            state.phase = .closed(reason)
            defer { state.slots = [:] }
            return (state.slots.values.map(\.connection), opening)
        }
        for connection in all { await connection.close() }
        _ = try? await opening?.value
    }
}

/// Why a follow through another instance could not be made.
struct FollowError: Error, CustomStringConvertible {
    enum Code {
        /// The follows were closed (the service stops): not worth another attempt.
        case closed
        /// No other instance is known.
        case noPeer
    }

    let code: Code
    let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// True the first time only.
final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
    /// Whether `first()` was called.
    var happened: Bool { done.load(ordering: .acquiring) }
}
