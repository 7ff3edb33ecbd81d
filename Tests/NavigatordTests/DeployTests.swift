import Foundation
import Logging
import NavigatorHTTP
import NavigatorTestSupport
import Testing
import Yams

@testable import NavigatorEngine
@testable import navigatord

/// The deployment files are part of the product: what they give navigatord must load, be secure
/// and fit together (ports, probes, key files, grace period), checked from the files themselves.
@Suite("Deployment files")
struct DeployTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy")

    /// The `ENV` of the Containerfile's final stage (`KEY=VALUE` pairs, lines continued with `\`).
    static func containerEnvironment() throws -> [String: String] {
        let text = try String(contentsOf: deploy.appendingPathComponent("Containerfile"), encoding: .utf8)
        let stages = text.components(separatedBy: "\nFROM ")
        let lines = stages.last!.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n")
        var environment: [String: String] = [:]
        for line in lines where line.hasPrefix("ENV ") {
            for pair in line.dropFirst(4).split(separator: " ") where pair.contains("=") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                environment[String(parts[0])] = String(parts[1])
            }
        }
        return environment
    }

    /// The documents of the Kubernetes manifest, by kind and name.
    static func manifest() throws -> [String: [String: Any]] {
        let text = try String(
            contentsOf: deploy.appendingPathComponent("kubernetes/navigatord.yaml"), encoding: .utf8)
        var documents: [String: [String: Any]] = [:]
        for document in try Yams.load_all(yaml: text) {
            let object = try #require(document as? [String: Any])
            let kind = try #require(object["kind"] as? String)
            let name = try #require((object["metadata"] as? [String: Any])?["name"] as? String)
            documents["\(kind)/\(name)"] = object
        }
        return documents
    }

    static func port(of endpoint: String) -> Int? {
        endpoint.split(separator: ":").last.flatMap { Int($0) }
    }

    @Test(
        "the Kubernetes manifest: with the Containerfile's environment it gives navigatord a secure, forwarding configuration on PostgreSQL; its ports, probes, key files and grace period fit"
    )
    func kubernetes() async throws {
        let documents = try Self.manifest()
        let deployment = try #require(documents["Deployment/navigatord"])
        let spec = try #require(deployment["spec"] as? [String: Any])
        #expect((spec["replicas"] as? Int ?? 0) >= 3)
        let pod = try #require((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
        let containers = try #require(pod["containers"] as? [[String: Any]])
        let container = try #require(containers.first { $0["name"] as? String == "navigatord" })

        // The environment navigatord sees: the image's, then the manifest's; values from the
        // API server stand in for what Kubernetes fills in.
        var environment = try Self.containerEnvironment()
        let secret = try #require((documents["Secret/navigatord"]?["stringData"]) as? [String: Any])
        for entry in try #require(container["env"] as? [[String: Any]]) {
            let name = try #require(entry["name"] as? String)
            if let value = entry["value"] as? String {
                environment[name] = value
            } else if let from = entry["valueFrom"] as? [String: Any] {
                if let key = (from["secretKeyRef"] as? [String: Any])?["key"] as? String {
                    #expect(secret[key] != nil, "\(name) reads the Secret's \(key), which the Secret does not have")
                    environment[name] = "postgresql://navigator:secret@postgres.db.svc:5432/navigator?sslmode=require"
                } else if let field = (from["fieldRef"] as? [String: Any])?["fieldPath"] as? String {
                    environment[name] = ["metadata.name": "navigatord-7c9f-x2v4q", "status.podIP": "10.42.0.17"][field]
                    #expect(environment[name] != nil, "\(name) reads \(field)")
                }
            }
        }
        let config = try ConfigurationLoader.load(
            file: Self.deploy.appendingPathComponent("navigatord.example.yaml").path, environment: environment,
            flags: [:])
        #expect(config.engine.isSecure, "the manifest runs navigatord without security")
        guard case .postgresql = config.engine.store else {
            Issue.record("the manifest's store is \(config.engine.store), expected PostgreSQL")
            return
        }
        #expect(config.engine.instanceID == "navigatord-7c9f-x2v4q")
        let traces = try Telemetry.fromEnvironment(environment, logger: Logger(label: "deploy-test"))
        #expect(
            traces?.summary
                == "otlp http://otel-collector.observability.svc:4318/v1/traces, sampler parentbased_traceidratio 0.01")
        #expect(config.engine.clusterEndpoint.hasPrefix("tcp://0.0.0.0:"), "pods could not forward to each other")
        #expect(config.engine.advertiseHost == "10.42.0.17")
        #expect(
            Engine.advertised(config.engine.requestEndpoints[0], host: config.engine.advertiseHost)
                .contains("10.42.0.17"))

        // Every port navigatord binds is a container port; every Service port targets one.
        let ports = try #require(container["ports"] as? [[String: Any]])
        var named: [String: Int] = [:]
        for port in ports { named[try #require(port["name"] as? String)] = try #require(port["containerPort"] as? Int) }
        let bound =
            (config.engine.intentEndpoints + config.engine.requestEndpoints + config.engine.commandEndpoints
            + [config.engine.clusterEndpoint, "tcp://" + config.httpAddress]).compactMap(Self.port)
        for port in bound { #expect(named.values.contains(port), "navigatord binds \(port), not a container port") }
        for (key, service) in documents where key.hasPrefix("Service/") {
            let servicePorts = try #require((service["spec"] as? [String: Any])?["ports"] as? [[String: Any]])
            for port in servicePorts {
                let target = try #require(port["targetPort"] as? String)
                #expect(named[target] != nil, "\(key) targets \(target), which the container does not name")
            }
        }

        // The probes are on the HTTP port and on paths navigatord's HTTP server answers.
        for probe in ["readinessProbe", "livenessProbe"] {
            let get = try #require((container[probe] as? [String: Any])?["httpGet"] as? [String: Any])
            #expect(get["port"] as? String == "http")
            let path = try #require(get["path"] as? String)
            #expect(["/readyz", "/healthz"].contains(path), "\(probe) asks \(path)")
        }
        #expect(
            (container["readinessProbe"] as? [String: Any])?["httpGet"].flatMap { $0 as? [String: Any] }?["path"]
                as? String == "/readyz")

        // The key files are where the key volume is mounted, and the init container writes the
        // secret key 0600 for the user navigatord runs as (navigatord refuses it otherwise).
        let mounts = try #require(container["volumeMounts"] as? [[String: Any]])
        for file in [config.engine.secretKeyFile, config.engine.accessFile].compactMap({ $0 }) {
            #expect(
                mounts.contains { file.hasPrefix(($0["mountPath"] as? String ?? "?") + "/") },
                "\(file) is not on a mounted volume")
        }
        let user = try #require((pod["securityContext"] as? [String: Any])?["runAsUser"] as? Int)
        let initScript = try #require(
            (pod["initContainers"] as? [[String: Any]])?.compactMap {
                ($0["command"] as? [String])?.joined(separator: " ")
            }
            .joined(separator: " "))
        let keyName = URL(fileURLWithPath: try #require(config.engine.secretKeyFile)).lastPathComponent
        #expect(initScript.contains("install -m 0600 -o \(user) -g \(user) /secret/\(keyName)"), "\(initScript)")

        // SIGTERM's drain, final write and hand-over fit in the grace period.
        let grace = try #require(pod["terminationGracePeriodSeconds"] as? Int)
        #expect(grace > config.engine.shutdownTimeoutSeconds + config.engine.leaseSeconds)
    }

    @Test("the probes the manifest names answer on a running navigatord")
    func probesAnswer() async throws {
        try await withNavigatord { server, _ in
            let address = try #require(server.httpAddress)
            for path in ["/readyz", "/healthz"] {
                let response = try await onThread {
                    try http(address, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                }
                #expect(response.status == "HTTP/1.1 200 OK", "\(path): \(response)")
            }
        }
    }
}
