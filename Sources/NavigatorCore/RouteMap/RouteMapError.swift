/// A problem with a route map, naming the key it is about and what was expected.
public struct RouteMapError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The key path, e.g. `["screens", "chat", "parent"]`.
    public var path: [String]
    public var message: String

    public init(_ path: [String], _ message: String) {
        self.path = path
        self.message = message
    }

    public var keyPath: String { path.isEmpty ? "(top level)" : path.joined(separator: ".") }
    public var description: String { "\(keyPath): \(message)" }
}

/// All the problems found in one route map.
public struct RouteMapErrors: Error, Hashable, Sendable, CustomStringConvertible {
    public var errors: [RouteMapError]

    public init(_ errors: [RouteMapError]) { self.errors = errors }

    public var description: String {
        "route map has \(errors.count) problem\(errors.count == 1 ? "" : "s"):\n"
            + errors.map { "  - \($0)" }.joined(separator: "\n")
    }
}

/// A coding key for any string, to read maps with free-form keys and to reject unknown ones.
struct AnyKey: CodingKey, Hashable {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where K == AnyKey {
    /// Throws if the mapping holds a key that is not among `allowed` (a typo such as `homeTap`
    /// must not silently mean "no home tab").
    func rejectUnknownKeys(_ allowed: [String], in what: String) throws {
        for key in allKeys where !allowed.contains(key.stringValue) {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: codingPath + [key],
                    debugDescription:
                        "unknown key \(key.stringValue) in \(what); expected one of \(allowed.joined(separator: ", "))")
            )
        }
    }

    func optional<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? {
        try decodeIfPresent(type, forKey: AnyKey(key))
    }
}

func corrupted(_ decoder: any Decoder, _ key: String?, _ message: String) -> DecodingError {
    .dataCorrupted(.init(codingPath: decoder.codingPath + (key.map { [AnyKey($0)] } ?? []), debugDescription: message))
}
