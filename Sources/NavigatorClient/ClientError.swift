import NavigatorWire

/// Why a client call failed, said so a person can act on it.
public struct ClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// No answer within the timeout: the service is down, unreachable, or overloaded.
        case timeout
        /// The service refused the request (the reply's reject code and message follow).
        case rejected
        /// A reply or a published message did not decode.
        case malformed
        /// The connection was closed.
        case closed
        /// A socket could not be set up (a bad endpoint, for example).
        case socket
        /// A setting the caller gave cannot be used (a key file, for example).
        case invalidArgument
    }

    public var code: Code
    public var description: String
    /// The service's reject code, for ``Code/rejected``.
    public var rejectCode: Navigator_V1_RejectCode?

    public init(_ code: Code, _ description: String, rejectCode: Navigator_V1_RejectCode? = nil) {
        self.code = code
        self.description = description
        self.rejectCode = rejectCode
    }
}

extension ClientError {
    /// The exit status the command-line tools use for this error (README, "Exit statuses"): 2 for
    /// a setting or file that cannot be used, 3 when the service refused, 1 otherwise (no answer,
    /// a socket that cannot be set up, a reply that does not decode).
    public var exitStatus: Int32 {
        switch code {
        case .invalidArgument: 2
        case .rejected: 3
        default: 1
        }
    }
}
