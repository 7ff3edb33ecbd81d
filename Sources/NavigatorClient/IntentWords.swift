import NavigatorCore

/// Reads a path from command-line words: `chat conversationId=42 --then thread threadId=7`.
public enum IntentWords {
    public struct Problem: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The contexts, outermost first. Empty words give an empty path (a URL may stand instead).
    public static func path(_ words: [String]) throws(Problem) -> [ScreenContext] {
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
                throw Problem(description: "unknown option \(word); see --help")
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
