/// W3C Trace Context's `traceparent` (version 00): `00-<trace id>-<parent id>-<flags>`, the ids
/// 32 and 16 lowercase hexadecimal digits, neither all zeros, the flags 2. An intent carries one
/// so that what the service does for it joins the producer's trace.
public enum TraceParent {
    public static let length = 55

    /// Whether `text` is a version-00 traceparent. (Later versions may be longer; an intent
    /// holds only this one.)
    public static func isValid(_ text: String) -> Bool {
        guard text.utf8.count == length else { return false }
        // One pass over the bytes, no copy: the version and the dashes where they belong, hex
        // digits elsewhere, and a digit other than 0 somewhere in each id.
        var traceNonZero = false
        var parentNonZero = false
        for (index, byte) in text.utf8.enumerated() {
            switch index {
            case 0, 1: guard byte == 0x30 else { return false }
            case 2, 35, 52: guard byte == 0x2D else { return false }
            default:
                guard (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) else { return false }
                if byte != 0x30 {
                    if index < 35 { traceNonZero = true } else if index < 52 { parentNonZero = true }
                }
            }
        }
        return traceNonZero && parentNonZero
    }

    /// The trace id of a valid traceparent.
    public static func traceID(_ text: String) -> Substring? {
        guard isValid(text) else { return nil }
        return text.dropFirst(3).prefix(32)
    }
}
