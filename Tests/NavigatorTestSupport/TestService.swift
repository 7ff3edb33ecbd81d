import Foundation
import Logging
import NavigatorService

/// What every test that starts a service in-process needs: ephemeral ports on 127.0.0.1, no HTTP
/// endpoint, a data directory of its own, a quiet logger.
public enum TestService {
    public static func configuration(dataDirectory: URL, workers: Int = 2) -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        configuration.intentEndpoints = ["tcp://127.0.0.1:*"]
        configuration.requestEndpoints = ["tcp://127.0.0.1:*"]
        configuration.commandEndpoints = ["tcp://127.0.0.1:*"]
        configuration.metricsAddress = "off"
        configuration.clusterEndpoint = "tcp://127.0.0.1:*"
        configuration.dataDirectory = dataDirectory.path
        configuration.workers = workers
        configuration.shutdownTimeoutSeconds = 5
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
