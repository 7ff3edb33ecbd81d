import Foundation
import TestThreads
import Testing
import ZeroMQ

/// The three transports every pattern must work over.
enum Transport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inproc, ipc, tcp

    var testDescription: String { rawValue }
}

/// A place to bind: a unique inproc name, an ipc socket in a temporary directory, or an ephemeral
/// port on 127.0.0.1. `remove()` cleans the directory up.
struct BindPoint: Sendable {
    let endpoint: String
    private let directory: URL?

    init(_ transport: Transport) throws {
        switch transport {
        case .inproc:
            endpoint = "inproc://test-\(UUID().uuidString)"
            directory = nil
        case .ipc:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
                "zmqt-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            endpoint = "ipc://\(dir.path)/s.sock"
            directory = dir
        case .tcp:
            endpoint = "tcp://127.0.0.1:*"
            directory = nil
        }
    }

    func remove() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
}

/// How long any single wait in these tests may take before the test fails instead of hanging.
let deadline: Duration = .seconds(10)

/// Runs socket code on a thread of its own: a blocking libzmq call must never run on Swift
/// concurrency's cooperative pool. The thread runs it as part of the test's task, so an
/// `#expect` inside is the test's.
func onThread<T: Sendable>(_ name: String = "zmq-test", _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await offPool(name: name, body)
}

extension Socket {
    /// Gives the socket a receive timeout so a broken test fails instead of hanging.
    func bounded() throws -> Socket {
        try set(.receiveTimeout, deadline)
        try set(.sendTimeout, deadline)
        return self
    }

    func receiveStrings() throws -> [String] {
        try receiveMultipart().map(\.string)
    }
}

/// Repeats `attempt` until it returns a value or `deadline` passes. For conditions that only
/// become true after an asynchronous step inside libzmq (a subscription reaching a publisher).
func eventually<T>(within limit: Duration = deadline, _ what: String, _ attempt: () throws -> T?) throws -> T {
    let clock = ContinuousClock()
    let end = clock.now + limit
    while clock.now < end {
        if let value = try attempt() { return value }
    }
    throw TestFailure("timed out waiting for \(what)")
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
