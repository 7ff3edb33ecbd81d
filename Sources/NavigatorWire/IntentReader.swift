import NavigatorCore

/// `navigator.v1.Intent` bytes read straight into NavigatorCore's ``Intent``, in one pass over
/// the bytes where they lie, without a SwiftProtobuf message in between: every intent a worker
/// takes is read this way (SwiftProtobuf's generic decoding and its message storage were the
/// larger part of reading one).
///
/// It reads what SwiftProtobuf reads, as SwiftProtobuf reads it, and refuses what it refuses
/// (`IntentReaderTests` compares the two over random messages, merged messages, unknown fields
/// of every wire type and bytes cut short or changed): fields in any order, a field given twice
/// (the last scalar wins, paths and maps add up), unknown fields and known fields of another
/// wire type skipped, strings checked to be UTF-8, a traceparent not of W3C's form ignored (and
/// returned, for the caller to count).
public enum IntentReader {
    /// What was read: the intent, and what the caller reports about it.
    public struct Read: Sendable {
        public var intent: Intent
        /// The message's own session field (empty when it left it to the session frame).
        public var session: String
        /// The traceparent as sent, when it is not of W3C's form and was ignored.
        public var ignoredTraceparent: String?
    }

    /// Why bytes are not a `navigator.v1.Intent` message.
    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads an intent; `frame` is the session frame, which the message's session must equal
    /// when it names one (``Navigator_V1_Intent/core(session:)``).
    public static func read(_ bytes: UnsafeRawBufferPointer, session frame: String?) throws -> Read {
        var fields = IntentFields()
        // SwiftProtobuf's depth limit: 100 messages and groups nested, this message the first.
        var reader = ProtoReader(bytes, depthLeft: 99)
        while let (field, wire) = try reader.tag() {
            switch (field, wire) {
            case (1, .lengthDelimited): fields.id = try reader.string()
            case (2, .lengthDelimited): fields.session = try reader.string()
            case (3, .lengthDelimited): fields.path.append(try readContext(try reader.nested()))
            case (4, .lengthDelimited): fields.url = try reader.string()
            case (5, .varint): fields.animated = try reader.varint() != 0
            case (6, .lengthDelimited): fields.source = try reader.string()
            case (7, .varint): fields.priority = Int32(truncatingIfNeeded: try reader.varint())
            case (8, .varint): fields.ttlMilliseconds = UInt32(truncatingIfNeeded: try reader.varint())
            case (9, .varint): fields.sentAt = Int64(bitPattern: try reader.varint())
            case (10, .lengthDelimited):
                var entry = try reader.entry()
                var key: String? = nil
                var value: Bool? = nil
                while let (entryField, entryWire) = try entry.mapEntryTag() {
                    switch entryField {
                    // A key or value of another wire type is passed over without reading its
                    // bytes: what follows its tag is read as the next tag, as SwiftProtobuf does.
                    case 1: if entryWire == .lengthDelimited { key = try entry.string() }
                    case 2: if entryWire == .varint { value = try entry.varint() != 0 }
                    default: try entry.skip(entryWire, field: entryField)
                    }
                }
                fields.setConditions[key ?? ""] = value ?? false
            case (11, .varint): fields.waitForReady = try reader.varint() != 0
            case (12, .lengthDelimited): fields.traceparent = try reader.string()
            default: try reader.skip(wire, field: field)
            }
        }
        let intent = try fields.intent(session: frame)
        return Read(
            intent: intent, session: fields.session,
            ignoredTraceparent: fields.traceparent.isEmpty || !intent.traceparent.isEmpty ? nil : fields.traceparent)
    }

    /// One `navigator.v1.ScreenContext`.
    private static func readContext(_ reader: ProtoReader) throws -> ScreenContext {
        var reader = reader
        var context = ScreenContext("")
        while let (field, wire) = try reader.tag() {
            switch (field, wire) {
            case (1, .lengthDelimited): context.screen = try reader.string()
            case (2, .lengthDelimited):
                var entry = try reader.entry()
                var key: String? = nil
                var value: String? = nil
                while let (entryField, entryWire) = try entry.mapEntryTag() {
                    switch entryField {
                    case 1: if entryWire == .lengthDelimited { key = try entry.string() }
                    case 2: if entryWire == .lengthDelimited { value = try entry.string() }
                    default: try entry.skip(entryWire, field: entryField)
                    }
                }
                context.info[key ?? ""] = value ?? ""
            default: try reader.skip(wire, field: field)
            }
        }
        return context
    }
}

/// An intent's fields as the message gives them, before ``intent(session:)`` checks them
/// together: for ``IntentReader`` and ``Navigator_V1_Intent/core(session:)`` alike.
struct IntentFields {
    var id = ""
    var session = ""
    var path: [ScreenContext] = []
    var url = ""
    /// Nil when the message does not say (animated).
    var animated: Bool? = nil
    var source = ""
    var priority: Int32 = 0
    var ttlMilliseconds: UInt32 = 0
    var sentAt: Int64 = 0
    var setConditions: [String: Bool] = [:]
    var waitForReady = false
    var traceparent = ""

    /// The intent NavigatorCore sees. `frame` overrides the message's session (the session frame
    /// is authoritative on the intents socket); a message session that differs is refused.
    func intent(session frame: String?) throws(WireError) -> Intent {
        if let frame, !session.isEmpty, session != frame {
            throw WireError(
                .sessionMismatch,
                "intent session \"\(session)\" differs from the session frame \"\(frame)\"; expected the same or empty")
        }
        if !path.isEmpty && !url.isEmpty {
            throw WireError(.malformed, "intent has both a path and a url; expected one of them")
        }
        let target: Intent.Target = url.isEmpty ? .path(path) : .url(url)
        let priority: Intent.Priority =
            switch self.priority {
            case 1: .high
            case 2: .critical
            default: .normal
            }
        var intent = Intent(
            id: id, session: frame ?? session, target: target, animated: animated ?? true, source: source,
            priority: priority, ttlMilliseconds: ttlMilliseconds, sentAt: sentAt, setConditions: setConditions,
            waitForReady: waitForReady)
        // W3C: a traceparent not of its form is ignored, not refused (the caller counts it).
        if TraceParent.isValid(traceparent) { intent.traceparent = traceparent }
        return intent
    }
}

/// Protobuf's binary encoding read forwards, over bytes that outlive it.
struct ProtoReader {
    enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case startGroup = 3
        case endGroup = 4
        case fixed32 = 5
    }

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    /// How many more messages and groups may nest inside: hostile bytes cannot recurse deeply.
    private var depthLeft: Int

    init(_ bytes: UnsafeRawBufferPointer, depthLeft: Int) {
        self.bytes = bytes
        self.depthLeft = depthLeft
    }

    /// A reader of the length-delimited field that follows, a message nested one deeper.
    mutating func nested() throws -> ProtoReader {
        guard depthLeft > 0 else { throw malformed("messages nested more than 100 deep") }
        return ProtoReader(try body(), depthLeft: depthLeft - 1)
    }

    /// A reader of the map entry that follows (SwiftProtobuf does not count it as nesting).
    mutating func entry() throws -> ProtoReader { ProtoReader(try body(), depthLeft: depthLeft) }

    private var available: Int { bytes.count - index }

    private func malformed(_ what: String) -> IntentReader.Malformed {
        IntentReader.Malformed(description: "\(what) at byte \(index)")
    }

    /// The next field's number and wire type, nil at the end. A tag is at most five bytes and
    /// names a field from 1 to 2^29 − 1 with wire type 0 to 5; an end-group tag out of a group
    /// is refused.
    mutating func tag() throws -> (field: Int, wire: WireType)? {
        guard available > 0 else { return nil }
        let (field, wire) = try rawTag()
        guard wire != .endGroup else { throw malformed("an end-group tag (field \(field)) outside a group") }
        return (field, wire)
    }

    /// A map entry's next tag: read as any varint below 2^32 (SwiftProtobuf reads map entries
    /// so), an end-group tag refused.
    mutating func mapEntryTag() throws -> (field: Int, wire: WireType)? {
        guard available > 0 else { return nil }
        let start = index
        let value = try varint()
        guard value < UInt64(UInt32.max), value >> 3 != 0, let wire = WireType(rawValue: UInt8(value & 7)) else {
            index = start
            throw malformed("a tag that names no field (\(value))")
        }
        guard wire != .endGroup else { throw malformed("an end-group tag in a map entry") }
        return (Int(value >> 3), wire)
    }

    private mutating func rawTag() throws -> (field: Int, wire: WireType) {
        let first = bytes[index]
        guard let wire = WireType(rawValue: first & 7) else { throw malformed("wire type \(first & 7), not 0 to 5,") }
        var field = Int(first & 0x7f) >> 3
        var length = 1
        var last = first
        while last & 0x80 != 0 {
            guard length < 5, available > length else { throw malformed("a tag cut short or longer than five bytes") }
            last = bytes[index + length]
            if length == 4 && last > 15 { throw malformed("a field number beyond 2^29 - 1") }
            field |= Int(last & 0x7f) << (4 + 7 * (length - 1))
            length += 1
        }
        guard field != 0 else { throw malformed("field number 0") }
        index += length
        return (field, wire)
    }

    /// A varint of at most ten bytes.
    mutating func varint() throws -> UInt64 {
        guard available > 0 else { throw malformed("a varint past the end") }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard available > 0, shift <= 63 else { throw malformed("a varint cut short or longer than ten bytes") }
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// A length-delimited field's bytes.
    mutating func body() throws -> UnsafeRawBufferPointer {
        let length = try varint()
        guard length < 0x7fff_ffff else { throw malformed("a length of \(length) bytes, 2 GiB or more,") }
        guard length <= UInt64(available) else {
            throw malformed("a field of \(length) bytes where \(available) are left")
        }
        let start = index
        index += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }

    /// A string field: UTF-8, or refused.
    mutating func string() throws -> String {
        let body = try body()
        guard let text = String(validating: body, as: UTF8.self) else {
            throw malformed("a string that is not UTF-8 ending")
        }
        return text
    }

    /// Passes over a field of this wire type (its tag read), checking it is well formed.
    mutating func skip(_ wire: WireType, field: Int) throws {
        switch wire {
        case .varint: _ = try varint()
        case .fixed64: try advance(8)
        case .fixed32: try advance(4)
        case .lengthDelimited: _ = try body()
        case .startGroup:
            // Up to the end-group tag of the same field; groups may nest, as deep as messages.
            guard depthLeft > 0 else { throw malformed("groups nested more than 100 deep") }
            depthLeft -= 1
            defer { depthLeft += 1 }
            while true {
                guard available > 0 else { throw malformed("a group (field \(field)) without its end") }
                let (inner, innerWire) = try groupTag()
                if innerWire == .endGroup {
                    guard inner == field else {
                        throw malformed("an end-group tag of field \(inner) inside the group of field \(field)")
                    }
                    return
                }
                try skip(innerWire, field: inner)
            }
        case .endGroup: throw malformed("an end-group tag (field \(field)) outside a group")
        }
    }

    /// A tag inside a group, read as SwiftProtobuf reads it there: any varint below 2^32.
    private mutating func groupTag() throws -> (field: Int, wire: WireType) {
        let value = try varint()
        guard value < UInt64(UInt32.max), value >> 3 != 0, let wire = WireType(rawValue: UInt8(value & 7)) else {
            throw malformed("a tag that names no field (\(value))")
        }
        return (Int(value >> 3), wire)
    }

    private mutating func advance(_ count: Int) throws {
        guard available >= count else { throw malformed("a \(count)-byte field where \(available) are left") }
        index += count
    }
}
