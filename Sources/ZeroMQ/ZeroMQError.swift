import CZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An error reported by libzmq: the numeric code, the name of the C function that failed and the
/// library's own description of the code.
public struct ZeroMQError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The errno value libzmq reported (POSIX or one of libzmq's own, above `ZMQ_HAUSNUMERO`).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// EAGAIN: a non-blocking call would have blocked, or a timeout expired.
        public static let wouldBlock = Code(rawValue: EAGAIN)
        /// ETERM: the context was shut down or terminated.
        public static let terminated = Code(rawValue: czmq_ETERM)
        public static let interrupted = Code(rawValue: EINTR)
        public static let invalidArgument = Code(rawValue: EINVAL)
        public static let protocolNotSupported = Code(rawValue: czmq_EPROTONOSUPPORT)
        public static let incompatibleProtocol = Code(rawValue: czmq_ENOCOMPATPROTO)
        public static let addressInUse = Code(rawValue: czmq_EADDRINUSE)
        public static let addressNotAvailable = Code(rawValue: czmq_EADDRNOTAVAIL)
        public static let connectionRefused = Code(rawValue: czmq_ECONNREFUSED)
        public static let notSocket = Code(rawValue: czmq_ENOTSOCK)
        public static let hostUnreachable = Code(rawValue: czmq_EHOSTUNREACH)
        /// EFSM: the operation is not allowed in the socket's current state (for example REP send first).
        public static let invalidState = Code(rawValue: czmq_EFSM)
        public static let notSupported = Code(rawValue: czmq_ENOTSUP)
        public static let noThreadAvailable = Code(rawValue: czmq_EMTHREAD)
        public static let notFound = Code(rawValue: ENOENT)
        public static let tooManyFiles = Code(rawValue: EMFILE)
        public static let messageTooLarge = Code(rawValue: EMSGSIZE)

        public var description: String { String(cString: zmq_strerror(rawValue)) }
    }

    /// What went wrong, as libzmq's errno.
    public var code: Code
    /// The libzmq function that reported it, for example `zmq_bind`.
    public var function: String
    /// libzmq's text for `code` (`zmq_strerror`).
    public var message: String
    /// What the call was about (an endpoint, an option name), when that helps the reader.
    public var detail: String?

    public init(code: Code, function: String, detail: String? = nil) {
        self.code = code
        self.function = function
        self.message = code.description
        self.detail = detail
    }

    public var description: String {
        var text = "\(function) failed: \(message) (errno \(code.rawValue))"
        if let detail { text += " [\(detail)]" }
        return text
    }
}
