import Foundation
import Locking
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `navload http`: acknowledged intents over navigatord's HTTP API (`POST /v1/intents?wait=true`,
/// keep-alive connections), open-loop at a target rate shared among the connections; each
/// intent's latency runs from its due time to its whole response (so a service that falls behind
/// shows it, as with `navload run`). Each connection has one request in flight at most.
public struct HTTPIntentLoad: Sendable {
    public var address: String
    public var rate: Double
    public var duration: Double
    public var warmup: Double
    public var connections: Int
    public var sessions: Int
    /// navigatord's process, to read its CPU over the measured part.
    public var servicePID: Int32?

    public init(
        address: String, rate: Double = 200, duration: Double = 10, warmup: Double = 2, connections: Int = 4,
        sessions: Int = 1000, servicePID: Int32? = nil
    ) {
        self.address = address
        self.rate = rate
        self.duration = duration
        self.warmup = warmup
        self.connections = connections
        self.sessions = sessions
        self.servicePID = servicePID
    }

    public struct Report: Sendable, Hashable, Codable {
        public var sent: Int
        /// Responses by HTTP status.
        public var statuses: [Int: Int]
        /// From each measured intent's due time to its whole response, in microseconds.
        public var latency: Latency.Summary
        public var measured: UInt64
        /// Requests sent more than a millisecond after they were due (every connection busy).
        public var late: Int
        /// navigatord's CPU over the measured part (1.0 = one core), when its pid was given.
        public var serviceCPU: Double?
    }

    private struct Tally {
        var latency = Latency()
        var statuses: [Int: Int] = [:]
        var sent = 0
        var late = 0
        var failure: String?
    }

    public func run() async throws -> Report {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...])
        else { throw HTTPLoadError("--http \(address) is not host:port") }
        let host = String(address[..<colon])
        let tally = Locked(Tally())
        let total = Int((duration + warmup) * rate)
        let start = wallClock() + 100_000_000
        let measureFrom = start + Int64(warmup * 1e9)
        let interval = 1e9 / rate
        let service = servicePID.map(ProcessStats.init(pid:))
        var threads: [DedicatedThread] = []
        for connection in 0..<connections {
            let fd = try Self.connect(host == "localhost" ? "127.0.0.1" : host, port)
            threads.append(
                DedicatedThread(name: "navload-http") {
                    defer { close(fd) }
                    var k = connection
                    var buffer = [UInt8](repeating: 0, count: 16384)
                    while k < total {
                        let due = start + Int64(Double(k) * interval)
                        let now = wallClock()
                        if due > now {
                            var pause = timespec(
                                tv_sec: Int((due - now) / 1_000_000_000), tv_nsec: Int((due - now) % 1_000_000_000))
                            nanosleep(&pause, nil)
                        }
                        let late = wallClock() - due > 1_000_000
                        let body = Self.intent(k, sessions: sessions)
                        let request = Array(
                            ("POST /v1/intents?wait=true HTTP/1.1\r\nHost: \(address)\r\nContent-Type: application/json\r\n"
                                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
                        guard Self.write(fd, request), let status = Self.readResponse(fd, &buffer) else {
                            tally.withLock {
                                $0.failure = $0.failure ?? "connection \(connection) was closed by navigatord"
                            }
                            return
                        }
                        let done = wallClock()
                        tally.withLock { tally in
                            tally.sent += 1
                            if late { tally.late += 1 }
                            tally.statuses[status, default: 0] += 1
                            if due >= measureFrom { tally.latency.record(nanoseconds: done - due) }
                        }
                        k += connections
                    }
                })
        }
        var cpuFrom: (seconds: Double, at: Int64)?
        while wallClock() < measureFrom { try await Task.sleep(for: .milliseconds(5)) }
        if let cpu = service?.cpuSeconds { cpuFrom = (cpu, wallClock()) }
        for thread in threads { _ = try? await DedicatedThread.run(name: "navload-join") { thread.join() } }
        let cpuTo = service?.cpuSeconds
        let finished = tally.withLock { $0 }
        if let failure = finished.failure { throw HTTPLoadError(failure) }
        return Report(
            sent: finished.sent, statuses: finished.statuses, latency: finished.latency.summary,
            measured: finished.latency.count, late: finished.late,
            serviceCPU: cpuFrom.flatMap { from in
                cpuTo.map { ($0 - from.seconds) / (Double(wallClock() - from.at) / 1e9) }
            })
    }

    /// The body of intent `k`: a chat of one of 50 conversations, or settings, for session
    /// `load-(k % sessions)`.
    static func intent(_ k: Int, sessions: Int) -> String {
        let target =
            k % 3 == 0
            ? #"{"screen":"settings"}"# : #"{"screen":"chat","info":{"conversationId":"\#(k % 50)"}}"#
        return #"{"id":"h\#(k)","session":"load-\#(k % sessions)","path":[\#(target)]}"#
    }

    static func connect(_ host: String, _ port: UInt16) throws -> Int32 {
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &target.sin_addr)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, connected == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            throw HTTPLoadError("cannot connect to \(host):\(port): \(reason)")
        }
        return fd
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + sent, bytes.count - sent) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// Reads one response (head, and a body of its Content-Length); its status, nil if the
    /// connection ended first.
    static func readResponse(_ fd: Int32, _ buffer: inout [UInt8]) -> Int? {
        var received: [UInt8] = []
        var needed: Int?
        var status = 0
        while true {
            if needed == nil, let end = headEnd(received) {
                let head = String(decoding: received[..<end], as: UTF8.self).lowercased()
                status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
                needed = end + 4 + length
            }
            if let needed, received.count >= needed { return status }
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            received += buffer[0..<count]
        }
    }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// Why `navload http` could not run.
public struct HTTPLoadError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
