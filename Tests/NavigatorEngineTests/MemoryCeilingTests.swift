import Foundation
import NavigatorTestSupport
import Testing

@testable import NavigatorEngine

#if canImport(Glibc)
    import Glibc
#endif

/// libzmq keeps every frame of a message until the last one comes, with no bound on a message's
/// frames; a peer that never sends the last grows the service. navigatord's ceiling on its own
/// resident memory stops it then, saying why, its state flushed.
@Suite("The memory ceiling")
struct MemoryCeilingTests {
    @Test("a peer sending one message's frames without end stops navigatord at its ceiling, saying why")
    func endlessMessage() async throws {
        let directory = temporaryDirectory("memory-ceiling")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ceiling = 200  // MiB; a debug navigatord starts near 60
        let daemon = try Daemon(dataDirectory: directory, extra: ["--max-memory-megabytes", "\(ceiling)"])
        defer { daemon.reap() }
        let intents = try await daemon.endpoints().intents[0]
        #expect(daemon.log.contains("navigatord started"))
        // ZMTP 3.0 by hand (libzmq itself would keep an unfinished message on the sending side):
        // the NULL greeting, a PUSH's READY, then empty frames marked "more", 64 Ki at a time,
        // until the service is gone or 20 million frames (1.2 GB held on its side) went.
        let sent = try await onThread { () throws -> Int in
            let fd = try tcpConnect(String(intents.dropFirst("tcp://".count)))
            defer { close(fd) }
            func write(_ bytes: [UInt8]) -> Bool {
                var offset = 0
                while offset < bytes.count {
                    let count = bytes[offset...].withUnsafeBytes {
                        send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    guard count > 0 else { return false }
                    offset += count
                }
                return true
            }
            func read(_ count: Int) throws -> [UInt8] {
                var bytes = [UInt8](repeating: 0, count: count)
                var filled = 0
                while filled < count {
                    let got = bytes[filled...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    guard got > 0 else { throw TestFailure("navigatord closed the connection during the handshake") }
                    filled += got
                }
                return bytes
            }
            var greeting: [UInt8] = [0xFF] + [UInt8](repeating: 0, count: 8) + [0x7F, 3, 0]
            greeting += Array("NULL".utf8) + [UInt8](repeating: 0, count: 16) + [0] + [UInt8](repeating: 0, count: 31)
            guard write(greeting) else { throw TestFailure("could not send the greeting") }
            _ = try read(64)
            let body = [5] + Array("READY".utf8) + [11] + Array("Socket-Type".utf8) + [0, 0, 0, 4] + Array("PUSH".utf8)
            guard write([0x04, UInt8(body.count)] + body) else { throw TestFailure("could not send READY") }
            let header = try read(2)
            _ = try read(Int(header[1]))  // its READY
            let chunk: [UInt8] = Array(Array(repeating: [UInt8(0x01), 0], count: 65_536).joined())  // "more", size 0
            var frames = 0
            while frames < 20_000_000, write(chunk) { frames += 65_536 }
            return frames
        }
        let status = try await daemon.exitStatus(timeout: .seconds(60))
        #expect(status == 1, "\(daemon.log)")
        #expect(sent < 20_000_000, "navigatord took every frame without stopping:\n\(daemon.log)")
        #expect(daemon.log.contains("part=nav-memory"), "\(daemon.log)")
        #expect(daemon.log.contains("is above maxMemoryMegabytes (\(ceiling))"), "\(daemon.log)")
        #expect(daemon.log.contains("navigatord stopped because nav-memory failed"), "\(daemon.log)")
    }

    @Test("the setting: 0 is no ceiling, a number is MiB, unset is the memory there is less a margin")
    func setting() async throws {
        #expect(MemoryGuard(megabytes: 0).limit == nil)
        #expect(MemoryGuard(megabytes: 512).limit == 512 << 20)
        let memTotal = try String(contentsOfFile: "/proc/meminfo", encoding: .utf8).split(separator: "\n")
            .first { $0.hasPrefix("MemTotal:") }.flatMap { $0.split(separator: " ").dropFirst().first }
            .flatMap { UInt64($0) }.map { $0 * 1024 }
        let derived = try #require(MemoryGuard(megabytes: nil).limit)
        let total = try #require(memTotal)
        // Less a tenth, and at least 512 MiB, never below half (of the machine's, or of a
        // cgroup's limit when lower).
        #expect(derived <= total - max(total / 10, min(512 << 20, total / 2)))
        #expect(derived >= min(total, MemoryGuard.cgroupLimit() ?? total) / 2)
        // The gauges: the resident memory, and the ceiling in effect (the embedded default's).
        try await withService { server, _ in
            let resident = BackpressureServiceTests.gauge("navigator_resident_memory_bytes", in: server) ?? 0
            #expect(resident > Double(1 << 20))
            let ceiling = BackpressureServiceTests.gauge("navigator_memory_ceiling_bytes", in: server)
            // (Printed as a float: equal to a millionth.)
            let limit = Double(try #require(server.memory.limit))
            #expect(abs((ceiling ?? 0) - limit) < limit / 1e6, "\(String(describing: ceiling)) against \(limit)")
        }
        // Below the ceiling, the check passes.
        try MemoryGuard(megabytes: 1 << 20).check()
        #expect(throws: EngineError.self) { try MemoryGuard(megabytes: 1).check() }
    }
}
