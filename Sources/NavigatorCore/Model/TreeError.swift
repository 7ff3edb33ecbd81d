/// Why a command could not be applied, or why a tree is not valid. The tree is left unchanged.
public struct TreeError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable, Codable {
        case unknownTab = "unknown_tab"
        case unknownStack = "unknown_stack"
        case unknownScreen = "unknown_screen"
        case unknownModal = "unknown_modal"
        case duplicateID = "duplicate_id"
        case invalidID = "invalid_id"
        case emptyStack = "empty_stack"
        case notTabBar = "not_tab_bar"
        case invalidTree = "invalid_tree"
        case limitExceeded = "limit_exceeded"
    }

    public var code: Code
    /// What was wrong and what was expected.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
