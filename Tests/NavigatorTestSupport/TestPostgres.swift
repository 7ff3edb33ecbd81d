import Foundation
import Postgres
import ZeroMQ

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
