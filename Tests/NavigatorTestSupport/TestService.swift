import Foundation
import Logging
import NavigatorEngine
import ZeroMQ

/// What every test that starts a service in-process needs: ephemeral ports on 127.0.0.1, no HTTP
/// endpoint, a data directory of its own, a quiet logger.
public enum TestService {
    public static func configuration(dataDirectory: URL, workers: Int = 2) -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.intentEndpoints = ["tcp://127.0.0.1:*"]
        configuration.requestEndpoints = ["tcp://127.0.0.1:*"]
        configuration.commandEndpoints = ["tcp://127.0.0.1:*"]
        configuration.clusterEndpoint = "tcp://127.0.0.1:*"
        configuration.dataDirectory = dataDirectory.path
        configuration.workers = workers
        // A bound against a stop that hangs, not a figure a test checks. With the whole suite in
        // one process on two cores (hundreds of threads: every test's services and clients),
        // Swift concurrency's pool has been seen to run nothing for 5 to 20 s at a time — its
        // threads waiting for locks held by threads the kernel had not run — and stops that
        // began meanwhile were cut at 5 s, so the next run of the same data directory started a
        // new epoch (DurabilityTests failed on that twice in CI).
        configuration.shutdownTimeoutSeconds = Int(30 * TestTiming.slowdown)
        return configuration
    }

    public static func logger(_ label: String, level: Logger.Level = .warning) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// A fresh directory path under the system's temporary directory (not created).
    public static func temporaryDirectory(_ prefix: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
    }
}

extension TestService {
    /// Several instances on one PostgreSQL database, in this process: one navigatord per id
    /// (ephemeral ports, a data directory of its own), started in order, handed to `body`, and
    /// all stopped afterwards — also when `body` throws or a later instance cannot start.
    public static func withInstances<R>(
        _ ids: [String], url: String, _ configure: (inout EngineConfiguration) -> Void = { _ in },
        _ body: ([Engine]) async throws -> R
    ) async throws -> R {
        let directory = temporaryDirectory("navpg")
        defer { try? FileManager.default.removeItem(at: directory) }
        var servers: [Engine] = []
        func stopAll() async { for server in servers.reversed() { await server.stop() } }
        do {
            for id in ids {
                var configuration = Self.configuration(dataDirectory: directory.appendingPathComponent(id))
                configuration.store = .postgresql(url: url)
                configuration.instanceID = id
                configure(&configuration)
                // Connecting and migrating block (libpq): not on the cooperative pool.
                let server = try await DedicatedThread.run(name: "test-navigatord-init") { [configuration] in
                    try Engine(configuration: configuration, logger: logger("navigatord-\(id)"))
                }
                try await server.start()
                servers.append(server)
            }
            let result = try await body(servers)
            await stopAll()
            return result
        } catch {
            await stopAll()
            throw error
        }
    }
}

/// How much slower than usual the tests run: `NAVIGATOR_TEST_SLOWDOWN` (default 1). `./dev tsan`
/// sets it (a sanitizer runs the code several times slower): the deadlines tests wait for a
/// condition with are stretched by it — what is asserted stays the same.
public enum TestTiming {
    public static let slowdown: Double = {
        guard let text = ProcessInfo.processInfo.environment["NAVIGATOR_TEST_SLOWDOWN"], let value = Double(text),
            value >= 1
        else { return 1 }
        return value
    }()

    public static func scaled(_ duration: Duration) -> Duration { duration * slowdown }

    /// A setting of whole seconds stretched the same way (rounded up): a window the service's own
    /// steps must fit in.
    public static func scaled(seconds: Int) -> Int { Int((Double(seconds) * slowdown).rounded(.up)) }
}
