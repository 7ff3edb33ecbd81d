/// Why the store could not do what it was asked, with a code callers can branch on and a message
/// that says what was wrong and what to do.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable {
        /// Another navigatord holds the data directory.
        case locked
        /// The state file or database is not one this build reads (unreadable, another schema
        /// version, written by a newer navigatord); it is left as it is.
        case unreadable
        /// The database cannot be reached, or a statement failed (retryable).
        case unavailable
        /// A setting is wrong (the store URL, the instance id, the data directory).
        case invalidSetting
    }

    public var code: Code
    public var description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
