import Foundation
import Postgres
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The PostgreSQL server of a test run: `./dev test` starts a throwaway one
/// (`scripts/postgres.sh run`) and passes its URL in `NAVIGATOR_TEST_POSTGRES`.
public enum TestPostgres {
    /// The throwaway server's URL (an administrator's, on its `navigator` database), if one runs.
    public static var serverURL: String? { ProcessInfo.processInfo.environment["NAVIGATOR_TEST_POSTGRES"] }

    /// Whether the PostgreSQL tests run: when a server was started for them, and always under
    /// `./dev test` (which sets `NAVIGATOR_TEST_REQUIRE_POSTGRES=1`: there a missing server fails
    /// them instead of leaving them out). A bare `swift test` leaves them out; run
    /// `scripts/postgres.sh run swift test` to include them.
    public static var enabled: Bool {
        serverURL != nil || ProcessInfo.processInfo.environment["NAVIGATOR_TEST_REQUIRE_POSTGRES"] == "1"
    }

    /// Runs `body` with the URL of a new, empty database of its own (tests run in parallel), and
    /// drops the database afterwards, also when `body` throws.
    public static func withDatabase<R>(_ body: (String) async throws -> R) async throws -> R {
        guard let server = serverURL else {
            throw TestPostgresError(
                "NAVIGATOR_TEST_POSTGRES is not set: this test needs the throwaway PostgreSQL server of scripts/postgres.sh (./dev test starts it)"
            )
        }
        let name = "test_\(UInt64.random(in: 0...UInt64.max))"
        // libpq blocks: on a thread of its own, never on the cooperative pool (other tests'
        // async work, the in-process services' HTTP handlers among it, would wait).
        _ = try await DedicatedThread.run(name: "test-postgres") {
            try PostgresConnection(url: server, applicationName: "navigator-tests").execute("CREATE DATABASE \(name)")
        }
        func drop() async {
            _ = try? await DedicatedThread.run(name: "test-postgres") {
                try PostgresConnection(url: server, applicationName: "navigator-tests")
                    .execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            }
        }
        do {
            let result = try await body(databaseURL(server, name))
            await drop()
            return result
        } catch {
            await drop()
            throw error
        }
    }

    /// `server` with its database replaced by `name`.
    static func databaseURL(_ server: String, _ name: String) -> String {
        let scheme = server.range(of: "://")!
        let rest = server[scheme.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let query = rest[slash...].firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        return String(server[..<slash]) + "/" + name + query
    }
}

public struct TestPostgresError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A PostgreSQL server of a test's own, from `scripts/postgres.sh` like the shared one, for the
/// cases that stop, kill and restart it under load (the shared server must stay up for the
/// other tests). Durable as deployments run it (fsync on). ``remove()`` stops it and deletes its
/// files; await it on every path.
public final class ScratchPostgres: Sendable {
    public let url: String
    private let directory: String

    /// Starts the server (blocking: call it off the cooperative pool, or through ``start()``).
    init() throws {
        directory = "/tmp/navigator-postgres-scratch.\(UInt64.random(in: 0...UInt64.max))"
        url = try Self.script("start", directory).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public static func start() async throws -> ScratchPostgres {
        try await DedicatedThread.run(name: "test-postgres") { try ScratchPostgres() }
    }

    /// Stops the server (fast shutdown: sessions ended, checkpoint written).
    public func halt() async throws { try await run("halt") }
    /// Kills the server and its backends with SIGKILL: it recovers from its log when resumed.
    public func kill() async throws { try await run("kill") }
    /// Starts the halted or killed server again, on its port.
    public func resume() async throws { try await run("resume") }

    /// Stops the server and deletes its files, on a thread of its own (pg_ctl waits).
    public func remove() async {
        let directory = self.directory
        _ = try? await DedicatedThread.run(name: "test-postgres") { try Self.script("stop", directory) }
    }

    private func run(_ command: String) async throws {
        let directory = self.directory
        _ = try await DedicatedThread.run(name: "test-postgres") { try Self.script(command, directory) }
    }

    private static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/postgres.sh").path

    @discardableResult
    private static func script(_ command: String, _ directory: String) throws -> String {
        // Files, not pipes: the server the script starts would keep a pipe open (reading to its
        // end would wait for the server to stop).
        let output = directory + ".out"
        let errors = directory + ".err"
        let descriptors = [output, errors].map { (file: String) -> Int32 in
            open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        }
        defer {
            for descriptor in descriptors where descriptor >= 0 { close(descriptor) }
            for file in [output, errors] { unlink(file) }
        }
        guard descriptors.allSatisfy({ $0 >= 0 }) else {
            throw TestPostgresError("cannot create \(output): \(String(cString: strerror(errno)))")
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [path, command, directory]
        var environment = ProcessInfo.processInfo.environment
        environment["POSTGRES_FAST"] = nil
        process.environment = environment
        process.standardOutput = descriptors[0]
        process.standardError = descriptors[1]
        try process.run()
        process.waitUntilExit()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let message = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw TestPostgresError("scripts/postgres.sh \(command) failed (\(process.terminationStatus)): \(message)")
        }
        return text
    }
}
