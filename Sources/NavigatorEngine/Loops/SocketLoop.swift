import Logging
import ZeroMQ

/// A thread that owns sockets: `open()` makes and binds them on the thread (so a bind error
/// reaches whoever starts the loop), `run(_:)` serves until told to stop, and throws when it
/// cannot go on (the supervisor then stops the service).
protocol SocketLoop: Sendable {
    associatedtype Sockets
    var name: String { get }
    var supervisor: Supervisor { get }
    func open() throws -> Sockets
    func run(_ sockets: Sockets) throws
}

extension SocketLoop {
    /// Starts the loop on a dedicated thread; returns once its sockets are open, or throws what
    /// opening them threw (the thread has then ended). If the loop later throws — other than
    /// for the context's shutdown, which ends every loop — the supervisor hears of it.
    func start() async throws -> DedicatedThread {
        var started: DedicatedThread?
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            started = DedicatedThread(name: name) {
                let sockets: Sockets
                do {
                    sockets = try open()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume()
                do {
                    try run(sockets)
                } catch let error as ZeroMQError where error.code == .terminated {
                    // The context was shut down: every loop ends so (a stop past its bound).
                } catch {
                    supervisor.fail(name, error)
                }
            }
        }
        return started!
    }
}

/// Binds a socket to every endpoint and returns what each resolved to (the port chosen for `*`).
func bindAll(_ socket: Socket, _ endpoints: [String], _ what: String, security: Security?) throws -> [String] {
    if let security {
        // Every connection then passes a CURVE handshake and the ZAP handler.
        try socket.makeCurveServer(security.serverKeys)
        try socket.set(.zapDomain, Security.domain)
    }
    var bound: [String] = []
    for endpoint in endpoints {
        do {
            try socket.bind(endpoint)
        } catch {
            throw EngineError(.bindFailed, "cannot bind the \(what) socket to \(endpoint): \(error.message)")
        }
        bound.append(try socket.lastEndpoint)
    }
    return bound
}

/// A failure of the engine that a person must act on, said plainly, with a code callers can
/// branch on.
public struct EngineError: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable {
        /// A socket could not be bound to its endpoint (in use, not allowed, not an address).
        case bindFailed
        /// A part of the engine failed while it ran; the engine stopped.
        case partFailed
        /// The service's resident memory went above `maxMemoryMegabytes` (``MemoryGuard``).
        case memoryLimit
        /// Secure mode: the ZAP handler does not answer, so libzmq would admit any key.
        case securityUnavailable
        /// A change could not be made durable (the state file gone, the session moved).
        case notDurable
        /// The engine was started twice, or ended before it was ready.
        case lifecycle
        /// The stored state holds a value the engine cannot take (and leaves it as it is).
        case damagedState
    }

    public var code: Code
    public var description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
