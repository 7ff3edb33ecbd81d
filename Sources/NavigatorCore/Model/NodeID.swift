/// The id of a screen or a modal, unique within a session.
///
/// Ids are handed out by two parties that never talk before choosing one: the service, for
/// screens it opens, and a client shell, for screens the user opened on their own. They come from
/// disjoint namespaces: service ids are below 2^63, client ids have the top bit set. 0 is never an
/// id.
public struct NodeID: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public var rawValue: UInt64

    public static let clientBit: UInt64 = 1 << 63

    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(integerLiteral value: UInt64) { self.rawValue = value }

    /// The `number`th id of the client namespace.
    public static func client(_ number: UInt64) -> NodeID { NodeID(rawValue: number | clientBit) }

    public var isClientAssigned: Bool { rawValue & Self.clientBit != 0 }
    public var isValid: Bool { rawValue != 0 && rawValue != Self.clientBit }

    public static func < (lhs: NodeID, rhs: NodeID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `#12` for service ids, `#c3` for client ids.
    public var description: String {
        isClientAssigned ? "#c\(rawValue & ~Self.clientBit)" : "#\(rawValue)"
    }

    /// An id back from its ``description`` (`#12`, `#c3`); `nil` for other text.
    public init?(description text: Substring) {
        guard text.hasPrefix("#") else { return nil }
        let number = text.dropFirst()
        if number.hasPrefix("c"), let value = UInt64(number.dropFirst()) {
            self = .client(value)
        } else if let value = UInt64(number) {
            self.init(rawValue: value)
        } else {
            return nil
        }
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UInt64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
