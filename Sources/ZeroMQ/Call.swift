import CZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one choke point for every libzmq call that can fail.
///
/// It reads `zmq_errno()` immediately after the call (nothing may run in between that could reset
/// the thread's errno), retries `EINTR`, and throws a ``ZeroMQError`` with the code and the
/// function's name. `EFAULT` means this wrapper passed libzmq an invalid object, a bug rather than
/// a condition to handle, and stops the process.
@usableFromInline
enum ZMQ {
    /// A call that returns a non-negative result on success, -1 with errno on failure.
    @inlinable
    @inline(__always)
    static func call(
        _ function: StaticString, detail: @autoclosure () -> String? = nil, _ body: () -> Int32
    ) throws(ZeroMQError) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = zmq_errno()
            if code == EINTR { continue }
            throw failure(code, function, detail())
        }
    }

    /// The same for calls made with `ZMQ_DONTWAIT` (or on a socket with a timeout): `EAGAIN`
    /// comes back as `nil` instead of an error.
    @inlinable
    @inline(__always)
    static func callUnlessWouldBlock(
        _ function: StaticString, detail: @autoclosure () -> String? = nil, _ body: () -> Int32
    ) throws(ZeroMQError) -> Int32? {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = zmq_errno()
            if code == EINTR { continue }
            if code == EAGAIN { return nil }
            throw failure(code, function, detail())
        }
    }

    /// A call that returns a pointer, NULL with errno on failure.
    @inlinable
    static func pointer(
        _ function: StaticString, _ body: () -> UnsafeMutableRawPointer?
    ) throws(ZeroMQError) -> UnsafeMutableRawPointer {
        while true {
            if let pointer = body() { return pointer }
            let code = zmq_errno()
            if code == EINTR { continue }
            throw failure(code, function, nil)
        }
    }

    @usableFromInline
    static func failure(_ code: Int32, _ function: StaticString, _ detail: String?) -> ZeroMQError {
        precondition(code != EFAULT, "\(function) reported EFAULT: the ZeroMQ wrapper passed an invalid object")
        return ZeroMQError(code: .init(rawValue: code), function: "\(function)", detail: detail)
    }
}

/// The version of the libzmq library loaded at run time.
public var zeroMQVersion: (major: Int, minor: Int, patch: Int) {
    var major: Int32 = 0
    var minor: Int32 = 0
    var patch: Int32 = 0
    zmq_version(&major, &minor, &patch)
    return (Int(major), Int(minor), Int(patch))
}

/// Whether libzmq was built with a capability (`"curve"`, `"ipc"`, `"pgm"`, ...).
public func zeroMQHas(_ capability: String) -> Bool {
    zmq_has(capability) != 0
}
