/// Topic frames on the commands socket: a kind prefix, the session, and a terminating "/".
///
/// Session ids never contain "/", so the terminator makes a prefix subscription exact:
/// subscribing to `s/42/` never receives `s/421/`.
public enum Topic {
    /// Every command batch of one session.
    public static func batches(_ session: String) -> String { "s/\(session)/" }
    /// Rejections of one session's intents; `r//` when the session could not be read.
    public static func rejections(_ session: String) -> String { "r/\(session)/" }
    /// Audit records of one session.
    public static func audit(_ session: String) -> String { "a/\(session)/" }

    /// Subscribe to these for every session.
    public static let allBatches = "s/"
    public static let allRejections = "r/"
    public static let allAudit = "a/"

    /// Splits a topic into its kind and session; `nil` for anything not of the form `k/<session>/`.
    public static func parse(_ topic: String) -> (kind: FrameHeader.Kind, session: String)? {
        let utf8 = topic.utf8
        guard utf8.count >= 3, utf8.last == UInt8(ascii: "/") else { return nil }
        let kind: FrameHeader.Kind
        switch topic.prefix(2) {
        case "s/": kind = .batch
        case "r/": kind = .rejection
        case "a/": kind = .audit
        default: return nil
        }
        let session = String(topic.dropFirst(2).dropLast())
        guard !session.utf8.contains(UInt8(ascii: "/")) else { return nil }
        return (kind, session)
    }
}

/// The rules for session ids, which appear in topic frames.
public enum SessionID {
    public static let maxBytes = 128

    /// `nil` if `session` is a valid session id, else what is wrong with it.
    public static func problem(with session: String) -> String? {
        let count = session.utf8.count
        if count == 0 { return "session id is empty; expected 1 to \(maxBytes) bytes" }
        if count > maxBytes { return "session id has \(count) bytes; expected at most \(maxBytes)" }
        // Bytes, not characters: this runs for every intent. A control character (general
        // category Cc) is C0 (below 0x20), DEL, or C1 (U+0080-U+009F: 0xC2 0x80-0x9F in UTF-8).
        var previous: UInt8 = 0
        for byte in session.utf8 {
            if byte == UInt8(ascii: "/") {
                return "session id \"\(session)\" contains \"/\"; expected no \"/\" (it ends topics)"
            }
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && byte >= 0x80 && byte <= 0x9F) {
                return "session id contains a control character; expected printable text"
            }
            previous = byte
        }
        return nil
    }

    /// Validates the raw bytes of a session frame and returns the id.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(WireError) -> String {
        guard let session = String(wireUTF8: bytes) else {
            throw WireError(.invalidSession, "session frame is not valid UTF-8")
        }
        if let problem = problem(with: session) { throw WireError(.invalidSession, problem) }
        return session
    }
}
