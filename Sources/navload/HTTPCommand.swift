import ArgumentParser
import Foundation
import NavigatorLoad

/// `navload http`: the latency of acknowledged intents over navigatord's HTTP API.
struct HTTPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Acknowledged intents over navigatord's HTTP API at a target rate; reports their latency.",
        discussion: """
            Sends POST /v1/intents?wait=true on --connections keep-alive connections, open-loop: \
            intent k is due at k / rate seconds, and each connection has one request in flight \
            at most. Latency runs from an intent's due time to its whole response (a service \
            that falls behind shows it); the warm-up is not measured. Sessions load-0 … load-N, \
            targets a chat of one of 50 conversations or settings.

            Example: navload http --http 127.0.0.1:7480 --rate 200 --duration 10
            """)

    @Option(help: "navigatord's HTTP address (host:port).")
    var http = "127.0.0.1:7480"

    @Option(help: "Intents per second, over all connections.")
    var rate: Double = 200

    @Option(help: "Seconds measured, after the warm-up.")
    var duration: Double = 10

    @Option(help: "Seconds sent before measuring.")
    var warmup: Double = 2

    @Option(help: "Keep-alive connections (each has one request in flight at most).")
    var connections = 4

    @Option(help: "Sessions the intents are spread over.")
    var sessions = 1000

    @Option(help: "navigatord's pid, to report its CPU over the measured part.")
    var servicePID: Int32?

    func validate() throws {
        guard rate > 0, rate <= 1_000_000 else {
            throw ValidationError("--rate \(rate) is out of range; expected 0 < rate <= 1000000")
        }
        guard duration > 0, duration <= 86_400, warmup >= 0, warmup <= 3600 else {
            throw ValidationError(
                "--duration or --warmup out of range; expected 0 < duration <= 86400, 0 <= warmup <= 3600")
        }
        guard (1...1000).contains(connections) else {
            throw ValidationError("--connections \(connections) is out of range; expected 1 to 1000")
        }
        guard (1...10_000_000).contains(sessions) else {
            throw ValidationError("--sessions \(sessions) is out of range; expected 1 to 10,000,000")
        }
    }

    func run() async throws {
        let load = HTTPIntentLoad(
            address: http, rate: rate, duration: duration, warmup: warmup, connections: connections,
            sessions: sessions, servicePID: servicePID)
        let report: HTTPIntentLoad.Report
        do {
            report = try await load.run()
        } catch {
            FileHandle.standardError.write(Data("navload http: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let statuses = report.statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
            separator: ", ")
        print("http: \(report.sent) acknowledged intents at \(rate)/s on \(connections) connections (\(statuses))")
        let latency = report.latency
        print(
            "latency from due time (µs, \(report.measured) measured): p50 \(latency.p50), p90 \(latency.p90), p99 \(latency.p99), p99.9 \(latency.p999), max \(latency.max)"
        )
        print("late sends: \(report.late)")
        if let cpu = report.serviceCPU { print("navigatord CPU: \(String(format: "%.3f", cpu)) cores") }
    }
}
