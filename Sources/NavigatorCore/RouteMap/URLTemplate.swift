/// A fallback's web-page URL: `https://example.com/chat/{conversationId}`, its placeholders
/// filled with the target's info values.
enum URLTemplate {
    /// The `{key}` placeholders, in order.
    static func placeholders(_ template: String) -> [String] {
        var keys: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            keys.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return keys
    }

    /// The template with each `{key}` replaced by `info[key]`, percent-encoded (all but
    /// letters, digits and `-._~`); a key without a value is left empty.
    static func fill(_ template: String, with info: [String: String]) -> String {
        var result = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            result += rest[..<open]
            result += percentEncoded(info[String(rest[rest.index(after: open)..<close])] ?? "")
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }

    static func percentEncoded(_ value: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
