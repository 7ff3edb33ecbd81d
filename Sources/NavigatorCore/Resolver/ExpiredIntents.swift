/// The last parked intents that expired (``SessionState/recentlyExpired``), oldest first, packed
/// into one byte buffer about their size: a live session keeps up to ``ExpiredIntent/kept`` of
/// them for the dedup window (``Resolver/Options/dedupWindow``) after they expired, and an array
/// of ``ExpiredIntent`` values took several times their bytes (each value's fixed size, each
/// long string an allocation of its own, the array's spare places). The buffer is rebuilt, at
/// its size, only when entries come or go.
///
/// Reading one as an ``ExpiredIntent`` makes its strings; ``forEachEntry(_:)`` reads them as
/// views of the buffer instead, allocating nothing (the state file's encoder uses it).
///
/// Two lists are equal when their bytes are: like the array, as long as equal strings are
/// written with the same Unicode scalars (Swift calls `"é"` as one scalar and as `e` and an
/// accent equal; their bytes differ).
public struct ExpiredIntents: Hashable, Sendable, Sequence, Codable, CustomStringConvertible {
    /// Each entry: its length (a varint, not counting itself), then when it expired (8 bytes,
    /// little-endian, first so that forgetting reads no more), how long it waited (the two's
    /// complement of `expiredAt &- parkedAt` as a varint), its reason's kind (0 not ready, 1 a
    /// guard unmet, 2 blocked) and fields (a guard's condition and redirect; a blocker's node id
    /// as a varint and its screen), its intent id and its source. A string is its UTF-8 length
    /// as a varint, then its bytes.
    private var bytes: [UInt8]

    public init() { bytes = [] }

    /// These intents, in this order (all of them: keeping at most ``ExpiredIntent/kept`` is
    /// ``append(_:keeping:)``'s).
    public init(_ intents: [ExpiredIntent]) {
        var size = 0
        for intent in intents { size += Self.sizeWithLength(intent) }
        bytes = []
        bytes.reserveCapacity(size)
        for intent in intents { Self.write(intent, into: &bytes) }
    }

    public var isEmpty: Bool { bytes.isEmpty }

    /// How many entries there are (read from the buffer: at most a few).
    public var count: Int {
        var count = 0
        var offset = 0
        while offset < bytes.count {
            let length = Int(Self.readVarint(bytes, &offset))
            offset += length
            count += 1
        }
        return count
    }

    public var underestimatedCount: Int { count }

    /// The oldest.
    public var first: ExpiredIntent? {
        var iterator = makeIterator()
        return iterator.next()
    }

    /// The buffer's size in bytes (not what malloc rounds it up to).
    var packedBytes: Int { bytes.count }

    /// Forgets the entries that expired at or before `cutoff` (unix ns), wherever they are in the
    /// list (a wall clock can step back); whether any went. Allocates only when some go.
    @discardableResult
    public mutating func forget(expiredAtOrBefore cutoff: Int64) -> Bool {
        var keptSize = 0
        var any = false
        var offset = 0
        while offset < bytes.count {
            let start = offset
            let length = Int(Self.readVarint(bytes, &offset))
            if Self.expiredAt(bytes, at: offset) <= cutoff { any = true } else { keptSize += offset + length - start }
            offset += length
        }
        guard any else { return false }
        var kept: [UInt8] = []
        kept.reserveCapacity(keptSize)
        offset = 0
        while offset < bytes.count {
            let start = offset
            let length = Int(Self.readVarint(bytes, &offset))
            if Self.expiredAt(bytes, at: offset) > cutoff { kept += bytes[start..<offset + length] }
            offset += length
        }
        bytes = kept
        return true
    }

    /// Adds `intents` after the others, then keeps the newest `kept`.
    public mutating func append(_ intents: [ExpiredIntent], keeping kept: Int) {
        let kept = Swift.max(0, kept)
        let old = count
        guard !intents.isEmpty || old > kept else { return }
        // The newest `kept`: the last of the new ones, then as many old ones as fit before them.
        let newKept = intents.suffix(kept)
        var oldStart = 0
        for _ in 0..<Swift.max(0, old - (kept - newKept.count)) {
            let length = Int(Self.readVarint(bytes, &oldStart))
            oldStart += length
        }
        var size = bytes.count - oldStart
        for intent in newKept { size += Self.sizeWithLength(intent) }
        var rebuilt: [UInt8] = []
        rebuilt.reserveCapacity(size)
        rebuilt += bytes[oldStart...]
        for intent in newKept { Self.write(intent, into: &rebuilt) }
        bytes = rebuilt
    }

    public var description: String { "\(Array(self))" }

    // MARK: Reading

    /// One entry as views of the buffer (valid as long as the slices are kept: they hold it).
    public struct Entry {
        public enum Reason {
            case notReady
            case guardUnmet(condition: ArraySlice<UInt8>, redirect: ArraySlice<UInt8>)
            case blocked(by: NodeID, screen: ArraySlice<UInt8>)
        }

        public var expiredAt: Int64
        /// `expiredAt &- parkedAt`, as its two's complement.
        public var waited: UInt64
        public var reason: Reason
        /// UTF-8.
        public var intentID: ArraySlice<UInt8>
        /// UTF-8.
        public var source: ArraySlice<UInt8>

        public var parkedAt: Int64 { expiredAt &- Int64(bitPattern: waited) }

        /// The entry as a value (its strings made from the bytes).
        public var intent: ExpiredIntent {
            let reason: ParkReason =
                switch self.reason {
                case .notReady: .notReady
                case .guardUnmet(let condition, let redirect):
                    .guardUnmet(
                        condition: String(decoding: condition, as: UTF8.self),
                        redirect: String(decoding: redirect, as: UTF8.self))
                case .blocked(let id, let screen): .blocked(by: id, screen: String(decoding: screen, as: UTF8.self))
                }
            return ExpiredIntent(
                intentID: String(decoding: intentID, as: UTF8.self), source: String(decoding: source, as: UTF8.self),
                reason: reason, parkedAt: parkedAt, expiredAt: expiredAt)
        }
    }

    /// Each entry, oldest first, as views of the buffer: nothing is copied or allocated.
    public func forEachEntry(_ body: (Entry) throws -> Void) rethrows {
        var offset = 0
        while offset < bytes.count {
            try body(Self.entry(bytes, &offset))
        }
    }

    public struct Iterator: IteratorProtocol {
        fileprivate let bytes: [UInt8]
        fileprivate var offset = 0

        public mutating func next() -> ExpiredIntent? {
            guard offset < bytes.count else { return nil }
            return ExpiredIntents.entry(bytes, &offset).intent
        }
    }

    public func makeIterator() -> Iterator { Iterator(bytes: bytes) }

    /// The entry at `offset` (its length first); `offset` moves past it.
    private static func entry(_ bytes: [UInt8], _ offset: inout Int) -> Entry {
        let length = Int(readVarint(bytes, &offset))
        let end = offset + length
        defer { offset = end }
        let expiredAt = expiredAt(bytes, at: offset)
        var at = offset + 8
        let waited = readVarint(bytes, &at)
        let kind = bytes[at]
        at += 1
        let reason: Entry.Reason
        switch kind {
        case 1:
            let condition = readString(bytes, &at)
            reason = .guardUnmet(condition: condition, redirect: readString(bytes, &at))
        case 2:
            let id = NodeID(rawValue: readVarint(bytes, &at))
            reason = .blocked(by: id, screen: readString(bytes, &at))
        default:
            reason = .notReady
        }
        let intentID = readString(bytes, &at)
        return Entry(
            expiredAt: expiredAt, waited: waited, reason: reason, intentID: intentID, source: readString(bytes, &at))
    }

    private static func expiredAt(_ bytes: [UInt8], at offset: Int) -> Int64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
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

    private static func readString(_ bytes: [UInt8], _ offset: inout Int) -> ArraySlice<UInt8> {
        let length = Int(readVarint(bytes, &offset))
        defer { offset += length }
        return bytes[offset..<offset + length]
    }

    // MARK: Writing

    /// The bytes `intent`'s entry takes, its length included.
    private static func sizeWithLength(_ intent: ExpiredIntent) -> Int {
        let size = entrySize(intent)
        return varintSize(UInt64(size)) + size
    }

    /// The bytes `intent`'s entry takes, without its length.
    private static func entrySize(_ intent: ExpiredIntent) -> Int {
        var size = 8 + varintSize(UInt64(bitPattern: intent.expiredAt &- intent.parkedAt)) + 1
        switch intent.reason {
        case .notReady: break
        case .guardUnmet(let condition, let redirect): size += stringSize(condition) + stringSize(redirect)
        case .blocked(let id, let screen): size += varintSize(id.rawValue) + stringSize(screen)
        }
        return size + stringSize(intent.intentID) + stringSize(intent.source)
    }

    private static func write(_ intent: ExpiredIntent, into bytes: inout [UInt8]) {
        varint(UInt64(entrySize(intent)), into: &bytes)
        let expiredAt = UInt64(bitPattern: intent.expiredAt)
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: expiredAt >> (8 * UInt64(index)))) }
        varint(UInt64(bitPattern: intent.expiredAt &- intent.parkedAt), into: &bytes)
        switch intent.reason {
        case .notReady:
            bytes.append(0)
        case .guardUnmet(let condition, let redirect):
            bytes.append(1)
            string(condition, into: &bytes)
            string(redirect, into: &bytes)
        case .blocked(let id, let screen):
            bytes.append(2)
            varint(id.rawValue, into: &bytes)
            string(screen, into: &bytes)
        }
        string(intent.intentID, into: &bytes)
        string(intent.source, into: &bytes)
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

    private static func stringSize(_ text: String) -> Int {
        let length = text.utf8.count
        return varintSize(UInt64(length)) + length
    }

    private static func string(_ text: String, into bytes: inout [UInt8]) {
        varint(UInt64(text.utf8.count), into: &bytes)
        bytes += text.utf8
    }

    // MARK: Codable: as the array of expired intents it holds.

    public init(from decoder: any Decoder) throws {
        self.init(try [ExpiredIntent](from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try Array(self).encode(to: encoder)
    }
}
