import Foundation
import NavigatorEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The built `navigatord`, started as a user would, on ephemeral ports.
public final class Daemon: @unchecked Sendable {
    // @unchecked: `process` is only touched by the test that owns the daemon; the output buffer
    // is behind a Mutex shared with the reading thread.
    public let process = ChildProcess()
    private let output: ChildOutput

    public static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["NAVIGATORD_BINARY"] { return URL(fileURLWithPath: path) }
        return BuiltProducts.executable("navigatord")
    }

    /// `endpoints`: intents, requests and commands (ipc in a temporary directory, so that a
    /// restarted daemon is found where the last one was); ephemeral tcp ports otherwise.
    /// `environment`: variables set for it on top of the test process's own.
    public init(
        dataDirectory: URL, endpoints: [String]? = nil, extra: [String] = [], environment: [String: String] = [:]
    ) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw TestFailure("navigatord is not built at \(Self.binary.path); run swift build first (./dev test does)")
        }
        process.executableURL = Self.binary
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
        }
        process.arguments =
            [
                "--intents", endpoints?[0] ?? "tcp://127.0.0.1:*", "--requests", endpoints?[1] ?? "tcp://127.0.0.1:*",
                "--commands", endpoints?[2] ?? "tcp://127.0.0.1:*", "--http", "off", "--workers", "2",
                "--data-directory", dataDirectory.path, "--log-level", "info",
                "--shutdown-timeout-seconds", "5",
            ] + extra
        let pipe = try ChildProcess.pipe()
        process.standardError = pipe.write
        process.standardOutput = pipe.write
        output = ChildOutput(reading: pipe.read)
        defer { close(pipe.write) }
        try process.run()
    }

    public var log: String { output.text }

    /// Waits until the log contains `text` (bounded).
    public func wait(for text: String, timeout: Duration = .seconds(20)) async throws {
        let end = ContinuousClock.now + timeout
        while !log.contains(text) {
            guard process.isRunning || log.contains(text) else { throw TestFailure("navigatord ended early:\n\(log)") }
            guard ContinuousClock.now < end else {
                throw TestFailure("no \"\(text)\" in the log within \(timeout):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The endpoints from the start-up log line.
    public func endpoints() async throws -> BoundEndpoints {
        try await wait(for: "navigatord started")
        func value(_ key: String) -> [String] {
            guard let range = log.range(of: "\(key)=") else { return [] }
            return [String(log[range.upperBound...].prefix { !$0.isWhitespace })]
        }
        var endpoints = BoundEndpoints()
        endpoints.intents = value("intents")
        endpoints.requests = value("requests")
        endpoints.commands = value("commands")
        return endpoints
    }

    /// The HTTP server's `host:port` from the start-up log; nil when it is off.
    public func httpAddress() async throws -> String? {
        try await wait(for: "navigatord started")
        guard let range = log.range(of: "http=") else { return nil }
        let value = String(log[range.upperBound...].prefix { !$0.isWhitespace })
        return value == "off" ? nil : String(value.dropFirst("http://".count))
    }

    public func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to end (bounded) and returns its exit status.
    public func exitStatus(timeout: Duration = .seconds(20)) async throws -> Int32 {
        let end = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < end else {
                throw TestFailure("navigatord did not exit within \(timeout):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    /// Makes sure nothing is left running, whatever the test did.
    public func reap() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        output.waitForEndBlocking()
    }
}
