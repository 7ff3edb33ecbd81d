import Foundation
import Logging
import NavigatorTestSupport
import Testing

@testable import NavigatorEngine
@testable import navigatord

@Suite("Configuration")
struct ConfigurationTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/navigatord.example.yaml").path

    @Test("the example config file documents exactly the embedded defaults")
    func exampleIsDefaults() throws {
        #expect(
            try ConfigurationLoader.load(file: Self.example, environment: [:], flags: [:]) == NavigatordConfiguration())
    }

    @Test("file < environment < flags")
    func precedence() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "navcfg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("c.yaml").path
        try "workers: 3\nlogLevel: debug\nintents: [tcp://127.0.0.1:9001, ipc:///tmp/n.sock]\nparkedTTLSeconds: 7\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let config = try ConfigurationLoader.load(
            file: file,
            environment: [
                "NAVIGATOR_WORKERS": "5", "NAVIGATOR_REQUESTS": "tcp://127.0.0.1:9002, tcp://127.0.0.1:9003",
                "OTHER": "x",
            ],
            flags: ["workers": ["6"], "http": ["off"]])
        #expect(config.engine.workers == 6)
        #expect(config.logLevel == .debug)
        #expect(config.engine.intentEndpoints == ["tcp://127.0.0.1:9001", "ipc:///tmp/n.sock"])
        #expect(config.engine.requestEndpoints == ["tcp://127.0.0.1:9002", "tcp://127.0.0.1:9003"])
        #expect(config.httpAddress == "off")
        #expect(config.engine.parkedTTLSeconds == 7)
        // `metrics`, the older name of `http`, is still taken in a file and the environment.
        try "metrics: 127.0.0.1:9480\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try ConfigurationLoader.load(file: file, environment: [:], flags: [:]).httpAddress == "127.0.0.1:9480")
        let viaEnvironment = try ConfigurationLoader.load(
            file: nil, environment: ["NAVIGATOR_METRICS": "127.0.0.1:9481"], flags: [:])
        #expect(viaEnvironment.httpAddress == "127.0.0.1:9481")
    }

    @Test(
        "mistakes name their source, the setting, and what was expected",
        arguments: [
            ("unknownKey: 1\n", [:], [:], "c.yaml:1: unknown setting unknownKey; expected one of intents"),
            ("workers: [1, 2]\n", [:], [:], "c.yaml:1: workers takes one value, got 2"),
            ("commands:\n  - tcp://127.0.0.1:70000\n", [:], [:], "port 70000 is not a number from 1 to 65535"),
            (
                "", ["NAVIGATOR_HIGH_WATER_MARK": "-1"], [:],
                "environment NAVIGATOR_HIGH_WATER_MARK: highWaterMark \"-1\" is not a whole number"
            ),
            ("", [:], ["http": ["localhost"]], "--http: http \"localhost\" is not host:port"),
            ("", [:], ["intents": ["udp://x:1"]], "--intents: intents endpoint udp://x:1: unknown transport"),
            ("- just a list\n", [:], [:], "expected a mapping of settings"),
            (
                "", [:], ["store": ["mysql://u:hunter2@h/db"]],
                "--store: store \"mysql://u:***@h/db\" is unknown; expected sqlite or postgresql://"
            ),
            (
                "", ["NAVIGATOR_STORE": "postgresql://u:hunter2@db.internal:5432"], [:],
                "store \"postgresql://u:***@db.internal:5432\" names no host or no database"
            ),
        ] as [(String, [String: String], [String: [String]], String)])
    func mistakes(file text: String, environment: [String: String], flags: [String: [String]], message: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "navcfg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("c.yaml").path
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        #expect {
            _ = try ConfigurationLoader.load(file: file, environment: environment, flags: flags)
        } throws: { error in
            let description = "\(error)"
            guard !description.contains("hunter2") else { return false }  // passwords never shown
            return description.contains(message)
                || description.contains(message.replacingOccurrences(of: "c.yaml", with: file))
        }
    }

    @Test("store: sqlite or a PostgreSQL URL, shown without its password")
    func store() throws {
        #expect(try ConfigurationLoader.load(file: nil, environment: [:], flags: [:]).engine.store == .sqlite)
        let url = "postgresql://navigator:s3cret@db.internal:5432/navigator?sslmode=require"
        let config = try ConfigurationLoader.load(file: nil, environment: ["NAVIGATOR_STORE": url], flags: [:])
        #expect(config.engine.store == .postgresql(url: url))
        #expect("\(config.engine.store)" == "postgresql://navigator:***@db.internal:5432/navigator?sslmode=require")
        #expect(
            try ConfigurationLoader.load(file: nil, environment: ["NAVIGATOR_STORE": url], flags: ["store": ["sqlite"]])
                .engine.store == .sqlite)
    }

    @Test("environment names and option names keep acronyms whole")
    func names() {
        #expect(ConfigurationLoader.environmentName("parkedTTLSeconds") == "NAVIGATOR_PARKED_TTL_SECONDS")
        #expect(ConfigurationLoader.environmentName("dataDirectory") == "NAVIGATOR_DATA_DIRECTORY")
        #expect(ConfigurationLoader.flagName("maxParkedPerSession") == "max-parked-per-session")
    }

    @Test("an HTTP port in use is a clear start-up error")
    func httpPortInUse() async throws {
        try await withNavigatord { server, endpoints in
            var configuration = server.configuration
            configuration.httpAddress = try #require(server.httpAddress)
            configuration.engine.dataDirectory += "-second"
            defer { try? FileManager.default.removeItem(atPath: configuration.engine.dataDirectory) }
            let second = try await Navigator(configuration: configuration, logger: Logger(label: "second"))
            await #expect {
                try await second.start()
            } throws: {
                "\($0)".contains("cannot serve HTTP on 127.0.0.1:")
                    && "\($0)".contains("Address already in use")
            }
        }
    }
}
