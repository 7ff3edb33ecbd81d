/// The declared type of one info value. Values travel as text and are checked (and brought to
/// one canonical spelling, so `042` and `42` identify the same chat) against it.
public enum InfoType: Hashable, Sendable {
    case int
    case string
    case uuid
    case bool
    /// One of the listed values.
    case oneOf([String])

    public var name: String {
        switch self {
        case .int: "int"
        case .string: "string"
        case .uuid: "uuid"
        case .bool: "bool"
        case .oneOf(let values): "one of \(values.joined(separator: ", "))"
        }
    }

    /// The canonical spelling of `value`, or `nil` if it is not of this type.
    public func normalize(_ value: String) -> String? {
        switch self {
        case .string:
            return value
        case .int:
            // Nearly every value is canonical already (`42`): up to 18 digits without a leading
            // zero is, whatever they are, and is returned as it is, neither parsed nor written again.
            let utf8 = value.utf8
            if (1...18).contains(utf8.count), utf8.first != UInt8(ascii: "0") || utf8.count == 1,
                utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            {
                return value
            }
            guard let number = Int64(value.hasPrefix("+") ? String(value.dropFirst()) : value) else { return nil }
            return String(number)
        case .bool:
            switch value.lowercased() {
            case "true", "1", "yes": return "true"
            case "false", "0", "no": return "false"
            default: return nil
            }
        case .uuid:
            // Checked on the bytes as they are: nearly every value is lower case already and is
            // returned as it is, with no new string.
            guard value.utf8.count == 36 else { return nil }
            var capitals = false
            for (index, byte) in value.utf8.enumerated() {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                } else if (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte) {
                    capitals = true
                } else {
                    let isHex =
                        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                        || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    guard isHex else { return nil }
                }
            }
            return capitals ? value.lowercased() : value
        case .oneOf(let values):
            return values.contains(value) ? value : nil
        }
    }
}

/// One declared info key of a screen.
public struct InfoSpec: Hashable, Sendable, Codable {
    public var type: InfoType
    public var required: Bool

    public init(_ type: InfoType, required: Bool = true) {
        self.type = type
        self.required = required
    }

    public static func optional(_ type: InfoType) -> InfoSpec { InfoSpec(type, required: false) }

    static let typeNames = ["int", "string", "uuid", "bool"]

    /// Reads `int` (required), or `{type: int, required: false}`, or `{enum: [a, b]}`.
    public init(from decoder: any Decoder) throws {
        if let name = try? decoder.singleValueContainer().decode(String.self) {
            type = try Self.type(named: name, decoder, nil)
            required = true
            return
        }
        let container = try decoder.container(keyedBy: AnyKey.self)
        try container.rejectUnknownKeys(["type", "enum", "required"], in: "an info declaration")
        required = try container.optional(Bool.self, "required") ?? true
        let name = try container.optional(String.self, "type")
        let values = try container.optional([String].self, "enum")
        switch (name, values) {
        case (let name?, nil): type = try Self.type(named: name, decoder, "type")
        case (nil, let values?), ("enum", let values?): type = .oneOf(values)
        case (nil, nil): throw corrupted(decoder, nil, "info declaration has neither type nor enum; expected one")
        case (_?, _?): throw corrupted(decoder, "enum", "enum values given with type; expected either type or enum")
        }
    }

    private static func type(named name: String, _ decoder: any Decoder, _ key: String?) throws -> InfoType {
        switch name {
        case "int": return .int
        case "string": return .string
        case "uuid": return .uuid
        case "bool": return .bool
        default:
            throw corrupted(
                decoder, key, "info type \(name) is unknown; expected int, string, uuid, bool or an enum list")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch (type, required) {
        case (.oneOf(let values), _):
            var container = encoder.container(keyedBy: AnyKey.self)
            try container.encode(values, forKey: AnyKey("enum"))
            if !required { try container.encode(false, forKey: AnyKey("required")) }
        case (_, true):
            var container = encoder.singleValueContainer()
            try container.encode(type.name)
        case (_, false):
            var container = encoder.container(keyedBy: AnyKey.self)
            try container.encode(type.name, forKey: AnyKey("type"))
            try container.encode(false, forKey: AnyKey("required"))
        }
    }
}
