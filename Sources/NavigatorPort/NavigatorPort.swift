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
}

/// A follow started with ``NavigatorPort/follow(_:as:_:)``.
public protocol SessionFollow: Sendable {
    /// Asks for a snapshot of the session as it is now (for a receiver that lost its place): it
    /// comes as the next ``SessionUpdate/snapshot(_:_:)``.
    func resnapshot()

    /// Stops it: nothing more is received once it returns (an update being delivered at that
    /// moment may still arrive).
    func stop()
}

/// What a follower of a session receives.
public enum SessionUpdate: Sendable {
    /// The session as it is at `position`: start over from it.
    case snapshot(StreamPosition, ScreenTree)
    /// The next batch: its position follows the last one received.
    case batch(StreamPosition, Navigator_V1_CommandBatch)
    /// An intent for the session was refused or expired.
    case rejection(Navigator_V1_Rejection)
    /// The follow cannot go on (the service is stopping, the instance serving the session cannot
    /// be reached), and why; follow again later.
    case ended(String)
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
