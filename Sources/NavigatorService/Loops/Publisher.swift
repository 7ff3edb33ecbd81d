import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import ZeroMQ

/// The PUSH end towards egress, owned by one thread (a worker or ingress): builds the header and
/// payload of batches, rejections and audit records and hands them over.
///
/// Messages are handed over in bundles: one inproc message of `[topic][header][payload]` triples,
/// sent by ``flush()`` (the owner calls it when it has nothing more to read, and before it
/// waits) or when ``bundleLimit`` messages are waiting. So a busy worker wakes egress once per
/// bundle instead of once per batch; egress publishes the triples one by one, in order. Bundles
/// only form from a backlog: a worker with nothing more to read sends what it has at once.
/// (Also flushing after a fixed delay, 200 µs, was tried: bundles stayed small and the rate the
/// service sustains fell from about 24,700/s to 23,300–24,400/s with queues growing.)
final class Publisher {
    private let socket: Socket
    private let counters: ServiceCounters
    /// The epoch of this run's streams, in every header.
    private let epoch: UInt64
    private var header = [UInt8](repeating: 0, count: FrameHeader.size)
    /// Frames waiting for ``flush()``, three per message.
    private var pending: [ZeroMQ.Message] = []
    static let bundleLimit = 64

    /// `highWaterMark`: bundles queued to egress before the owner waits (egress never waits on
    /// anything, so the wait ends; it is how a flood of rejections slows ingress down).
    init(context: Context, counters: ServiceCounters, epoch: UInt64, highWaterMark: Int32) throws {
        self.epoch = epoch
        socket = try Socket(context, type: .push)
        try socket.set(.sendHighWaterMark, highWaterMark)
        try socket.connect(Internal.egress)
        self.counters = counters
    }

    func batch(_ batch: Navigator_V1_CommandBatch, sentAt: Int64) throws {
        try send(Topic.batches(batch.session), .batch, batch.animated ? .animated : [], batch.seq, sentAt, batch)
        counters.batches.add()
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
    }

    /// Publishes an audit record — built only if someone subscribes to the audit stream.
    func audit(_ record: @autoclosure () -> Navigator_V1_AuditRecord, sentAt: Int64) throws {
        guard counters.auditTopics.load > 0 else { return }
        let record = record()
        try send(Topic.audit(record.session), .audit, [], counters.auditSeq.next(), sentAt, record)
    }

    /// Hands the waiting messages to egress as one bundle.
    func flush() throws {
        guard !pending.isEmpty else { return }
        defer { pending.removeAll(keepingCapacity: true) }
        try Internal.sendPublished(on: socket, pending)
    }

    func stop() throws {
        try flush()
        try socket.send(Internal.stop)
    }

    private func send(
        _ topic: String, _ kind: FrameHeader.Kind, _ flags: FrameHeader.Flags, _ seq: UInt64, _ sentAt: Int64,
        _ message: some SwiftProtobuf.Message
    ) throws {
        let frame = FrameHeader(
            kind: kind, flags: flags, seq: seq, sentAt: sentAt, publishedAt: WallClock.now(), epoch: epoch)
        header.withUnsafeMutableBytes { frame.encode(into: $0) }
        let payload: [UInt8] = try message.serializedBytes()
        pending.append(try ZeroMQ.Message(copying: topic))
        pending.append(try ZeroMQ.Message(copying: header))
        pending.append(try ZeroMQ.Message(copying: payload))
        if pending.count >= Self.bundleLimit * 3 { try flush() }
    }
}
