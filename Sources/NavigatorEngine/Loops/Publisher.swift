import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import ZeroMQ

/// A worker's way of publishing: builds the header and payload of
/// batches, rejections and audit records and sends them onto the commands XPUB itself, under the
/// XPUB's lock (``SharedSocket``) — no thread between a worker and the shells' connections — and
/// hands batches and rejections to the session's follows made in process (``SessionFollows``).
///
/// Messages wait in ``pending`` until ``flush()`` (the owner calls it when it has nothing more to
/// read, and before it waits) or until ``bundleLimit`` of them wait: a busy worker takes the lock
/// once per bundle; one with nothing more to read sends at once. Publishing never waits for a
/// shell — the XPUB drops at a subscriber's high-water mark (the shell sees the gap and resyncs) —
/// only, briefly, for the lock (another worker's bundle, or egress reading at most 64
/// subscriptions).
///
/// (Until issue 16, publishers handed bundles over inproc to an egress thread that owned the
/// XPUB: at 2,000 intents/s its wake-ups cost 0.08 of a core, a sixth of the service's CPU.)
final class Publisher {
    private let commands: SharedSocket
    private let follows: SessionFollows
    /// To egress: stop markers, and word that the XPUB holds subscriptions to read (a send may
    /// have taken the XPUB descriptor's signal that egress waits on).
    private let egress: Socket
    private let counters: EngineCounters
    /// The epoch in the headers of rejections and audit records: the run's (0 with several
    /// instances, where epochs are per partition). A batch's header carries the batch's own.
    private let epoch: UInt64
    private var header = [UInt8](repeating: 0, count: FrameHeader.size)
    /// Frames waiting for ``flush()``, three per message.
    private var pending: [ZeroMQ.Message] = []
    /// Frames sent, to be filled again: a batch's three frames are not three new objects.
    private var spare = SpareMessages()
    /// The array each batch is encoded into before it is copied into its frame.
    private var payload: [UInt8] = []
    static let bundleLimit = 64

    init(context: Context, commands: SharedSocket, follows: SessionFollows, counters: EngineCounters, epoch: UInt64)
        throws
    {
        self.epoch = epoch
        self.commands = commands
        self.follows = follows
        egress = try Socket(context, type: .push)
        try egress.connect(Internal.egress)
        self.counters = counters
    }

    /// A batch, encoded by hand (``Batch/encoded()``).
    func batch(_ batch: Batch, sentAt: Int64) throws {
        batch.encode(into: &payload)
        try send(
            Topic.batches(batch.session), .batch, batch.animated ? .animated : [], batch.seq, sentAt, payload,
            epoch: batch.epoch)
        counters.batches.add()
        follows.published(batch)
    }

    func rejection(
        session: String, intentID: String, source: String, code: Navigator_V1_RejectCode, message: String, sentAt: Int64
    ) throws {
        let rejection = Navigator_V1_Rejection.with {
            $0.session = session
            $0.intentID = intentID
            $0.code = code
            $0.message = message
            $0.source = source
            $0.atUnixNanos = WallClock.now()
        }
        try send(Topic.rejections(session), .rejection, [], counters.rejectionSeq.next(), sentAt, rejection)
        follows.published(rejection)
    }

    /// Publishes an audit record — built only if someone subscribes to the audit stream.
    func audit(_ record: @autoclosure () -> Navigator_V1_AuditRecord, sentAt: Int64) throws {
        guard counters.auditTopics.load > 0 else { return }
        let record = record()
        try send(Topic.audit(record.session), .audit, [], counters.auditSeq.next(), sentAt, record)
    }

    /// Publishes the waiting messages, in order, under one taking of the XPUB's lock; tells
    /// egress if subscriptions wait to be read.
    func flush() throws {
        guard !pending.isEmpty else { return }
        defer {
            spare.keep(pending)
            pending.removeAll(keepingCapacity: true)
        }
        guard let events = try commands.send(pending, framesPerMessage: 3) else {
            // Egress has closed the XPUB: it failed, and the service is stopping.
            counters.unpublished.add(UInt64(pending.count / 3))
            return
        }
        if events.contains(.readable) {
            _ = try egress.trySend(Internal.subscriptionsWaiting)  // a full queue: egress is awake
        }
    }

    /// Publishes what waits, then tells egress this publisher is done.
    func stop() throws {
        try flush()
        try egress.send(Internal.stop)
    }

    private func send(
        _ topic: String, _ kind: FrameHeader.Kind, _ flags: FrameHeader.Flags, _ seq: UInt64, _ sentAt: Int64,
        _ message: some SwiftProtobuf.Message
    ) throws {
        try send(topic, kind, flags, seq, sentAt, try message.serializedBytes() as [UInt8])
    }

    private func send(
        _ topic: String, _ kind: FrameHeader.Kind, _ flags: FrameHeader.Flags, _ seq: UInt64, _ sentAt: Int64,
        _ payload: [UInt8], epoch: UInt64? = nil
    ) throws {
        let fields = FrameHeader(
            kind: kind, flags: flags, seq: seq, sentAt: sentAt, publishedAt: WallClock.now(), epoch: epoch ?? self.epoch
        )
        header.withUnsafeMutableBytes { fields.encode(into: $0) }
        pending.append(try spare.message(copying: topic))
        pending.append(try spare.message(copying: header))
        pending.append(try spare.message(copying: payload))
        if pending.count >= Self.bundleLimit * 3 { try flush() }
    }
}
