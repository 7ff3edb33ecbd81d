import Locking
import NavigatorClient
import NavigatorTestSupport
import NavigatorWire
import ZeroMQ

/// Instances made of bare sockets (as the wire description gives them), served by a thread of
/// the test's own: what the test and that thread share, and the steps every such test takes.
final class BareInstances: Sendable {
    let endpoints = Locked<ServerEndpoints?>(nil)
    let stopped = Locked(false)

    /// Starts `serve` on a thread of its own — it binds the instances' sockets, sets
    /// ``endpoints`` and answers until ``stopped`` is set, returning what it saw — and runs
    /// `body` with a connection to them (its requests' `timeout` given). The thread is stopped
    /// and awaited however `body` ends.
    func run<T: Sendable>(
        serving serve: @escaping @Sendable () throws -> [String], timeout: Duration = .seconds(5),
        then body: (NavigatorConnection) async throws -> T
    ) async throws -> (T, [String]) {
        async let served = onThread(serve)
        let result: T
        do {
            result = try await withConnection(timeout: timeout, body)
        } catch {
            stopped.withLock { $0 = true }
            _ = try? await served
            throw error
        }
        stopped.withLock { $0 = true }
        return (result, try await served)
    }

    /// `body` with a connection to them, made once their thread has bound its sockets, and
    /// closed after it however it ends. Generous: that thread starts from a task, which a suite
    /// running hundreds of tests on two cores has been seen to start more than 10 s late.
    private func withConnection<T: Sendable>(
        timeout: Duration, _ body: (NavigatorConnection) async throws -> T
    ) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(60)
        while endpoints.withLock({ $0 }) == nil {
            guard ContinuousClock.now < deadline else { throw TestFailure("the instances never bound") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let connection = try await NavigatorConnection(endpoints: endpoints.withLock { $0! }, timeout: timeout)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Binds each socket to an ephemeral port on 127.0.0.1, to close at once and to wait 20 ms at
    /// most for a message (the thread checks ``stopped`` between).
    static func bind(_ sockets: [Socket]) throws {
        for socket in sockets {
            try socket.set(.linger, .zero)
            try socket.set(.receiveTimeout, .milliseconds(20))
            try socket.bind("tcp://127.0.0.1:*")
        }
    }

    /// The endpoints a connection is made with: those of `intents` and `requests`, and
    /// `commands`.
    func advertise(intents: Socket, requests: Socket, commands: String) throws {
        let endpoints = ServerEndpoints(
            intents: try intents.lastEndpoint, requests: try requests.lastEndpoint, commands: commands)
        self.endpoints.withLock { $0 = endpoints }
    }

    /// Answers the request that came in `frames` (a ROUTER's: the routing frames, then the
    /// request) with `reply`.
    static func send(_ reply: Navigator_V1_Reply, answering frames: [Message], on socket: Socket) throws {
        var out: [any FrameBytes] = frames.dropLast().map(\.bytes)
        out.append(try reply.serializedBytes() as [UInt8])
        try socket.send(multipart: out)
    }
}
