/// The last parked intents that expired (``SessionState/recentlyExpired``), oldest first, packed
/// into one byte buffer of about their size.
///
/// A live session keeps them for the dedup window after they expired (ten minutes by default),
/// at most ``ExpiredIntent/kept``. As an array of ``ExpiredIntent`` values each took 88 bytes
/// and its id an allocation of its own, in an array that had grown to 16 places once it held 8:
/// about 1.4 KB a session, the most of what a session still gained between the 10th and 20th
/// minutes of a soak. Packed, an entry takes the bytes of its text and numbers (about 40 for a
/// UUID id, a source and a guard's names), and the buffer is rebuilt at its size when entries
/// come or go — which happens when intents expire, not per intent.
///
/// Reading an entry makes an ``ExpiredIntent`` (its strings from the bytes); entries are read
/// when the state is saved and when a shell or operator asks for the session.
public struct ExpiredIntents: Hashable, Sendable, Sequence, Codable, CustomStringConvertible {
    /// Each entry: its length (a varint, not counting itself), then when it expired (8 bytes,
    /// little-endian, first so that forgetting reads no more), how long it waited (varint, ns),
    /// its reason's kind (0 not ready, 1 a guard unmet, 2 blocked) and fields (a guard's condition
    /// and redirect; a blocker's node id as a varint and its screen), its intent id and its
    /// source. A string is its UTF-8 length as a varint, then its bytes.
    private var bytes: [UInt8]
    /// How many entries there are.
    public private(set) var count: Int

    public init() {
        bytes = []
        count = 0
    }

    /// These intents, in this order (all of them: keeping at most ``ExpiredIntent/kept`` is
    /// ``append(_:keeping:)``'s).
    public init(_ intents: some Sequence<ExpiredIntent>) {
        var entries: [[UInt8]] = []
        for intent in intents { entries.append(Self.entry(intent)) }
        self.init(entries: entries[...])
    }

    private init(entries: ArraySlice<[UInt8]>) {
        var size = 0
        for entry in entries { size += Self.varintSize(UInt64(entry.count)) + entry.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        for entry in entries {
            Self.varint(UInt64(entry.count), into: &bytes)
            bytes += entry
        }
        self.bytes = bytes
        count = entries.count
    }

    public var isEmpty: Bool { count == 0 }

    /// The oldest.
    public var first: ExpiredIntent? {
        var iterator = makeIterator()
        return iterator.next()
    }

    /// The packed bytes this takes (the buffer's size, not counting what malloc rounds it to).
    public var packedBytes: Int { bytes.count }

    /// Forgets the entries that expired at or before `cutoff` (unix ns); whether any went.
    @discardableResult
    public mutating func forget(expiredAtOrBefore cutoff: Int64) -> Bool {
        // Read without allocating first: this runs on every expiry pass over every session.
        var offset = 0
        var any = false
        while offset < bytes.count, !any {
            let length = Int(Self.readVarint(bytes, &offset))
            any = Self.expiredAt(bytes, offset..<offset + length) <= cutoff
            offset += length
        }
        guard any else { return false }
        let kept = entryRanges().filter { Self.expiredAt(bytes, $0) > cutoff }
        self = ExpiredIntents(entries: kept.map { Array(bytes[$0]) }[...])
        return true
    }

    /// Adds `intents` after the others, then keeps the newest `kept`.
    public mutating func append(_ intents: [ExpiredIntent], keeping kept: Int) {
        guard !intents.isEmpty || count > kept else { return }
        var entries = entryRanges().map { Array(bytes[$0]) }
        for intent in intents { entries.append(Self.entry(intent)) }
        self = ExpiredIntents(entries: entries.suffix(Swift.max(0, kept)))
    }

    public var description: String { "\(Array(self))" }

    // MARK: Reading

    public struct Iterator: IteratorProtocol {
        fileprivate let bytes: [UInt8]
        fileprivate var offset = 0

        public mutating func next() -> ExpiredIntent? {
            guard offset < bytes.count else { return nil }
            let length = Int(ExpiredIntents.readVarint(bytes, &offset))
            let end = offset + length
            defer { offset = end }
            var at = offset + 8
            let expiredAt = ExpiredIntents.expiredAt(bytes, offset..<end)
            let waited = Int64(bitPattern: ExpiredIntents.readVarint(bytes, &at))
            let kind = bytes[at]
            at += 1
            let reason: ParkReason
            switch kind {
            case 1:
                let condition = ExpiredIntents.readString(bytes, &at)
                reason = .guardUnmet(condition: condition, redirect: ExpiredIntents.readString(bytes, &at))
            case 2:
                let id = NodeID(rawValue: ExpiredIntents.readVarint(bytes, &at))
                reason = .blocked(by: id, screen: ExpiredIntents.readString(bytes, &at))
            default:
                reason = .notReady
            }
            let intentID = ExpiredIntents.readString(bytes, &at)
            let source = ExpiredIntents.readString(bytes, &at)
            return ExpiredIntent(
                intentID: intentID, source: source, reason: reason, parkedAt: expiredAt &- waited,
                expiredAt: expiredAt)
        }
    }

    public func makeIterator() -> Iterator { Iterator(bytes: bytes) }

    /// Each entry's bytes, without its length.
    private func entryRanges() -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(count)
        var offset = 0
        while offset < bytes.count {
            let length = Int(Self.readVarint(bytes, &offset))
            ranges.append(offset..<offset + length)
            offset += length
        }
        return ranges
    }

    private static func expiredAt(_ bytes: [UInt8], _ entry: Range<Int>) -> Int64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[entry.lowerBound + index]) << (8 * UInt64(index)) }
        return Int64(bitPattern: value)
    }

    private static func readVarint(_ bytes: [UInt8], _ offset: inout Int) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    private static func readString(_ bytes: [UInt8], _ offset: inout Int) -> String {
        let length = Int(readVarint(bytes, &offset))
        defer { offset += length }
        return String(decoding: bytes[offset..<offset + length], as: UTF8.self)
    }

    // MARK: Writing

    private static func entry(_ intent: ExpiredIntent) -> [UInt8] {
        var entry: [UInt8] = []
        entry.reserveCapacity(32 + intent.intentID.utf8.count + intent.source.utf8.count)
        let expiredAt = UInt64(bitPattern: intent.expiredAt)
        for index in 0..<8 { entry.append(UInt8(truncatingIfNeeded: expiredAt >> (8 * UInt64(index)))) }
        varint(UInt64(bitPattern: intent.expiredAt &- intent.parkedAt), into: &entry)
        switch intent.reason {
        case .notReady:
            entry.append(0)
        case .guardUnmet(let condition, let redirect):
            entry.append(1)
            string(condition, into: &entry)
            string(redirect, into: &entry)
        case .blocked(let id, let screen):
            entry.append(2)
            varint(id.rawValue, into: &entry)
            string(screen, into: &entry)
        }
        string(intent.intentID, into: &entry)
        string(intent.source, into: &entry)
        return entry
    }

    private static func varint(_ value: UInt64, into bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private static func varintSize(_ value: UInt64) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }

    private static func string(_ text: String, into bytes: inout [UInt8]) {
        varint(UInt64(text.utf8.count), into: &bytes)
        bytes += text.utf8
    }

    // MARK: Codable: as the array of expired intents it was before it was packed.

    public init(from decoder: any Decoder) throws {
        self.init(try [ExpiredIntent](from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try Array(self).encode(to: encoder)
    }
}
