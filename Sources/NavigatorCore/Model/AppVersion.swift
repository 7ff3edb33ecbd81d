/// An app's version as its shell reports it (`2.10.1`), compared number by number: 1.10 is
/// after 1.9, and missing numbers count as 0 (1.2 is 1.2.0).
///
/// One to four numbers of at most nine digits each, separated by dots; nothing else (no `v`,
/// no `-beta`): a shell sends what its build says, and a route map's `since:` is compared with
/// it exactly so.
public struct AppVersion: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    /// The numbers, trailing zeros dropped (so that 1.2 and 1.2.0 are equal).
    public let numbers: [UInt32]
    /// As it was written.
    public let text: String

    /// The longest version text taken, in bytes.
    public static let maxBytes = 39

    /// Nil, with the reason in `problem(with:)`, for text that is not a version.
    public init?(_ text: String) {
        guard Self.problem(with: text) == nil else { return nil }
        var numbers = text.split(separator: ".").map { UInt32($0)! }
        while numbers.last == 0 { numbers.removeLast() }
        self.numbers = numbers
        self.text = text
    }

    /// Why `text` is not a version, if it is not.
    public static func problem(with text: String) -> String? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= maxBytes, (1...4).contains(parts.count),
            parts.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 9 && $0.utf8.allSatisfy { (48...57).contains($0) } })
        else {
            return
                "\"\(text.count > 40 ? String(text.prefix(40)) + "…" : text)\" is not a version; expected 1 to 4 numbers separated by dots, such as 2.10.1"
        }
        return nil
    }

    public static func < (lhs: AppVersion, rhs: AppVersion) -> Bool {
        for index in 0..<max(lhs.numbers.count, rhs.numbers.count) {
            let left = index < lhs.numbers.count ? lhs.numbers[index] : 0
            let right = index < rhs.numbers.count ? rhs.numbers[index] : 0
            if left != right { return left < right }
        }
        return false
    }

    public static func == (lhs: AppVersion, rhs: AppVersion) -> Bool { lhs.numbers == rhs.numbers }
    public func hash(into hasher: inout Hasher) { hasher.combine(numbers) }

    public var description: String { text }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let version = AppVersion(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: Self.problem(with: text) ?? text))
        }
        self = version
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
