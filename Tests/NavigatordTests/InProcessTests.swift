import Foundation
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine
@testable import navigatord

/// The HTTP side reaches the engine in process: no socket between them.
@Suite("HTTP reaches the engine in process")
struct InProcessTests {
    @Test("a navigatord whose sockets are inproc only serves its HTTP API and streams")
    func inprocOnly() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = {
            $0.engine.intentEndpoints = ["inproc://only-intents"]
            $0.engine.requestEndpoints = ["inproc://only-requests"]
            $0.engine.commandEndpoints = ["inproc://only-commands"]
            $0.streams.heartbeatSeconds = 1
        }
        try await withNavigatord(configure) { server, endpoints in
            #expect(endpoints.intents == ["inproc://only-intents"])
            let address = try #require(server.httpAddress)
            let stream = try SSEClient(address, "/v1/sessions/inproc-1/stream")
            defer { stream.close() }
            try await stream.wait("a snapshot") { $0.contains { $0.event == "snapshot" } }
            let answer = try await onThread {
                try api(
                    address, "POST", "/v1/intents?wait=true",
                    body: #"{"id":"p1","session":"inproc-1","path":[{"screen":"settings"}]}"#)
            }
            #expect(answer.status == 200 && answer.reply.resolved.batch.seq == 1, "\(answer.reply)")
            let fired = try await onThread {
                try api(
                    address, "POST", "/v1/intents",
                    body: #"{"id":"p2","session":"inproc-1","path":[{"screen":"search"}]}"#)
            }
            #expect(fired.status == 202)
            let events = try await stream.wait("both batches") { events in
                events.filter { $0.event == "batch" }.count == 2
            }
            #expect(
                events.filter { $0.event == "batch" }.compactMap(\.id).map { $0.split(separator: ":").last } == [
                    "1", "2",
                ])
            let snapshot = try await onThread { try api(address, "GET", "/v1/sessions/inproc-1") }
            #expect(snapshot.reply.snapshot.seq == 2)
        }
    }

    @Test("with streams open on its sessions, navigatord holds no TCP connection to its own sockets")
    func noConnectionToItself() async throws {
        try await withNavigatord { server, endpoints in
            let address = try #require(server.httpAddress)
            let streams = try (0..<20).map { try SSEClient(address, "/v1/sessions/self-\($0)/stream") }
            defer { for stream in streams { stream.close() } }
            for stream in streams { try await stream.wait("a snapshot") { !$0.isEmpty } }
            let ports = Set(
                (endpoints.intents + endpoints.requests + endpoints.commands).compactMap { endpoint in
                    endpoint.split(separator: ":").last.flatMap { UInt16($0) }
                })
            #expect(ports.count == 3)
            let connected = try Self.establishedRemotePorts().filter { ports.contains($0) }
            #expect(connected.isEmpty, "TCP connections to the engine's own ports: \(connected)")
        }
    }

    /// The remote ports of the established TCP connections on this machine (/proc/net/tcp{,6}).
    static func establishedRemotePorts() throws -> [UInt16] {
        var ports: [UInt16] = []
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // local_address rem_address st: "0100007F:1F90 0100007F:C350 01" (01: established).
                guard fields.count > 3, fields[3] == "01", let colon = fields[2].lastIndex(of: ":"),
                    let port = UInt16(fields[2][fields[2].index(after: colon)...], radix: 16)
                else { continue }
                ports.append(port)
            }
        }
        return ports
    }
}
