/// W3C Trace Context's `traceparent` (version 00): `00-<trace id>-<parent id>-<flags>`, the ids
/// 32 and 16 lowercase hexadecimal digits, neither all zeros, the flags 2. An intent carries one
/// so that what the service does for it joins the producer's trace.
public enum TraceParent {
    public static let length = 55

    /// Whether `text` is a version-00 traceparent. (Later versions may be longer; an intent
    /// holds only this one.)
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == length, bytes[0] == 0x30, bytes[1] == 0x30, bytes[2] == 0x2D, bytes[35] == 0x2D,
            bytes[52] == 0x2D
        else { return false }
        func hex(_ range: Range<Int>) -> Bool {
            bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        func zeros(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        return hex(3..<35) && hex(36..<52) && hex(53..<55) && !zeros(3..<35) && !zeros(36..<52)
    }

    /// The trace id of a valid traceparent.
    public static func traceID(_ text: String) -> Substring? {
        guard isValid(text) else { return nil }
        return text.dropFirst(3).prefix(32)
    }
}
