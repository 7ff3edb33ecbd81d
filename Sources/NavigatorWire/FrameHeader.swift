/// The fixed 36-byte header frame that precedes every payload on the commands socket.
///
/// It lets a shell detect a gap by seq and a load tool measure latency without decoding
/// protobuf. Layout (all integers big-endian), as documented in `proto/navigator/v1/command.proto`:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | version (2) |
/// | 1 | 1 | kind: 1 batch, 2 rejection, 3 audit |
/// | 2 | 2 | flags: bit 0 animated |
/// | 4 | 8 | seq |
/// | 12 | 8 | sent_at: the intent's sent-at, unix ns |
/// | 20 | 8 | published_at: unix ns |
/// | 28 | 8 | epoch: the stream's epoch (batches: the session's; see `CommandBatch.epoch`) |
///
/// Version 1 (28 bytes, no epoch) is no longer sent.
public struct FrameHeader: Hashable, Sendable {
    public enum Kind: UInt8, Sendable, CaseIterable {
        case batch = 1
        case rejection = 2
        case audit = 3
    }

    public struct Flags: OptionSet, Hashable, Sendable {
        public var rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        public static let animated = Flags(rawValue: 1)
    }

    public static let size = 36
    public static let currentVersion: UInt8 = 2

    public var version: UInt8
    public var kind: Kind
    public var flags: Flags
    public var seq: UInt64
    /// The originating intent's `sent_at_unix_nanos`, 0 if there is none.
    public var sentAt: Int64
    /// When the service published the message, unix nanoseconds.
    public var publishedAt: Int64
    /// The epoch `seq` is numbered in: a batch of another epoch than the shell's snapshot means
    /// the seqs started over, and the shell takes a new snapshot.
    public var epoch: UInt64

    public init(kind: Kind, flags: Flags = [], seq: UInt64, sentAt: Int64, publishedAt: Int64, epoch: UInt64) {
        self.version = Self.currentVersion
        self.kind = kind
        self.flags = flags
        self.seq = seq
        self.sentAt = sentAt
        self.publishedAt = publishedAt
        self.epoch = epoch
    }

    /// Reads a header frame. Unknown flag bits are ignored, as the protocol requires; anything
    /// else that does not match the layout throws.
    public init(decoding bytes: UnsafeRawBufferPointer) throws(WireError) {
        guard bytes.count == Self.size else {
            throw WireError(.badHeader, "header frame has \(bytes.count) bytes; expected \(Self.size)")
        }
        let version = bytes[0]
        guard version == Self.currentVersion else {
            throw WireError(.badHeader, "header version \(version) is not supported; expected \(Self.currentVersion)")
        }
        guard let kind = Kind(rawValue: bytes[1]) else {
            throw WireError(
                .badHeader, "header kind \(bytes[1]) is unknown; expected 1 (batch), 2 (rejection) or 3 (audit)")
        }
        self.version = version
        self.kind = kind
        self.flags = Flags(rawValue: UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
        self.seq = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt64.self))
        self.sentAt = Int64(bigEndian: bytes.loadUnaligned(fromByteOffset: 12, as: Int64.self))
        self.publishedAt = Int64(bigEndian: bytes.loadUnaligned(fromByteOffset: 20, as: Int64.self))
        self.epoch = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 28, as: UInt64.self))
    }

    public init(decoding bytes: [UInt8]) throws(WireError) {
        let result: Result<FrameHeader, WireError> = bytes.withUnsafeBytes { raw in
            do throws(WireError) { return .success(try FrameHeader(decoding: raw)) } catch { return .failure(error) }
        }
        self = try result.get()
    }

    /// Writes the header into `buffer`, which must hold at least ``size`` bytes.
    public func encode(into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= Self.size, "a header needs \(Self.size) bytes")
        buffer[0] = version
        buffer[1] = kind.rawValue
        buffer.storeBytes(of: flags.rawValue.bigEndian, toByteOffset: 2, as: UInt16.self)
        buffer.storeBytes(of: seq.bigEndian, toByteOffset: 4, as: UInt64.self)
        buffer.storeBytes(of: sentAt.bigEndian, toByteOffset: 12, as: Int64.self)
        buffer.storeBytes(of: publishedAt.bigEndian, toByteOffset: 20, as: Int64.self)
        buffer.storeBytes(of: epoch.bigEndian, toByteOffset: 28, as: UInt64.self)
    }

    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.size) { buffer, count in
            encode(into: UnsafeMutableRawBufferPointer(buffer))
            count = Self.size
        }
    }
}
