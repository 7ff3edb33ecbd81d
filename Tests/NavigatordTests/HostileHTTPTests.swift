import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import Testing

@testable import NavigatorEngine
@testable import NavigatorHTTP
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

/// What the internet may send navigatord's HTTP side: each case bounded in memory, and another
/// client still served meanwhile and after.
@Suite("HTTP: hostile clients")
struct HostileHTTPTests {
    static let configure: @Sendable (inout NavigatordConfiguration) -> Void = { $0.httpAddress = "127.0.0.1:0" }

    /// This process's resident memory (the service runs in it).
    static var residentBytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0) * 1024
        }
        return 0
    }

    /// A WebSocket stream opened on a raw socket that will never be read again after the 101.
    static func upgraded(_ address: String, _ session: String) throws -> Int32 {
        let fd = try tcpConnect(address)
        var request = Array(
            ("GET /v1/sessions/\(session)/stream HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                + "Sec-WebSocket-Version: 13\r\n\r\n").utf8)
        _ = write(fd, &request, request.count)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]), read(fd, &byte, 1) == 1 { head.append(byte) }
        guard String(decoding: head, as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            close(fd)
            throw TestFailure("no upgrade: \(String(decoding: head, as: UTF8.self))")
        }
        return fd
    }

    /// Masked client frames, `count` of them, as one block of bytes.
    static func frames(opcode: UInt8, payload: [UInt8], count: Int) -> [UInt8] {
        let mask: [UInt8] = [1, 2, 3, 4]
        let one =
            [0x80 | opcode, 0x80 | UInt8(payload.count)] + mask
            + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(one.count * count)
        for _ in 0..<count { bytes += one }
        return bytes
    }

    /// Writes `bytes` without blocking for longer than `patience` at a time (the service may stop
    /// reading, as it should); returns how many were taken.
    static func flood(_ fd: Int32, _ bytes: [UInt8], patience: Duration = .seconds(2)) -> Int {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var sent = 0
        var stalledSince: ContinuousClock.Instant?
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + sent, min(65536, bytes.count - sent)) }
            if count > 0 {
                sent += count
                stalledSince = nil
                continue
            }
            if count < 0, errno != EAGAIN, errno != EINTR { break }  // closed by the service
            let now = ContinuousClock.now
            if let since = stalledSince, now - since > patience { break }
            stalledSince = stalledSince ?? now
            usleep(5_000)
        }
        return sent
    }

    /// `/healthz` and an acknowledged intent answer while the attack's connection is open.
    static func stillServes(_ address: String) throws {
        let health = try http(address, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(health.status == "HTTP/1.1 200 OK")
        let answer = try api(
            address, "POST", "/v1/intents?wait=true",
            body: #"{"id":"after-\#(UUID().uuidString)","session":"bystander","path":[{"screen":"settings"}]}"#)
        #expect(answer.status == 200, "\(answer.reply)")
    }

    @Test("a WebSocket client that sends two million pings and never reads the pongs: memory stays bounded")
    func pingFlood() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                let fd = try Self.upgraded(address, "victim")
                defer { close(fd) }
                let before = Self.residentBytes
                let pings = Self.frames(opcode: 0x9, payload: Array(repeating: 0x61, count: 125), count: 20_000)
                var sent = 0
                for _ in 0..<100 {
                    let taken = Self.flood(fd, pings)
                    sent += taken
                    if taken < pings.count { break }  // the service stopped reading: TCP holds the rest
                }
                let growth = Self.residentBytes - before
                // Unbounded, it held a pong per ping: 2,000,000 × ~140 bytes and more (1.1 GB).
                #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB after \(sent) bytes of pings")
                #expect(sent < 2_000_000 * 131, "the service read every ping of a client that reads nothing")
                try Self.stillServes(address)
            }
        }
    }

    @Test("a WebSocket client that floods requests is closed (1008); memory stays bounded and others are served")
    func requestFlood() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                let fd = try Self.upgraded(address, "victim")
                defer { close(fd) }
                let before = Self.residentBytes
                let request = Array(#"{"requestId":"x","snapshot":{}}"#.utf8)
                let messages = Self.frames(opcode: 0x1, payload: request, count: 120_000)
                let sent = Self.flood(fd, messages)
                let growth = Self.residentBytes - before
                #expect(
                    growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB after \(sent) bytes of requests")
                // Closed with 1008 (policy violation): the read ends after the close frame.
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = read(fd, &buffer, buffer.count)
                    guard count > 0 else { break }
                    received += buffer[0..<count]
                }
                let closeFrame = Self.closeCode(in: received)
                #expect(closeFrame == 1008, "close code \(String(describing: closeFrame))")
                try Self.stillServes(address)
            }
        }
    }

    /// The code of the first close frame among unmasked server frames.
    static func closeCode(in bytes: [UInt8]) -> UInt16? {
        var offset = 0
        while offset + 2 <= bytes.count {
            let opcode = bytes[offset] & 0x0F
            var length = Int(bytes[offset + 1] & 0x7F)
            var start = offset + 2
            if length == 126 {
                guard start + 2 <= bytes.count else { return nil }
                length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
                start += 2
            } else if length == 127 {
                guard start + 8 <= bytes.count else { return nil }
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[start + $1]) }
                start += 8
            }
            guard start + length <= bytes.count else { return nil }
            if opcode == 0x8, length >= 2 { return UInt16(bytes[start]) << 8 | UInt16(bytes[start + 1]) }
            offset = start + length
        }
        return nil
    }
}
