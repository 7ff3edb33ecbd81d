import NavigatorWire

/// Where a streamed session stands and the batches kept for resuming: the decisions of
/// ``StreamedSession`` about positions, as a value a test drives directly.
struct StreamHistory: Sendable {
    /// The position of the last snapshot or batch of the follow.
    private(set) var position: StreamPosition?
    /// Batches of the current epoch, in seq order, contiguous, ending at `position`.
    private(set) var frames: [StreamFrame] = []
    let size: Int
    let seconds: Int

    init(size: Int, seconds: Int) {
        self.size = size
        self.seconds = seconds
    }

    /// The follow started over from a snapshot at `position`: what came before is not kept.
    mutating func startOver(at position: StreamPosition) {
        self.position = position
        frames = []
    }

    /// A batch of the follow, which continues `position` (the port guarantees it).
    mutating func append(_ frame: StreamFrame, at position: StreamPosition, now: ContinuousClock.Instant = .now) {
        self.position = position
        frames.append(frame)
        if frames.count > size { frames.removeFirst(frames.count - size) }
        let oldest = now - .seconds(seconds)
        if let keep = frames.firstIndex(where: { $0.at >= oldest }), keep > 0 { frames.removeFirst(keep) }
    }

    /// What a connection resuming from `since` gets instead of a snapshot: `recovered` and the
    /// batches after `since`, when `since` is in the current epoch and every batch after it is
    /// still kept; nil otherwise.
    func resume(from since: StreamPosition) -> [StreamFrame]? {
        guard let position, since.epoch == position.epoch, since.seq <= position.seq else { return nil }
        let missed = frames.filter { ($0.position?.seq ?? 0) > since.seq }
        // Covered when nothing was missed, or the history holds every batch after `since`.
        guard since.seq == position.seq || missed.first?.position?.seq == since.seq + 1 else { return nil }
        var event = Navigator_V1_StreamEvent()
        event.recovered = .with {
            $0.epoch = since.epoch
            $0.seq = since.seq
            $0.missed = UInt32(missed.count)
        }
        return [StreamFrame(.recovered, position: since, json: (try? event.jsonUTF8Bytes()) ?? [])] + missed
    }
}
