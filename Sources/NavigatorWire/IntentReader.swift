import NavigatorCore

/// `navigator.v1.Intent` bytes read straight into NavigatorCore's ``Intent``, in one pass over
/// the bytes where they lie, without a SwiftProtobuf message in between: every intent a worker
/// takes is read this way (SwiftProtobuf's generic decoding and its message storage were the
/// larger part of reading one).
///
/// It reads what SwiftProtobuf reads, as SwiftProtobuf reads it, and refuses what it refuses
/// (`IntentReaderTests` compares the two over random messages, merged messages, unknown fields
/// of every wire type and bytes cut short or changed; navfuzz on every input): fields in any
/// order, a field given twice (the last scalar wins, paths and maps add up), unknown fields and
/// known fields of another wire type skipped, strings checked to be UTF-8, at most 100 messages
/// and groups nested, a traceparent not of W3C's form ignored (and returned, for the caller to
/// count). Unlike SwiftProtobuf's, its refusals say where and what was expected.
public enum IntentReader {
    /// What was read: the intent, and what the caller reports about it.
    public struct Read: Sendable {
        public var intent: Intent
        /// The message's own session field (empty when it left it to the session frame).
        public var session: String
        /// The traceparent as sent, when it is not of W3C's form and was ignored.
        public var ignoredTraceparent: String?
    }

    /// What a ``WireError`` for bytes that are not the message starts with.
    public static let notAnIntent = "intent is not a valid navigator.v1.Intent message"

    /// Reads an intent; `frame` is the session frame, which the message's session must equal
    /// when it names one (``Navigator_V1_Intent/core(session:)``). Bytes that are not the message
    /// are a ``WireError`` `malformed` that says where and what was expected.
    public static func read(_ bytes: UnsafeRawBufferPointer, session frame: String?) throws(WireError) -> Read {
        var fields = IntentFields()
        // SwiftProtobuf's depth limit: 100 messages and groups nested, this message the first.
        var reader = ProtoReader(bytes, depthLeft: 99)
        while let (field, wire) = try reader.tag() {
            switch (field, wire) {
            case (1, .lengthDelimited): fields.id = try reader.string()
            case (2, .lengthDelimited): fields.session = try reader.string()
            case (3, .lengthDelimited):
                let context = try readContext(try reader.nested())
                // The whole path's room at once, not grown one context at a time.
                if fields.path.isEmpty { fields.path.reserveCapacity(1 + reader.count(ofField: 3)) }
                fields.path.append(context)
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
    private static func readContext(_ reader: ProtoReader) throws(WireError) -> ScreenContext {
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
    /// Where `bytes` start in the whole message (for errors).
    private let origin: Int
    /// How many more messages and groups may nest inside: hostile bytes cannot recurse deeply.
    private var depthLeft: Int

    init(_ bytes: UnsafeRawBufferPointer, depthLeft: Int, origin: Int = 0) {
        self.bytes = bytes
        self.depthLeft = depthLeft
        self.origin = origin
    }

    /// A reader of the length-delimited field that follows, a message nested one deeper.
    mutating func nested() throws(WireError) -> ProtoReader {
        guard depthLeft > 0 else { throw malformed("messages nested more than 100 deep", expected: "at most 100") }
        let body = try body()
        return ProtoReader(body, depthLeft: depthLeft - 1, origin: origin + index - body.count)
    }

    /// How many more length-delimited fields numbered `field` follow, counted on a copy: this
    /// reader does not move. The count ends at bytes that cannot be passed over, which reading
    /// them will refuse with the reason.
    func count(ofField field: Int) -> Int {
        var copy = self
        var count = 0
        while let (next, wire) = try? copy.tag() {
            if next == field, wire == .lengthDelimited { count += 1 }
            guard (try? copy.skip(wire, field: next)) != nil else { break }
        }
        return count
    }

    /// A reader of the map entry that follows (SwiftProtobuf does not count it as nesting).
    mutating func entry() throws(WireError) -> ProtoReader {
        let body = try body()
        return ProtoReader(body, depthLeft: depthLeft, origin: origin + index - body.count)
    }

    private var available: Int { bytes.count - index }

    private func malformed(_ what: String, expected: String) -> WireError {
        WireError(.malformed, "\(IntentReader.notAnIntent): \(what) at byte \(origin + index); expected \(expected)")
    }

    /// The next field's number and wire type, nil at the end. A tag is at most five bytes and
    /// names a field from 1 to 2^29 − 1 with wire type 0 to 5; an end-group tag out of a group
    /// is refused.
    mutating func tag() throws(WireError) -> (field: Int, wire: WireType)? {
        guard available > 0 else { return nil }
        let (field, wire) = try rawTag()
        guard wire != .endGroup else {
            throw malformed("an end-group tag (field \(field)) outside a group", expected: "a field")
        }
        return (field, wire)
    }

    /// A map entry's next tag: read as any varint below 2^32 (SwiftProtobuf reads map entries
    /// so), an end-group tag refused.
    mutating func mapEntryTag() throws(WireError) -> (field: Int, wire: WireType)? {
        guard available > 0 else { return nil }
        let start = index
        let value = try varint()
        guard value < UInt64(UInt32.max), value >> 3 != 0, let wire = WireType(rawValue: UInt8(value & 7)) else {
            index = start
            throw malformed(
                "a tag that names no field (\(value))", expected: "a field number of 1 or more, wire type 0 to 5")
        }
        guard wire != .endGroup else {
            throw malformed("an end-group tag in a map entry", expected: "a key or a value")
        }
        return (Int(value >> 3), wire)
    }

    private mutating func rawTag() throws(WireError) -> (field: Int, wire: WireType) {
        let first = bytes[index]
        guard let wire = WireType(rawValue: first & 7) else {
            throw malformed("wire type \(first & 7)", expected: "0 to 5")
        }
        var field = Int(first & 0x7f) >> 3
        var length = 1
        var last = first
        while last & 0x80 != 0 {
            guard length < 5, available > length else {
                throw malformed("a tag cut short or longer than five bytes", expected: "a whole tag")
            }
            last = bytes[index + length]
            if length == 4 && last > 15 { throw malformed("a field number beyond 2^29 - 1", expected: "a smaller one") }
            field |= Int(last & 0x7f) << (4 + 7 * (length - 1))
            length += 1
        }
        guard field != 0 else { throw malformed("field number 0", expected: "1 or more") }
        index += length
        return (field, wire)
    }

    /// A varint of at most ten bytes.
    mutating func varint() throws(WireError) -> UInt64 {
        guard available > 0 else { throw malformed("a varint past the end", expected: "its bytes") }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard available > 0, shift <= 63 else {
                throw malformed("a varint cut short or longer than ten bytes", expected: "a whole varint")
            }
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// A length-delimited field's bytes.
    mutating func body() throws(WireError) -> UnsafeRawBufferPointer {
        let length = try varint()
        guard length < 0x7fff_ffff else { throw malformed("a length of \(length) bytes", expected: "less than 2 GiB") }
        return try take(length)
    }

    /// The next `length` bytes (an unknown length-delimited field's: no 2 GiB check there, as in
    /// SwiftProtobuf).
    private mutating func take(_ length: UInt64) throws(WireError) -> UnsafeRawBufferPointer {
        guard length <= UInt64(available) else {
            throw malformed("a field of \(length) bytes where \(available) are left", expected: "the whole field")
        }
        let start = index
        index += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }

    /// A string field: UTF-8, or refused.
    mutating func string() throws(WireError) -> String {
        let body = try body()
        guard let text = String(wireUTF8: body) else {
            throw malformed("a string that is not UTF-8 ending", expected: "UTF-8")
        }
        return text
    }

    /// Passes over a field of this wire type (its tag read), checking it is well formed.
    mutating func skip(_ wire: WireType, field: Int) throws(WireError) {
        switch wire {
        case .varint: _ = try varint()
        case .fixed64: try advance(8)
        case .fixed32: try advance(4)
        case .lengthDelimited: _ = try take(try varint())
        case .startGroup:
            // Up to the end-group tag of the same field; groups may nest, as deep as messages.
            guard depthLeft > 0 else { throw malformed("groups nested more than 100 deep", expected: "at most 100") }
            depthLeft -= 1
            defer { depthLeft += 1 }
            while true {
                guard available > 0 else {
                    throw malformed("a group (field \(field)) without its end", expected: "its end-group tag")
                }
                let (inner, innerWire) = try groupTag()
                if innerWire == .endGroup {
                    guard inner == field else {
                        throw malformed(
                            "an end-group tag of field \(inner) inside the group of field \(field)",
                            expected: "the group's own")
                    }
                    return
                }
                try skip(innerWire, field: inner)
            }
        case .endGroup: throw malformed("an end-group tag (field \(field)) outside a group", expected: "a field")
        }
    }

    /// A tag inside a group, read as SwiftProtobuf reads it there: any varint below 2^32.
    private mutating func groupTag() throws(WireError) -> (field: Int, wire: WireType) {
        let value = try varint()
        guard value < UInt64(UInt32.max), value >> 3 != 0, let wire = WireType(rawValue: UInt8(value & 7)) else {
            throw malformed(
                "a tag that names no field (\(value))", expected: "a field number of 1 or more, wire type 0 to 5")
        }
        return (Int(value >> 3), wire)
    }

    private mutating func advance(_ count: Int) throws(WireError) {
        guard available >= count else {
            throw malformed("a \(count)-byte field where \(available) are left", expected: "the whole field")
        }
        index += count
    }
}
