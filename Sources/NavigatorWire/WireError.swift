/// Bytes that do not follow the wire protocol.
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case badHeader = "bad_header"
        case invalidSession = "invalid_session"
        case badFrames = "bad_frames"
        case malformed = "malformed"
        case sessionMismatch = "session_mismatch"
        case invalidEvent = "invalid_event"
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
