import Logging
import NavigatorEngine
import OTel
import ServiceLifecycle
import Tracing

/// The traces of intents, exported with OpenTelemetry over OTLP/HTTP (docs/operations.md,
/// "Traces"). Off by default; on when the standard variables say where to send them:
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_TRACES_EXPORTER=otlp`, to the default `http://localhost:4318`). The other OTEL_
/// variables (sampler, batching, headers, service name, resource attributes, TLS) apply as the
/// OpenTelemetry specification says; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
/// turn traces off. Only traces: metrics stay on /metrics, logs on stderr.
struct Telemetry {
    let tracer: any Tracer
    let service: any Service
    /// What the start-up log says: where spans go and how intents are sampled.
    let summary: String

    /// The traces the environment asks for, or nil; throws for a setting navigatord cannot
    /// honour (another exporter, the gRPC protocol), naming what is expected.
    static func fromEnvironment(_ environment: [String: String], logger: Logger) throws -> Telemetry? {
        func value(_ key: String) -> String? {
            environment[key].flatMap { $0.allSatisfy(\.isWhitespace) ? nil : $0 }
        }
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" { return nil }
        let exporter = value("OTEL_TRACES_EXPORTER")?.lowercased()
        switch exporter {
        case nil, "otlp": break
        case "none": return nil
        case let other?:
            throw ConfigurationError(
                "OTEL_TRACES_EXPORTER is \(other); navigatord exports traces over OTLP only: expected otlp or none")
        }
        let endpoint = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? value("OTEL_EXPORTER_OTLP_ENDPOINT")
        guard endpoint != nil || exporter == "otlp" else { return nil }
        for key in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let given = value(key), !["http/protobuf", "http/json"].contains(given) {
                throw ConfigurationError(
                    "\(key) is \(given); navigatord exports over OTLP/HTTP: expected http/protobuf (the default) or http/json"
                )
            }
        }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "navigatord"
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.diagnosticLogger = .custom(logger)
        let backend: (factory: any Tracer, service: any Service)
        do {
            let made = try OTel.makeTracingBackend(configuration: configuration)
            backend = (made.factory, made.service)
        } catch {
            throw ConfigurationError("the OTEL_ settings of traces cannot be used: \(error)")
        }
        var base = value("OTEL_EXPORTER_OTLP_ENDPOINT") ?? "http://localhost:4318"
        if base.hasSuffix("/") { base.removeLast() }
        let target = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? "\(base)/v1/traces"
        let sampler = value("OTEL_TRACES_SAMPLER") ?? "parentbased_always_on"
        let argument = value("OTEL_TRACES_SAMPLER_ARG").map { " \($0)" } ?? ""
        return Telemetry(
            tracer: backend.factory, service: backend.service,
            summary: "otlp \(target), sampler \(sampler)\(argument)")
    }
}
