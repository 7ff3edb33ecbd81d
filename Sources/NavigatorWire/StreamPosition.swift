/// Where a session's stream stands: the epoch (it changes whenever the engine cannot prove the
/// seqs continue — a restart that lost changes, a move to another instance) and the seq of the
/// last batch. A follower resumes from it; written `epoch:seq`, as streams' event ids are.
public struct StreamPosition: Sendable, Hashable, CustomStringConvertible {
    public var epoch: UInt64
    public var seq: UInt64

    public init(epoch: UInt64, seq: UInt64) {
        self.epoch = epoch
        self.seq = seq
    }

    /// Parses `epoch:seq` (two whole numbers); nil for anything else.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let epoch = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
        self.init(epoch: epoch, seq: seq)
    }

    public var description: String { "\(epoch):\(seq)" }

    /// Whether `next` follows this position directly (the same epoch, the next seq).
    public func isFollowed(by next: StreamPosition) -> Bool { next.epoch == epoch && next.seq == seq + 1 }

    /// Whether `other` is this position or one before it in the same epoch (a follower that
    /// holds this has it already).
    public func covers(_ other: StreamPosition) -> Bool { other.epoch == epoch && other.seq <= seq }
}
