import NavigatorCore
import Yams

/// Reads and writes route maps as YAML (JSON, a subset of YAML, reads too).
///
/// Every problem is reported with the line and column it is at: syntax errors, unknown or
/// mistyped keys, and everything ``RouteMap/validate()`` finds, all at once.
public enum RouteMapYAML {
    /// Parses and validates a route map. `source` names it in messages (a file path).
    /// `maxNodes`: the most YAML nodes the document may make, aliases expanded (a candidate sent
    /// by a client: its decoding time grows with them, and an alias can multiply them).
    public static func load(_ text: String, source: String = "route map", maxNodes: Int = .max)
        throws(RouteMapLoadError) -> RouteMap
    {
        // A client's candidate is written out: an alias used as a mapping key made the parser hash
        // its expansion (10^12 nodes from 738 bytes: the thread never came back, and held the
        // service's stop), and aliases multiplied what the checks below put in their messages.
        if maxNodes < .max, let problem = anchorProblem(text) {
            throw RouteMapLoadError(source: source, [problem])
        }
        let node: Node
        do {
            guard let root = try Yams.compose(yaml: text) else {
                throw RouteMapLoadError(
                    source: source,
                    [
                        .init(
                            line: nil, column: nil, keyPath: "",
                            message: "the document is empty; expected a route map with tabs (or root) and screens")
                    ])
            }
            node = root
            if maxNodes < .max, let problem = tooLarge(root, maxNodes: maxNodes) {
                throw RouteMapLoadError(source: source, [.init(line: nil, column: nil, keyPath: "", message: problem)])
            }
        } catch let error as RouteMapLoadError {
            throw error
        } catch {
            throw RouteMapLoadError(source: source, [syntaxProblem(error)])
        }
        let map: RouteMap
        do {
            map = try YAMLDecoder().decode(RouteMap.self, from: node)
        } catch let error as DecodingError {
            throw RouteMapLoadError(
                source: source,
                (allDecodingProblems(error, in: node) + validationProblems(beside: node)).sorted {
                    ($0.line ?? 0, $0.column ?? 0) < ($1.line ?? 0, $1.column ?? 0)
                })
        } catch {
            throw RouteMapLoadError(source: source, [syntaxProblem(error)])
        }
        let problems = map.validate().map { error in
            let mark = NodePath.mark(for: error.path, in: node)
            return RouteMapLoadError.Problem(
                line: mark?.line, column: mark?.column, keyPath: error.keyPath, message: error.message)
        }
        guard problems.isEmpty else { throw RouteMapLoadError(source: source, problems) }
        return map
    }

    /// Where the text has a YAML anchor (`&name`) or alias (`*name`), if it has one: the first
    /// `&` or `*` after the start of a line, a space, a tab, `[`, `{`, `,` or `:` and followed by
    /// a name. Quotes and comments are not skipped: a scanner that tells them apart can be
    /// misled into skipping a real anchor (a quote inside a plain scalar), so such a word in a
    /// quoted value or a comment (`'a &b'`) is refused too.
    static func anchorProblem(_ text: String) -> RouteMapLoadError.Problem? {
        let starts: [UInt8] = [
            UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "["),
            UInt8(ascii: "{"), UInt8(ascii: ","), UInt8(ascii: ":"),
        ]
        let delimiters: [UInt8] = [
            UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: ","),
            UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"), UInt8(ascii: "}"),
        ]
        var line = 1
        var column = 0
        var previous = UInt8(ascii: "\n")
        let bytes = Array(text.utf8)
        for (index, byte) in bytes.enumerated() {
            column += 1
            if byte == UInt8(ascii: "&") || byte == UInt8(ascii: "*"), starts.contains(previous),
                index + 1 < bytes.count, !delimiters.contains(bytes[index + 1])
            {
                return .init(
                    line: line, column: column, keyPath: "",
                    message:
                        "a YAML \(byte == UInt8(ascii: "&") ? "anchor (&name)" : "alias (*name)") is not taken in a route map sent to navigatord; expected the map written out (and no word starting with & or * in a value or comment)"
                )
            }
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 0
            }
            previous = byte
        }
        return nil
    }

    /// The most keys one mapping of a candidate may have (decoding a mapping's keys one by one
    /// takes time that grows with the square of its size).
    public static let maxKeysPerMapping = 2_000

    /// Why a document is too large to decode, if it is: more than `maxNodes` nodes, aliases
    /// expanded (counting stops there), or a mapping of more than ``maxKeysPerMapping`` keys.
    static func tooLarge(_ root: Node, maxNodes: Int) -> String? {
        var count = 0
        var pending = [root]
        while let node = pending.popLast() {
            count += 1
            if count > maxNodes {
                return
                    "the document makes more than \(maxNodes) YAML nodes (aliases expanded); expected at most \(maxNodes)"
            }
            switch node {
            case .mapping(let mapping):
                if mapping.count > maxKeysPerMapping {
                    let line = mapping.first?.key.mark.map { " (line \($0.line))" } ?? ""
                    return "a mapping\(line) has \(mapping.count) keys; expected at most \(maxKeysPerMapping)"
                }
                for pair in mapping {
                    pending.append(pair.key)
                    pending.append(pair.value)
                }
            case .sequence(let sequence): pending.append(contentsOf: sequence)
            default: break
            }
        }
        return nil
    }

    /// Reads a route map file.
    public static func load(contentsOfFile path: String) throws(RouteMapLoadError) -> RouteMap {
        try loadWithText(contentsOfFile: path).map
    }

    /// Reads a route map file: the map, and the text it was made from (its version is the
    /// text's).
    public static func loadWithText(contentsOfFile path: String) throws(RouteMapLoadError) -> (
        map: RouteMap, text: String
    ) {
        let text: String
        do {
            text = try TextFile.read(path)
        } catch {
            throw RouteMapLoadError(
                source: path, [.init(line: nil, column: nil, keyPath: "", message: error.reason)])
        }
        return (try load(text, source: path), text)
    }

    /// The map as YAML, keys sorted, defaults left out.
    public static func encode(_ map: RouteMap) -> String {
        let encoder = YAMLEncoder()
        encoder.options.sortKeys = true
        encoder.options.indent = 2
        // Encoding a RouteMap (strings, bools, lists and maps) cannot fail.
        return (try? encoder.encode(map)) ?? ""
    }

    static func syntaxProblem(_ error: any Error) -> RouteMapLoadError.Problem {
        if let yaml = error as? YamlError {
            switch yaml {
            case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
                .composer(let context, let problem, let mark, _):
                let detail = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": ")
                return .init(line: mark.line, column: mark.column, keyPath: "", message: "YAML syntax: \(detail)")
            default:
                return .init(line: nil, column: nil, keyPath: "", message: "YAML: \(yaml)")
            }
        }
        return .init(line: nil, column: nil, keyPath: "", message: "\(error)")
    }

    /// Every value problem, not only the first the decoder met: each tab and each screen is
    /// decoded on its own as well, and its problem reported with its place.
    /// Every problem `validate()` finds in what does decode, when some tabs or screens do not:
    /// the map without them is validated, leaving out what only their absence causes (a problem
    /// naming a screen that did not decode).
    static func validationProblems(beside node: Node) -> [RouteMapLoadError.Problem] {
        guard case .mapping(var top) = node else { return [] }
        var removed: Set<String> = []
        if case .mapping(var screens)? = top["screens"] {
            for (key, value) in screens {
                guard let name = key.string, (try? YAMLDecoder().decode(ScreenSpec.self, from: value)) == nil else {
                    continue
                }
                removed.insert(name)
                screens[key] = nil
            }
            top["screens"] = .mapping(screens)
        }
        if case .sequence(let tabs)? = top["tabs"] {
            let good = tabs.filter { (try? YAMLDecoder().decode(RouteMap.TabSpec.self, from: $0)) != nil }
            guard good.count == tabs.count else { return [] }  // tab indexes would shift: skip
        }
        guard let map = try? YAMLDecoder().decode(RouteMap.self, from: .mapping(top)) else { return [] }
        return map.validate().compactMap { error in
            let words = Set(error.message.split { !$0.isLetter && !$0.isNumber && $0 != "_" }.map(String.init))
            guard words.isDisjoint(with: removed), error.keyPath != "screens" || removed.isEmpty else { return nil }
            let mark = NodePath.mark(for: error.path, in: node)
            return RouteMapLoadError.Problem(
                line: mark?.line, column: mark?.column, keyPath: error.keyPath, message: error.message)
        }
    }

    static func allDecodingProblems(_ first: DecodingError, in node: Node) -> [RouteMapLoadError.Problem] {
        var problems: [RouteMapLoadError.Problem] = []
        func collect<T: Decodable>(_ type: T.Type, _ value: Node, _ prefix: [String]) {
            do {
                _ = try YAMLDecoder().decode(type, from: value)
            } catch let error as DecodingError {
                var problem = decodingProblem(error, in: value)
                problem.keyPath = (prefix + (problem.keyPath.isEmpty ? [] : [problem.keyPath])).joined(separator: ".")
                problems.append(problem)
            } catch {
                problems.append(syntaxProblem(error))
            }
        }
        if case .sequence(let tabs)? = node["tabs"] {
            for (index, tab) in tabs.enumerated() { collect(RouteMap.TabSpec.self, tab, ["tabs", "\(index)"]) }
        }
        if case .mapping(let screens)? = node["screens"] {
            for (key, value) in screens {
                guard let name = key.string else { continue }
                collect(ScreenSpec.self, value, ["screens", name])
            }
        }
        let problem = decodingProblem(first, in: node)
        if !problems.contains(where: { $0.line == problem.line && $0.column == problem.column }) {
            problems.insert(problem, at: 0)
        }
        return problems.sorted { ($0.line ?? 0, $0.column ?? 0) < ($1.line ?? 0, $1.column ?? 0) }
    }

    static func decodingProblem(_ error: DecodingError, in node: Node) -> RouteMapLoadError.Problem {
        let path: [String]
        let message: String
        switch error {
        case .keyNotFound(let key, let context):
            path = context.codingPath.map(NodePath.component)
            message = "missing key \(key.stringValue)"
        case .typeMismatch(let type, let context):
            path = context.codingPath.map(NodePath.component)
            message = "expected \(NodePath.describe(type)); \(context.debugDescription)"
        case .valueNotFound(let type, let context):
            path = context.codingPath.map(NodePath.component)
            message = "expected \(NodePath.describe(type)), found nothing"
        case .dataCorrupted(let context):
            path = context.codingPath.map(NodePath.component)
            message = context.debugDescription
        @unknown default:
            path = []
            message = "\(error)"
        }
        let mark = NodePath.mark(for: path, in: node)
        return .init(line: mark?.line, column: mark?.column, keyPath: path.joined(separator: "."), message: message)
    }
}

/// A route map that could not be loaded: every problem, each with where it is.
public struct RouteMapLoadError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Problem: Hashable, Sendable, CustomStringConvertible {
        /// 1-based, when known.
        public var line: Int?
        public var column: Int?
        /// The key it is about, e.g. `screens.chat.parent` (empty for the whole document).
        public var keyPath: String
        public var message: String

        public init(line: Int?, column: Int?, keyPath: String, message: String) {
            self.line = line
            self.column = column
            self.keyPath = keyPath
            self.message = message
        }

        /// `12:5: screens.chat.parent: screen chatt is not declared; ...`
        public var description: String {
            let place = line.map { "\($0):\(column ?? 1): " } ?? ""
            return place + (keyPath.isEmpty ? "" : "\(keyPath): ") + message
        }

        /// After the source: `file:12:5: ...`, or `file: ...` when there is no line.
        var afterSource: String { line == nil ? " \(description)" : description }
    }

    public var source: String
    public var problems: [Problem]

    public init(source: String, _ problems: [Problem]) {
        self.source = source
        self.problems = problems
    }

    /// One line per problem, each starting with `source:line:column:`.
    public var description: String {
        problems.map { "\(source):\($0.afterSource)" }.joined(separator: "\n")
    }
}

/// Finds the node a key path names, for its position in the text.
enum NodePath {
    /// The mark of the deepest node along `path` (the parent's, when a key is missing).
    static func mark(for path: [String], in root: Node) -> Mark? {
        var node = root
        var mark = root.mark
        for component in path {
            let next: Node?
            switch node {
            case .mapping(let mapping):
                // Point at the key itself: that is where a reader looks for a key's problem.
                if let pair = mapping.first(where: { $0.key.string == component }) {
                    mark = pair.key.mark ?? mark
                    next = pair.value
                } else {
                    next = nil
                }
            case .sequence(let sequence):
                next = Int(component).flatMap { sequence.indices.contains($0) ? sequence[$0] : nil }
                mark = next?.mark ?? mark
            default:
                next = nil
            }
            guard let next else { break }
            node = next
        }
        return mark
    }

    /// A coding key as it reads in a key path: `tabs.0`, not `tabs.Index 0`.
    static func component(_ key: any CodingKey) -> String {
        key.intValue.map(String.init) ?? key.stringValue
    }

    static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is [String].Type: "a list of strings"
        default: "\(type)"
        }
    }
}
