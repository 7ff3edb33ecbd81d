import NavigatorCore
import NavigatorWire

/// What a follower of a session sees, in order.
public enum SessionEvent: Sendable {
    /// The mirror was (re)built from a snapshot at this position.
    case snapshot(session: String, position: StreamPosition, tree: ScreenTree)
    /// A batch was applied to the mirror; `tree` is the mirror afterwards.
    case batch(Navigator_V1_CommandBatch, header: FrameHeader, tree: ScreenTree)
    /// A batch was missed (`expected`, got `received`); a snapshot follows.
    case gap(expected: UInt64, received: UInt64)
    /// The mirror cannot be trusted for another reason (a new epoch, a reconnect to the
    /// commands socket, a batch that does not apply); a snapshot follows.
    case resync(reason: String)
    /// A refused or expired intent (when following rejections).
    case rejection(Navigator_V1_Rejection, header: FrameHeader)
    /// A decision (when following the audit stream).
    case audit(Navigator_V1_AuditRecord, header: FrameHeader)
    /// A batch of a session not mirrored (when following every session's batches).
    case published(Navigator_V1_CommandBatch, header: FrameHeader)
}

/// What to follow.
public enum FollowTarget: Hashable, Sendable {
    /// One session, with a mirror tree kept by the Clone pattern, and its rejections and audit
    /// records as they come.
    case session(String)
    /// One session's refused and expired intents only, as they come (no mirror, no snapshot).
    case rejections(String)
    /// Every session's batches, rejections and audit records, as they come (no mirrors).
    case everything
}

extension SessionEvent {
    /// The event as the wire's `StreamEvent`, for `navctl watch --json` and the HTTP API: one
    /// message in protobuf's canonical JSON mapping per event.
    public var streamEvent: Navigator_V1_StreamEvent {
        var event = Navigator_V1_StreamEvent()
        switch self {
        case .snapshot(let session, let position, let tree):
            event.snapshot = .with {
                $0.session = session
                $0.seq = position.seq
                $0.epoch = position.epoch
                $0.tree = Navigator_V1_ScreenTree(tree)
            }
        case .batch(let batch, _, _), .published(let batch, _):
            event.batch = batch
        case .gap(let expected, let received):
            event.gap = .with {
                $0.expected = expected
                $0.received = received
            }
        case .resync(let reason):
            event.resync = reason
        case .rejection(let rejection, _):
            event.rejection = rejection
        case .audit(let record, _):
            event.audit = record
        }
        return event
    }
}
