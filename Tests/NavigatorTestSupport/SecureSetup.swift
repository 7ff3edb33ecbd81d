import Foundation
import NavigatorEngine
import ZeroMQ

/// A secure navigatord's files for a test: a server key pair, an access file with an admin
/// (`ops`), a shell (`alice-phone`, session s1) and a producer (`shop-gateway`, sessions shop-*),
/// and client key pairs for each.
public struct SecureSetup: Sendable {
    public let directory: URL
    public let server: CurveKeyPair
    public let admin: CurveKeyPair
    public let shell: CurveKeyPair
    public let producer: CurveKeyPair
    public var keyFile: String { directory.appendingPathComponent("server.key").path }
    public var accessFile: String { directory.appendingPathComponent("access.yaml").path }

    public init() throws {
        directory = temporaryDirectory("navsec")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        server = try CurveKeyPair.generate()
        admin = try CurveKeyPair.generate()
        shell = try CurveKeyPair.generate()
        producer = try CurveKeyPair.generate()
        guard
            FileManager.default.createFile(
                atPath: keyFile, contents: Data((server.secretKey + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else { throw TestFailure("cannot write \(keyFile)") }
        try writeAccess(shell: true, producer: true)
    }

    public func writeAccess(shell withShell: Bool, producer withProducer: Bool) throws {
        var text = """
            clients:
              - name: ops
                key: "\(admin.publicKey)"
                role: admin

            """
        if withShell {
            text += """
                  - name: alice-phone
                    key: "\(shell.publicKey)"
                    role: shell
                    sessions: ["s1"]

                """
        }
        if withProducer {
            text += """
                  - name: shop-gateway
                    key: "\(producer.publicKey)"
                    role: producer
                    sessions: ["shop-*"]

                """
        }
        try text.write(toFile: accessFile, atomically: true, encoding: .utf8)
    }

    public func configure(_ configuration: inout EngineConfiguration) {
        configuration.secretKeyFile = keyFile
        configuration.accessFile = accessFile
    }

    public func client(
        _ keys: CurveKeyPair, _ endpoints: BoundEndpoints, serverKey: String? = nil, timeout: Duration = .seconds(10)
    )
        throws -> Client
    {
        try Client(
            endpoints, sendTimeout: timeout, receiveTimeout: timeout, linger: .zero,
            curve: (keys, serverKey ?? server.publicKey))
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }
}
