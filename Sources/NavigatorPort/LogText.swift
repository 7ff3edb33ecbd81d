/// Text a client chose (session ids, intent ids, urls, messages quoting them), made safe to log:
/// control characters and line separators are escaped (`\n`, `\u{1B}`), so no client can forge a
/// log line, and anything beyond ``limit`` bytes is cut, so no client decides how much is logged.
public struct LogText: CustomStringConvertible, Sendable {
    /// The most bytes of client text one log value shows (documented in the README).
    public static let limit = 256

    public let description: String

    public init(_ text: String, limit: Int = LogText.limit) {
        var out = ""
        out.reserveCapacity(min(text.utf8.count, limit) + 16)
        var bytes = 0
        var cut = false
        for scalar in text.unicodeScalars {
            let piece: String
            switch scalar {
            case "\n": piece = "\\n"
            case "\r": piece = "\\r"
            case "\t": piece = "\\t"
            case "\\": piece = "\\\\"
            case _
            where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
                || scalar.value == 0x2029:
                piece = "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: piece = String(scalar)
            }
            if bytes + piece.utf8.count > limit {
                cut = true
                break
            }
            bytes += piece.utf8.count
            out += piece
        }
        if cut { out += "…(\(text.utf8.count) bytes in all)" }
        description = out
    }
}
