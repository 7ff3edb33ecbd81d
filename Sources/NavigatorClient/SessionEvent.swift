import NavigatorCore
import NavigatorWire

/// What a follower of a session sees, in order.
public enum SessionEvent: Sendable {
    /// The mirror was (re)built from a snapshot at this position (epoch, seq).
    case snapshot(session: String, seq: UInt64, epoch: UInt64, tree: ScreenTree)
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
