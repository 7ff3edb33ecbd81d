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
    /// What the instances' thread returned or threw, once it has ended.
    private let served = Locked<Result<[String], any Error>?>(nil)

    /// Starts `serve` on a thread of its own — it binds the instances' sockets, sets
    /// ``endpoints`` and answers until ``stopped`` is set, returning what it saw — and runs
    /// `body` with a connection to them (its requests' `timeout` given). The thread is stopped
    /// and awaited however `body` ends.
    ///
    /// The thread is an operating-system thread started here, before anything is awaited: a
    /// thread started from a task waits for that task to get one of the cooperative pool's few
    /// threads first, and a suite running hundreds of tests on two cores has kept such a task
    /// waiting more than the 60 s allowed for the binding (four tests at once on 2026-12-02).
    func run<T: Sendable>(
        serving serve: @escaping @Sendable () throws -> [String], timeout: Duration = .seconds(5),
        then body: (NavigatorConnection) async throws -> T
    ) async throws -> (T, [String]) {
        let thread = DedicatedThread(name: "bare-instances") { [self] in
            let result = Result { try serve() }
            served.withLock { $0 = result }
        }
        // Joined off the pool: the thread may still be answering for a moment after `stopped`.
        func finish() async {
            stopped.withLock { $0 = true }
            _ = try? await DedicatedThread.run(name: "bare-join") { thread.join() }
        }
        let result: T
        do {
            result = try await withConnection(timeout: timeout, body)
        } catch {
            await finish()
            throw error
        }
        await finish()
        return (result, try served.withLock { $0 }!.get())
    }

    /// `body` with a connection to them, made once their thread has bound its sockets, and
    /// closed after it however it ends. If the thread ends before it binds, its error is thrown.
    private func withConnection<T: Sendable>(
        timeout: Duration, _ body: (NavigatorConnection) async throws -> T
    ) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(60)
        while endpoints.withLock({ $0 }) == nil {
            if let ended = served.withLock({ $0 }) {
                _ = try ended.get()
                throw TestFailure("the instances' thread ended without binding their sockets")
            }
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
