import NavigatorCore

/// Reads a path from command-line words: `chat conversationId=42 --then thread threadId=7`.
public enum IntentWords {
    public struct Problem: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The contexts, outermost first. Empty words give an empty path (a URL may stand instead).
    /// `options`: the command's own option names, for a "did you mean" on a misspelt one.
    public static func path(_ words: [String], options: [String] = []) throws(Problem) -> [ScreenContext] {
        var path: [ScreenContext] = []
        var current: ScreenContext?
        for word in words {
            if word == "--then" {
                guard let context = current else {
                    throw Problem(
                        description: "--then must follow a screen: SCREEN key=value... --then SCREEN key=value...")
                }
                path.append(context)
                current = nil
                continue
            }
            if word.hasPrefix("-") {
                let name = String(word.prefix { $0 != "=" })
                let hint = Suggestion.nearest(to: name, in: options).map { "; did you mean \($0)?" } ?? "; see --help"
                throw Problem(description: "unknown option \(name)\(hint)")
            }
            if let equals = word.firstIndex(of: "=") {
                guard current != nil else {
                    throw Problem(description: "\(word) comes before a screen; expected SCREEN key=value...")
                }
                let key = String(word[..<equals])
                guard !key.isEmpty else { throw Problem(description: "\(word) has no key; expected key=value") }
                current!.info[key] = String(word[word.index(after: equals)...])
            } else if current == nil {
                current = ScreenContext(word)
            } else {
                throw Problem(
                    description:
                        "\(word) is neither key=value nor after --then; expected SCREEN key=value... [--then SCREEN ...]"
                )
            }
        }
        if words.last == "--then" { throw Problem(description: "--then must be followed by a screen") }
        if let current { path.append(current) }
        return path
    }
}

/// "Did you mean": the nearest of `candidates` to a misspelt word, if it is close (at most two
/// edits, and fewer than half the word).
public enum Suggestion {
    public static func nearest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= min(2, max(1, word.count / 2)) }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
