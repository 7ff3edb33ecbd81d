import Foundation
import NavigatorTestSupport
import Testing

@testable import NavigatorEngine
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Security settings")
struct SecuritySettingsTests {
    @Test("without security, a non-loopback endpoint is refused unless --allow-insecure-remote")
    func insecureRemoteRefused() throws {
        #expect {
            _ = try ConfigurationLoader.load(file: nil, environment: [:], flags: ["intents": ["tcp://0.0.0.0:7401"]])
        } throws: { error in
            "\(error)".contains("intents endpoint tcp://0.0.0.0:7401 is not loopback, and security is off")
        }
        #expect(throws: ConfigurationError.self) {
            _ = try ConfigurationLoader.load(file: nil, environment: [:], flags: ["commands": ["tcp://*:7403"]])
        }
        #expect(throws: ConfigurationError.self) {
            _ = try ConfigurationLoader.load(file: nil, environment: [:], flags: ["http": ["0.0.0.0:7480"]])
        }
        let allowed = try ConfigurationLoader.load(
            file: nil, environment: ["NAVIGATOR_SECURITY_ALLOW_INSECURE_REMOTE": "true"],
            flags: ["intents": ["tcp://0.0.0.0:7401"]])
        #expect(allowed.engine.allowInsecureRemote)
        let local = try ConfigurationLoader.load(
            file: nil, environment: [:],
            flags: ["intents": ["tcp://localhost:7401", "ipc:///tmp/x"], "requests": ["tcp://[::1]:7402"]])
        #expect(local.engine.intentEndpoints.count == 2)
        // And a server built from a configuration directly refuses it too.
        var configuration = TestService.configuration(dataDirectory: temporaryDirectory("navsec-x"))
        configuration.commandEndpoints = ["tcp://0.0.0.0:*"]
        #expect(throws: ConfigurationError.self) {
            _ = try Engine(configuration: configuration, logger: TestService.logger("x"))
        }
    }

    @Test("security settings: a section in the file, NAVIGATOR_SECURITY_* in the environment, flags by their last part")
    func settings() throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let file = setup.directory.appendingPathComponent("n.yaml").path
        try "security:\n  secretKeyFile: \(setup.keyFile)\n  accessFile: /nowhere\nintents: [tcp://0.0.0.0:7401]\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let config = try ConfigurationLoader.load(
            file: file, environment: ["NAVIGATOR_SECURITY_ACCESS_FILE": setup.accessFile], flags: [:])
        #expect(config.engine.secretKeyFile == setup.keyFile && config.engine.accessFile == setup.accessFile)
        #expect(ConfigurationLoader.flagName("security.secretKeyFile") == "secret-key-file")
        try "security:\n  secretKeyFiles: x\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect {
            _ = try ConfigurationLoader.load(file: file, environment: [:], flags: [:])
        } throws: { error in
            "\(error)".contains("unknown setting security.secretKeyFiles")
        }
    }

    @Test("the secret key file must be the owner's alone; half a security configuration is refused")
    func keyFileChecks() throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        chmod(setup.keyFile, 0o644)
        #expect {
            _ = try Security.readSecretKey(setup.keyFile)
        } throws: { error in
            "\(error)".contains("has mode 644; expected it readable by its owner only")
        }
        chmod(setup.keyFile, 0o600)
        #expect(try Security.readSecretKey(setup.keyFile).publicKey == setup.server.publicKey)
        #expect(throws: ConfigurationError.self) {
            _ = try ConfigurationLoader.load(
                file: nil, environment: [:], flags: ["security.accessFile": [setup.accessFile]])
        }
    }
}
