/// A deep-link pattern such as `app://chat/{conversationId}/thread/{threadId}`.
///
/// A URL matches when its scheme and every path segment match (literal segments exactly,
/// `{key}` segments capture a non-empty value, percent-decoded). Query parameters
/// (`?draft=hi`) become further info.
public struct URLPattern: Hashable, Sendable {
    enum Segment: Hashable, Sendable {
        case literal(String)
        case capture(String)
    }

    public let text: String
    let scheme: String
    let segments: [Segment]

    /// Parses a pattern; the error says what is wrong with it.
    public init(_ text: String) throws(RouteMapError) {
        self.text = text
        guard let (scheme, rest) = Self.split(text) else {
            throw RouteMapError(
                [], "url pattern \(text) has no scheme; expected scheme://path, e.g. app://chat/{conversationId}")
        }
        guard !rest.contains("?") else {
            throw RouteMapError(
                [], "url pattern \(text) has a query; expected a path only (query parameters are matched as info)")
        }
        self.scheme = scheme
        var segments: [Segment] = []
        var names = Set<String>()
        for part in rest.split(separator: "/", omittingEmptySubsequences: true).map(String.init) {
            if part.hasPrefix("{") && part.hasSuffix("}") && part.count > 2 {
                let name = String(part.dropFirst().dropLast())
                guard names.insert(name).inserted else {
                    throw RouteMapError([], "url pattern \(text) captures {\(name)} twice; expected each key once")
                }
                segments.append(.capture(name))
            } else if part.contains("{") || part.contains("}") {
                throw RouteMapError([], "url pattern \(text) has segment \(part); expected a literal or a whole {key}")
            } else {
                segments.append(.literal(part))
            }
        }
        guard !segments.isEmpty else {
            throw RouteMapError([], "url pattern \(text) has no path; expected at least one segment")
        }
        self.segments = segments
    }

    /// The keys the pattern captures.
    public var captures: [String] {
        segments.compactMap { if case .capture(let name) = $0 { name } else { nil } }
    }

    /// A URL taken apart once, to be matched against many patterns.
    public struct Parsed: Sendable {
        let scheme: String
        /// Kept in the value up to four (nearly every URL): taking one apart makes no array.
        let segments: InlineList<Substring>
        let query: Substring?

        /// `nil` when the text has no `scheme://`.
        public init?(_ url: String) {
            guard let (scheme, rest) = URLPattern.split(url) else { return nil }
            self.scheme = scheme
            // The query found by a scan, not a split.
            let path: Substring
            if let mark = rest.firstIndex(of: "?") {
                path = rest[..<mark]
                query = rest[rest.index(after: mark)...]
            } else {
                path = rest
                query = nil
            }
            // `split(separator: "/", omittingEmptySubsequences: true)`, into the list.
            var segments = InlineList<Substring>()
            var start = path.startIndex
            while start < path.endIndex {
                let end = path[start...].firstIndex(of: "/") ?? path.endIndex
                if end > start { segments.append(path[start..<end]) }
                start = end < path.endIndex ? path.index(after: end) : end
            }
            self.segments = segments
        }
    }

    /// The info a URL yields, or `nil` if it does not match.
    public func match(_ url: String) -> [String: String]? {
        Parsed(url).flatMap(match)
    }

    public func match(_ url: Parsed) -> [String: String]? {
        guard url.scheme == scheme, url.segments.count == segments.count else { return nil }
        // Every literal first: a pattern that does not match makes no dictionary.
        for (segment, part) in zip(segments, url.segments) {
            if case .literal(let literal) = segment, part != literal[...] { return nil }
        }
        var info: [String: String] = [:]
        for (segment, part) in zip(segments, url.segments) {
            if case .capture(let name) = segment {
                guard let value = Self.percentDecode(part) else { return nil }
                info[name] = value
            }
        }
        if let query = url.query {
            // `split(separator: "&")`, each pair split at its first `=`, by a scan: no arrays.
            var start = query.startIndex
            while start < query.endIndex {
                let end = query[start...].firstIndex(of: "&") ?? query.endIndex
                defer { start = end < query.endIndex ? query.index(after: end) : end }
                guard end > start else { continue }
                let pair = query[start..<end]
                let equals = pair.firstIndex(of: "=")
                guard let key = Self.percentDecode(pair[..<(equals ?? pair.endIndex)]), !key.isEmpty else { return nil }
                if info[key] == nil {
                    info[key] = equals.map { Self.percentDecode(pair[pair.index(after: $0)...]) } ?? ""
                }
            }
        }
        return info
    }

    /// The scheme (lowercased) and what follows `://`; a scan of the bytes (this runs for every
    /// deep link).
    private static func split(_ text: String) -> (String, Substring)? {
        let utf8 = text.utf8
        var index = utf8.startIndex
        while index != utf8.endIndex, utf8[index] != UInt8(ascii: ":") { index = utf8.index(after: index) }
        guard index != utf8.startIndex, index != utf8.endIndex else { return nil }
        var rest = utf8.index(after: index)
        for _ in 0..<2 {
            guard rest != utf8.endIndex, utf8[rest] == UInt8(ascii: "/") else { return nil }
            rest = utf8.index(after: rest)
        }
        let scheme = text[..<index]
        let hasCapitals = scheme.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
        return (hasCapitals ? scheme.lowercased() : String(scheme), text[rest...])
    }

    /// `%2F` -> `/`, `+` stays `+`; `nil` for a broken escape or invalid UTF-8.
    static func percentDecode(_ text: Substring) -> String? {
        // Nearly every value has no `%` byte at all, found by a byte scan; one that has is asked
        // `contains("%")` as well (by characters: a `%` with a combining mark is not one), as it
        // always was.
        guard text.utf8.contains(UInt8(ascii: "%")), text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
