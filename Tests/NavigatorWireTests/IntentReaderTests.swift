import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import TestThreads
import Testing

/// ``IntentReader`` against SwiftProtobuf's decoding followed by `core(session:)`, over bytes
/// written by hand: fields in random order and repeated (the last scalar wins, paths and maps
/// add up), unknown fields of every wire type (groups nested too) at every level, known fields
/// of another wire type, map entries with missing, repeated, foreign or mistyped keys and
/// values, strings that are not UTF-8 — and all of them cut short or with bytes changed. Each
/// must read as the same intent (and the same ignored traceparent), or be refused by both: a
/// wire error with the same code and message, or both unreadable.
@Suite("Reading intents by hand")
struct IntentReaderTests {
    enum Outcome: Equatable {
        case read(Intent, session: String, ignoredTraceparent: String?)
        case refused(WireError.Code, String)
        case unreadable
    }

    static func bySwiftProtobuf(_ bytes: [UInt8], frame: String?) -> Outcome {
        guard let message = try? Navigator_V1_Intent(serializedBytes: bytes) else { return .unreadable }
        do {
            let intent = try message.core(session: frame)
            return .read(
                intent, session: message.session,
                ignoredTraceparent: message.hasInvalidTraceparent ? message.traceparent : nil)
        } catch {
            return .refused(error.code, error.message)
        }
    }

    static func byHand(_ bytes: [UInt8], frame: String?) -> Outcome {
        do {
            let read = try bytes.withUnsafeBytes { try IntentReader.read($0, session: frame) }
            return .read(read.intent, session: read.session, ignoredTraceparent: read.ignoredTraceparent)
        } catch let error as WireError {
            // Bytes that are not the message: refused too, saying where (SwiftProtobuf's say less).
            if error.code == .malformed && error.message.hasPrefix(IntentReader.notAnIntent + ": ") {
                return .unreadable
            }
            return .refused(error.code, error.message)
        } catch {
            Issue.record("IntentReader threw \(error), not a WireError")
            return .unreadable
        }
    }

    /// Strings are checked eight bytes at a time for ASCII before the full check: a byte that is
    /// not ASCII, valid or not, at every place of strings of 0 to 40 bytes, in the intent's id,
    /// its url and the session frame.
    @Test("takes a string as SwiftProtobuf does wherever a byte beyond ASCII stands in it")
    func stringsAtEveryPlace() async throws {
        try await offPool { Self.stringsAtEveryPlace() }
    }

    static func stringsAtEveryPlace() {
        let inserts: [[UInt8]] = [
            [], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xFF], [0xC3], [0x80],
            [0xED, 0xA0, 0x80], [0x00],
        ]
        var notUTF8 = 0
        for length in 0...40 {
            for place in 0...length {
                for insert in inserts {
                    let text =
                        [UInt8](repeating: 0x61, count: place) + insert
                        + [UInt8](repeating: 0x62, count: length - place)
                    var writer = IntentBytes.Writer()
                    writer.string(2, "s1")
                    writer.delimited(1, text)
                    writer.delimited(4, [0x6E, 0x61, 0x76, 0x3A, 0x2F, 0x2F] + text)  // nav://…
                    let byHand = byHand(writer.bytes, frame: nil)
                    #expect(byHand == bySwiftProtobuf(writer.bytes, frame: nil), "\(text)")
                    if String(validating: text, as: UTF8.self) == nil {
                        notUTF8 += 1
                        if case .read = byHand { Issue.record("bytes that are not UTF-8 were read: \(text)") }
                    } else if case .read(let intent, _, _) = byHand {
                        #expect(Array(intent.id.utf8) == text)
                    }
                    let frame = text.withUnsafeBytes { try? SessionID.decode($0) }
                    let expected = String(validating: text, as: UTF8.self).flatMap {
                        SessionID.problem(with: $0) == nil ? $0 : nil
                    }
                    #expect(frame == expected, "\(text)")
                }
            }
        }
        #expect(notUTF8 > 1_000)  // every place of every insert that is not UTF-8 was tried
    }

    @Test("reads what SwiftProtobuf reads, the same way, and refuses what it refuses", arguments: 0..<16)
    func sameAsSwiftProtobuf(seed: UInt64) async throws {
        try await offPool { Self.compare(seed: seed) }
    }

    static func compare(seed: UInt64) {
        do {
            var test = IntentBytes(seed: seed)
            var kinds: [String: Int] = [:]
            for round in 0..<2_000 {
                var bytes = test.intent()
                if test.random.chance(20) { bytes += test.intent() }  // two messages merge
                bytes = test.damaged(bytes)
                let frame: String? = test.random.pick(["s1", nil, "s2"])
                let expected = Self.bySwiftProtobuf(bytes, frame: frame)
                let got = Self.byHand(bytes, frame: frame)
                #expect(got == expected, "seed \(seed) round \(round) frame \(frame ?? "none"): \(bytes)")
                switch expected {
                case .read(let intent, _, let ignored):
                    kinds["read", default: 0] += 1
                    if case .path(let path) = intent.target, path.contains(where: { !$0.info.isEmpty }) {
                        kinds["read with info", default: 0] += 1
                    }
                    if !intent.setConditions.isEmpty { kinds["read with conditions", default: 0] += 1 }
                    if ignored != nil { kinds["traceparent ignored", default: 0] += 1 }
                case .refused: kinds["refused", default: 0] += 1
                case .unreadable: kinds["unreadable", default: 0] += 1
                }
            }
            // Every kind of outcome is reached often enough to mean something.
            for kind in [
                "read", "read with info", "read with conditions", "traceparent ignored", "refused", "unreadable",
            ] {
                #expect((kinds[kind] ?? 0) >= 20, "seed \(seed): \(kinds)")
            }
        }
    }

    @Test("groups nested 99 deep are read over; 100 deep are refused, as SwiftProtobuf refuses them")
    func nestingLimit() {
        for depth in [98, 99, 100, 101, 5_000] {
            var writer = IntentBytes.Writer()
            writer.string(1, "i1")
            for _ in 0..<depth { writer.tag(20, 3) }
            for _ in 0..<depth { writer.tag(20, 4) }
            let expected = Self.bySwiftProtobuf(writer.bytes, frame: "s1")
            #expect(Self.byHand(writer.bytes, frame: "s1") == expected, "depth \(depth)")
            #expect((expected == .unreadable) == (depth >= 100), "depth \(depth): \(expected)")
        }
    }
}

/// Random intent bytes, right and wrong (``IntentReaderTests``).
struct IntentBytes {
    struct Random {
        var source: SplitMix64
        mutating func below(_ bound: Int) -> Int { Int(source.next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    /// Protobuf's encoding written by hand, so that it can say anything, right or wrong.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7f) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func tag(_ field: Int, _ wire: UInt64) { varint(UInt64(field) << 3 | wire) }

        mutating func delimited(_ field: Int, _ body: [UInt8]) {
            tag(field, 2)
            varint(UInt64(body.count))
            bytes += body
        }

        mutating func string(_ field: Int, _ text: String) { delimited(field, Array(text.utf8)) }
    }

    var random: Random

    init(seed: UInt64) { random = Random(source: SplitMix64(seed: seed)) }

    mutating func text() -> String {
        random.pick([
            "", "s1", "chat", "conversationId", "42", "ünïcødé ✓",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-y", String(repeating: "z", count: 140),
        ])
    }

    /// A string field's bytes: text, or now and then bytes that are not UTF-8.
    mutating func stringBytes() -> [UInt8] {
        random.chance(3) ? random.pick([[0xff], [0xc3], [0x61, 0xed, 0xa0, 0x80], [0xe2, 0x82]]) : Array(text().utf8)
    }

    /// Unknown fields: every wire type, field numbers unknown at this level.
    mutating func unknown(_ writer: inout Writer, depth: Int = 0) {
        let field = random.pick([13, 15, 99, 1000, 536_870_911])
        switch random.below(6) {
        case 0:
            writer.tag(field, 0)
            writer.varint(random.pick([0, 1, 300, UInt64.max]))
        case 1:
            writer.tag(field, 1)
            writer.bytes += [1, 2, 3, 4, 5, 6, 7, 8]
        case 2: writer.delimited(field, stringBytes())
        case 3:
            writer.tag(field, 5)
            writer.bytes += [9, 9, 9, 9]
        default:
            writer.tag(field, 3)
            if depth < 3 { for _ in 0..<random.below(3) { unknown(&writer, depth: depth + 1) } }
            writer.tag(field, 4)
        }
    }

    /// A map entry: key field 1, value field 2 (`value` writes it), in any order, missing,
    /// repeated, of another wire type, among unknown fields.
    mutating func entry(_ value: (inout Writer, inout Random) -> Void) -> [UInt8] {
        var entry = Writer()
        for _ in 0..<random.below(4) {
            switch random.below(10) {
            case 0..<4: entry.delimited(1, stringBytes())
            case 4..<8: value(&entry, &random)
            case 8:
                // A key or value of another wire type (read over by both, the same odd way).
                entry.tag(random.pick([1, 2]), random.pick([0, 1, 5]))
                entry.varint(UInt64(random.below(3)))
            default: unknown(&entry)
            }
        }
        return entry.bytes
    }

    mutating func context() -> [UInt8] {
        var context = Writer()
        for _ in 0..<random.below(5) {
            switch random.below(8) {
            case 0..<3: context.delimited(1, stringBytes())
            case 3..<6:
                context.delimited(
                    2,
                    entry { writer, random in
                        writer.delimited(2, random.chance(3) ? [0xff] : Array(random.pick(["1", "42", ""]).utf8))
                    })
            case 6:
                context.tag(random.pick([1, 2]), 0)
                context.varint(7)
            default: unknown(&context)
            }
        }
        return context.bytes
    }

    /// An intent's bytes: every field now and then, in random order, some twice.
    mutating func intent() -> [UInt8] {
        var writer = Writer()
        for _ in 0..<random.below(14) {
            switch random.below(16) {
            case 0: writer.delimited(1, stringBytes())
            case 1: writer.string(2, random.pick(["", "s1", "s2"]))
            case 2, 3: writer.delimited(3, context())
            case 4: writer.string(4, random.pick(["", "app://chat/42", "https://x/y"]))
            case 5:
                writer.tag(5, 0)
                writer.varint(random.pick([0, 1, 2, 1 << 40]))
            case 6: writer.delimited(6, stringBytes())
            case 7:
                writer.tag(7, 0)
                writer.varint(random.pick([0, 1, 2, 3, 1 << 32 | 1, UInt64.max]))
            case 8:
                writer.tag(8, 0)
                writer.varint(random.pick([0, 1000, 1 << 33, UInt64.max]))
            case 9:
                writer.tag(9, 0)
                writer.varint(random.pick([0, 1_700_000_000_000_000_000, UInt64.max]))
            case 10:
                writer.delimited(
                    10,
                    entry { writer, random in
                        writer.tag(2, 0)
                        writer.varint(UInt64(random.below(3)))
                    })
            case 11:
                writer.tag(11, 0)
                writer.varint(UInt64(random.below(2)))
            case 12:
                writer.string(
                    12, random.pick(["", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "not-a-trace"]))
            case 13:
                // A known field of another wire type: an unknown field to both.
                let field = random.below(12) + 1
                let wire = [0, 1, 2, 5].filter {
                    $0 != (field == 5 || field >= 7 && field != 10 && field != 12 ? 0 : 2)
                }
                let type = UInt64(random.pick(wire))
                writer.tag(field, type)
                switch type {
                case 0: writer.varint(5)
                case 1: writer.bytes += [0, 0, 0, 0, 0, 0, 0, 0]
                case 2:
                    writer.varint(1)
                    writer.bytes.append(0x41)
                default: writer.bytes += [0, 0, 0, 0]
                }
            default: unknown(&writer)
            }
        }
        return writer.bytes
    }

    /// The bytes now and then cut short, changed, or given an odd tag.
    mutating func damaged(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        switch random.below(10) {
        case 0 where !bytes.isEmpty: bytes.removeLast(random.below(bytes.count) + 1)
        case 1 where !bytes.isEmpty:
            for _ in 0...random.below(3) { bytes[random.below(bytes.count)] = UInt8(random.below(256)) }
        case 2:
            // Tags no field has: field 0, wire types 6 and 7, an end-group alone, overlong tags
            // and varints.
            bytes += random.pick([
                [0x00], [0x0e], [0x0f], [0x0c], [0x8c, 0x00], [0x80, 0x80, 0x80, 0x80, 0x10],
                [0xff, 0xff, 0xff, 0xff, 0x0f], [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                [0x1a, 0x85, 0x80, 0x80, 0x80, 0x08],
            ])
        default: break
        }
        return bytes
    }
}
