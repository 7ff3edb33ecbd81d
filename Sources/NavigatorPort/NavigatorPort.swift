import NavigatorCore
import NavigatorWire

/// What an edge of the service (the HTTP API and its streams) may ask of the engine, in process:
/// send an intent, ask a request, follow a session — each as a ``Caller``. The engine admits every
/// call exactly as it admits the same message on its ZeroMQ sockets (size, ids, session,
/// authorization, limits, forwarding to the instance that serves the session, durability before
/// an acknowledged reply), so an edge decides nothing about sessions itself.
public protocol NavigatorPort: Sendable {
    /// Admits a fire-and-forget intent: nil once it was taken (its batches and any later
    /// rejection go to the session's followers), else why it was not.
    func send(_ intent: Navigator_V1_Intent, as caller: Caller) async -> Refusal?

    /// Asks a request (an acknowledged intent, a client event, a snapshot, a dry run, stats, the
    /// route map, the instances) and returns its reply, a rejection included.
    func ask(_ request: Navigator_V1_Request, as caller: Caller) async -> Navigator_V1_Reply

    /// Whether the engine knows `caller`: a client of its access file as it is now (secure mode),
    /// or anyone (without security). An edge that vouches for callers (a bearer token) asks
    /// this before it takes a call's body.
    func knows(_ caller: Caller) -> Bool

    /// Counts the changes of who may do what (the access file reloaded): an edge that holds
    /// callers' follows open checks them again (``refusal(toFollow:by:)``) when it moves.
    var accessRevision: Int { get }

    /// Whether `caller` may follow `session`: nil if so, else the refusal. An edge that shares one
    /// follow among several callers asks this for each.
    func refusal(toFollow session: String, by caller: Caller) -> Refusal?

    /// Follows `session`: `receive` gets a snapshot first, then each batch in order, the session's
    /// rejections, and a new snapshot whenever the batches do not continue (a new epoch); it is
    /// called on the engine's threads, in order, and must return quickly. Nothing comes after
    /// ``SessionUpdate/ended(_:)``.
    func follow(_ session: String, as caller: Caller, _ receive: @escaping @Sendable (SessionUpdate) -> Void)
        throws(Refusal) -> any SessionFollow

    /// The service's state for probes: ready to take work, or why not.
    var readiness: Readiness { get }

    /// The service's metrics in Prometheus' text format.
    func metrics() -> [UInt8]

    /// The service's counters as a `stats` request is answered, read in process for the
    /// dashboard's history (which serves them to whoever may read stats).
    func statistics() -> Navigator_V1_Stats
}

/// A follow started with ``NavigatorPort/follow(_:as:_:)``. Both of its methods may be called
/// from inside the follow's `receive`.
public protocol SessionFollow: Sendable {
    /// Asks for the session as it is now (for a receiver that lost its place, or has a new
    /// reader): it comes as a ``SessionUpdate/current(_:_:)``.
    func resnapshot()

    /// Stops it: nothing more is received once it returns (an update being delivered at that
    /// moment may still arrive).
    func stop()
}

/// What a follower of a session receives, in order, one at a time.
public enum SessionUpdate: Sendable {
    /// The session as it is at `position`: start over from it. The first update, and the one
    /// after a discontinuity (a new epoch, batches that do not continue).
    case snapshot(StreamPosition, ScreenTree)
    /// The session as it is now, asked for with ``SessionFollow/resnapshot()``: for a reader that
    /// needs it. The batches keep coming in order after it; those at or before its position, that
    /// reader holds already.
    case current(StreamPosition, ScreenTree)
    /// The next batch: its position follows the last one of the sequence.
    case batch(StreamPosition, Navigator_V1_CommandBatch)
    /// An intent for the session was refused or expired.
    case rejection(Navigator_V1_Rejection)
    /// The follow cannot go on, and why; follow again later.
    case ended(FollowEnd)
}

/// Why a follow ended.
public struct FollowEnd: Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        /// The service is stopping.
        case stopping
        /// The instance serving the session could not be followed.
        case unreachable
    }

    public var reason: Reason
    public var description: String

    public init(_ reason: Reason, _ description: String) {
        self.reason = reason
        self.description = description
    }
}

/// Why the engine did not take a call: a reject code of the wire protocol and a message saying
/// what was wrong and what was expected.
public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: Navigator_V1_RejectCode
    public var message: String

    public init(_ code: Navigator_V1_RejectCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public init(_ rejected: Navigator_V1_Rejected) { self.init(rejected.code, rejected.message) }

    public var description: String { "\(message) (\(code))" }
}

/// Whether the service takes work.
public enum Readiness: Sendable, Equatable {
    case ready
    case notReady(String)
}
