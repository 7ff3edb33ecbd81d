import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorTokens
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
            ("GET /v1/sessions/\(session)/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
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
        let health = try http(address, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
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

    /// Reads `read()` until `condition` holds or `timeout` passes, on the calling thread (a
    /// test's own thread, never the cooperative pool); returns the last value read.
    static func waitForBlocking<T>(timeout: Duration, _ read: () -> T, until condition: (T) -> Bool) throws -> T {
        let deadline = ContinuousClock.now + timeout
        while true {
            let value = read()
            if condition(value) || ContinuousClock.now >= deadline { return value }
            usleep(10_000)
        }
    }

    /// A token key file (mode 0600) in `setup`'s directory, for secure mode's bearer tokens.
    static func tokenKeyFile(_ setup: SecureSetup) throws -> String {
        let path = setup.directory.appendingPathComponent("token.key").path
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data("token-key-of-the-test-0123456789abcdef".utf8),
                attributes: [.posixPermissions: 0o600])
        else { throw TestFailure("cannot write \(path)") }
        return path
    }

    /// Writes `text` on a new connection and reads what comes back until the service closes it
    /// (or `patience` passes): the response, and whether the service closed the connection.
    static func exchange(_ address: String, _ text: String, patience: Int = 10) throws -> (String, closed: Bool) {
        let fd = try tcpConnect(address)
        defer { close(fd) }
        return exchange(on: fd, text, patience: patience)
    }

    static func exchange(on fd: Int32, _ text: String, patience: Int = 10) -> (String, closed: Bool) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)  // ``flood(_:_:patience:)`` set it
        var timeout = timeval(tv_sec: patience, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes = Array(text.utf8)
        if !bytes.isEmpty { _ = write(fd, &bytes, bytes.count) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received += buffer[0..<count]
        }
    }

    static let quickDeadlines: @Sendable (inout NavigatordConfiguration) -> Void = {
        configure(&$0)
        $0.httpFirstRequestTimeout = .seconds(1)
        $0.httpRequestTimeout = .seconds(2)
    }

    @Test("a connection that sends nothing, or half a request (head or body), is closed by the deadlines")
    func slowClients() async throws {
        try await withNavigatord(Self.quickDeadlines) { server, _ in
            let address = try #require(server.httpAddress)
            // Patience well beyond the deadlines (1 s, 2 s): a loaded machine may be late, but a
            // connection that is never closed still fails.
            try await onThread {
                let silent = try Self.exchange(address, "", patience: 30)
                #expect(silent.closed && silent.0.isEmpty, "a silent connection: \(silent)")
                let halfHead = try Self.exchange(address, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", patience: 30)
                #expect(halfHead.closed && halfHead.0.isEmpty, "half a head: \(halfHead)")
                let halfBody = try Self.exchange(
                    address,
                    "POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":",
                    patience: 30)
                #expect(halfBody.closed, "half a body: \(halfBody)")
                // Idle after a response: closed after the request deadline, not held.
                let fd = try tcpConnect(address)
                defer { close(fd) }
                let first = Self.exchange(on: fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", patience: 30)
                #expect(first.0.hasPrefix("HTTP/1.1 200 OK") && first.closed, "idle after a response: \(first)")
                try Self.stillServes(address)
            }
        }
    }

    @Test(
        "malformed framing (Content-Length with Transfer-Encoding, two lengths, a negative one) is answered 400 and closed"
    )
    func malformedFraming() async throws {
        try await withNavigatord(Self.configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                let body = #"{"id":"f1","session":"s","path":[{"screen":"settings"}]}"#
                let heads = [
                    "Content-Length: \(body.utf8.count)\r\nTransfer-Encoding: chunked\r\n",
                    "Content-Length: \(body.utf8.count)\r\nContent-Length: \(body.utf8.count + 1)\r\n",
                    "Content-Length: -1\r\n",
                    "Content-Length: 12abc\r\n",
                    "X-Padding: \(String(repeating: "a", count: 100_000))\r\nContent-Length: \(body.utf8.count)\r\n",
                ]
                for head in heads {
                    let (answer, closed) = try Self.exchange(
                        address,
                        "POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\(head)\r\n\(body)"
                    )
                    #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request"), "\(head): \(answer)")
                    #expect(answer.contains("not valid HTTP/1.1"), "\(head): \(answer)")
                    #expect(closed, "\(head): the connection stayed open")
                }
                try Self.stillServes(address)
            }
        }
    }

    @Test(
        "connections beyond maxConnections are answered 503 at once; ZeroMQ is served meanwhile, and HTTP once they go")
    func connectionCap() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.maxHTTPConnections = 100
            // Held for the whole test: on a loaded machine the event loops may take longer than
            // the default 10 s to accept all 101, and the first ones must not be closed meanwhile
            // (once "68 open" after 10 s, none turned away).
            $0.httpFirstRequestTimeout = .seconds(300)
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            // 101 connections that send nothing: one is over the cap (which one depends on the
            // event loops) and is answered at once; the others are held.
            let limit = try #require(server.http).connections
            let held = try await onThread { try (0...100).map { _ in try tcpConnect(address) } }
            defer { for fd in held { close(fd) } }
            _ = try await waitFor(
                "no connection was turned away", timeout: .seconds(120), { limit.turnedAway }, until: { $0 == 1 },
                details: { "\(limit.count) open" })
            #expect(limit.count == 100)
            // ZeroMQ is served meanwhile: the cap keeps its file descriptors free.
            let reply = try await onThread {
                try Client(endpoints).request(.intent(wireIntent("zmq-1", [ScreenContext("settings")], session: "s")))
            }
            #expect(reply.rejected.code == .unspecified, "\(reply)")
            // What each has received, without waiting for the held ones: the refused one gets its
            // whole answer (looked at until it came).
            let answers = try await waitFor(
                "no connection was answered", timeout: .seconds(10),
                {
                    held.map { fd in
                        var buffer = [UInt8](repeating: 0, count: 4096)
                        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT | MSG_PEEK))
                        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
                    }
                }, until: { $0.contains { $0.hasSuffix("\n") } }, details: { "" })
            let refused = answers.filter { !$0.isEmpty }
            #expect(refused.count == 1, "\(refused)")
            #expect(refused.first?.hasPrefix("HTTP/1.1 503 Service Unavailable") == true, "\(refused)")
            #expect(refused.first?.contains("maxConnections") == true, "\(refused)")
            for fd in held { shutdown(fd, Int32(SHUT_RDWR)) }
            _ = try await waitFor(
                "the closed connections stayed counted", timeout: .seconds(10), { limit.count }, until: { $0 == 0 },
                details: { "" })
            try await onThread { try Self.stillServes(address) }
            let metrics = try await onThread { try http(address, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }
            #expect(metrics.body.contains("navigator_http_connections_max 100"))
        }
    }

    /// Writes `request` on a new connection and reads until the service shuts its side (EOF) or
    /// 10 s pass: what it answered, and whether it shut its side. The connection stays open on
    /// this side (closed by the caller).
    static func untilShut(_ address: String, _ request: String) throws -> (fd: Int32, answer: String, shut: Bool) {
        let fd = try tcpConnect(address)
        var bytes = Array(request.utf8)
        _ = write(fd, &bytes, bytes.count)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count == 0 { return (fd, String(decoding: answer, as: UTF8.self), true) }
            guard count > 0 else { return (fd, String(decoding: answer, as: UTF8.self), false) }
            answer += buffer[..<count]
        }
    }

    @Test(
        "a request that is not keep-alive with another behind it, from a client that never closes: the connection still closes"
    )
    func requestBehindAClose() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let limit = try #require(server.http).connections
            // The second request is never answered (the first said close). A review read
            // Hummingbird as shutting only its output and then waiting for the client for ever (a
            // slot held: enough of them lock every client out); the connection closes, and this
            // keeps it so. Behind it, a stream request too.
            for second in ["GET /healthz", "GET /v1/sessions/held/stream"] {
                let (fd, answer, shut) = try await onThread {
                    try Self.untilShut(address, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                }
                defer { close(fd) }
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
                #expect(shut, "the service did not shut its side after answering a request that said close")
                var bytes = Array("\(second) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
                _ = write(fd, &bytes, bytes.count)
                _ = try await waitFor(
                    "the connection stayed open (behind \(second))", timeout: .seconds(10), { limit.count },
                    until: { $0 == 0 }, details: { "\(limit.count) open" })
            }
            // The same in one packet (the first answer is lost then: noted, not fixed here).
            let (fd, _, shut) = try await onThread {
                try Self.untilShut(
                    address,
                    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                        + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            }
            defer { close(fd) }
            #expect(shut)
            _ = try await waitFor(
                "the connection stayed open (one packet)", timeout: .seconds(10), { limit.count }, until: { $0 == 0 },
                details: { "\(limit.count) open" })
        }
    }

    @Test("a refused WebSocket upgrade is answered Connection: close, and closed (the decoder parses nothing after it)")
    func refusedUpgradeCloses() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let session = String(repeating: "a", count: 200)  // over 128 bytes: refused
            let (fd, answer, shut) = try await onThread {
                try Self.untilShut(
                    address,
                    "GET /v1/sessions/\(session)/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        + "Sec-WebSocket-Version: 13\r\n\r\n")
            }
            defer { close(fd) }
            #expect(answer.hasPrefix("HTTP/1.1 4"), "\(answer.prefix(300))")
            #expect(answer.lowercased().contains("connection: close"), "\(answer.prefix(300))")
            #expect(shut, "a refused upgrade was kept alive: \(answer.prefix(300))")
        }
    }

    @Test("maxConnections beyond the open-file limit is refused at start, saying the limit")
    func connectionCapBeyondLimit() async throws {
        let limit = FileLimit.raise()
        let configure: (inout NavigatordConfiguration) -> Void = { $0.maxHTTPConnections = limit }
        await #expect {
            try await withNavigatord(configure) { _, _ in }
        } throws: { error in
            "\(error)".contains("its open-file limit is \(limit)") && error is ConfigurationError
        }
        let capacity = FileLimit.connectionCapacity(of: limit)
        #expect(capacity > 0 && capacity < limit)
    }

    @Test("an intent over maxMessageBytes is refused 413 at once, acknowledged or not")
    func oversizeIntent() async throws {
        try await withNavigatord(Self.configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                let big = String(repeating: "a", count: 70_000)
                let body =
                    #"{"id":"big-1","session":"s","path":[{"screen":"chat","info":{"conversationId":"\#(big)"}}]}"#
                for path in ["/v1/intents?wait=true", "/v1/intents"] {
                    let answer = try api(address, "POST", path, body: body)
                    #expect(answer.status == 413, "\(path): \(answer.reply)")
                    #expect(answer.reply.rejected.code == .tooLarge, "\(path): \(answer.reply)")
                    // Refused by admission itself (it once waited for a timeout and got 503 UNAVAILABLE).
                }
                try Self.stillServes(address)
            }
        }
    }

    @Test(
        "without security a foreign Host (DNS rebinding) or Origin (another site's page) is refused 403, WebSocket upgrades included"
    )
    func foreignHostAndOrigin() async throws {
        try await withNavigatord(Self.configure) { server, _ in
            let address = try #require(server.httpAddress)
            let port = address.split(separator: ":").last!
            try await onThread {
                let intent = #"{"id":"o1","session":"s","path":[{"screen":"settings"}]}"#
                let post = { (headers: String) in
                    "POST /v1/intents HTTP/1.1\r\n\(headers)Content-Type: application/json\r\nContent-Length: \(intent.utf8.count)\r\n\r\n\(intent)"
                }
                let refused = [
                    post("Host: evil.example:\(port)\r\n"),
                    post("Host: 127.0.0.1:\(port)\r\nOrigin: http://evil.example\r\n"),
                    post("Host: 127.0.0.1:\(port)\r\nOrigin: null\r\n"),
                    "GET /v1/sessions/s/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                    "GET /v1/sessions/s HTTP/1.1\r\nHost: rebound.example\r\n\r\n",
                ]
                for request in refused {
                    let (answer, _) = try Self.exchange(address, request)
                    #expect(answer.hasPrefix("HTTP/1.1 403 Forbidden"), "\(request): \(answer)")
                    #expect(answer.contains("allowedHosts"), "\(answer)")
                }
                let allowed = [
                    post("Host: 127.0.0.1:\(port)\r\nOrigin: http://localhost:\(port)\r\nConnection: close\r\n"),
                    post("Host: localhost\r\nConnection: close\r\n"),
                    post("Host: [::1]:\(port)\r\nOrigin: http://[::1]:\(port)\r\nConnection: close\r\n"),
                ]
                for request in allowed {
                    let (answer, _) = try Self.exchange(address, request)
                    #expect(answer.hasPrefix("HTTP/1.1 202"), "\(request): \(answer)")
                }
            }
        }
    }

    @Test("secure mode: a token is checked before a body is read; 200 token-less uploads stay bounded")
    func bodiesWithoutTokens() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let keyFile = try Self.tokenKeyFile(setup)
        let configure: (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            setup.configure(&$0.engine)
            $0.tokenKeyFile = keyFile
            // Each connection is held until the test looks at it: on a loaded machine sending
            // the 200 takes longer than the default 30 s, and a connection closed meanwhile with
            // its body unread is reset, taking its 401 with it (once 140 of 200 after 20 s).
            $0.httpRequestTimeout = .seconds(300)
        }
        try await withNavigatord(configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                let before = Self.residentBytes
                let chunk = [UInt8](repeating: 0x20, count: 64 * 1024)
                var descriptors: [Int32] = []
                defer { for fd in descriptors { close(fd) } }
                for _ in 0..<200 {
                    let fd = try tcpConnect(address)
                    descriptors.append(fd)
                    var head = Array(
                        "POST /v1/intents HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
                            .utf8)
                    _ = write(fd, &head, head.count)
                    _ = Self.flood(fd, chunk, patience: .milliseconds(50))
                }
                // Each is answered 401 while its body is still owed (looked at without waiting
                // for the connections to end).
                let answered = try Self.waitForBlocking(timeout: .seconds(120)) {
                    descriptors.filter { fd in
                        var buffer = [UInt8](repeating: 0, count: 16)
                        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT | MSG_PEEK))
                        return count >= 12 && String(decoding: buffer[0..<12], as: UTF8.self) == "HTTP/1.1 401"
                    }.count
                } until: {
                    $0 == descriptors.count
                }
                #expect(
                    answered == descriptors.count, "\(answered) of \(descriptors.count) token-less uploads answered 401"
                )
                let growth = Self.residentBytes - before
                #expect(growth < 48 << 20, "resident memory grew by \(growth >> 20) MiB for 200 token-less uploads")
                let health = try http(address, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                #expect(health.status == "HTTP/1.1 200 OK")
            }
        }
    }

    @Test("the API and streams read access_token alike: named twice, refused")
    func accessTokenTwice() async throws {
        try await withNavigatord(Self.configure) { server, _ in
            let address = try #require(server.httpAddress)
            try await onThread {
                for path in [
                    "/v1/sessions/s?access_token=a&access_token=b",
                    "/v1/sessions/s/stream?access_token=a&access_token=b",
                ] {
                    let answer = try http(address, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    #expect(answer.status == "HTTP/1.1 400 Bad Request", "\(path): \(answer)")
                    #expect(answer.body.contains("access_token 2 times"), "\(path): \(answer)")
                }
            }
        }
    }

    @Test(
        "streams opened and closed on 2,000 sessions, a quarter of them again: every follow ends, and another stream keeps its batches"
    )
    func streamChurn() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.streams.historySeconds = 1
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let bystander = try SSEClient(address, "/v1/sessions/bystander/stream")
            defer { bystander.close() }
            _ = try await bystander.wait("a snapshot") { !$0.isEmpty }
            try await onThread {
                for round in [2_000, 500] {
                    var open: [Int32] = []
                    for k in 0..<round {
                        let fd = try tcpConnect(address)
                        var request = Array(
                            "GET /v1/sessions/churn-\(k)/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
                        _ = write(fd, &request, request.count)
                        open.append(fd)
                        if open.count == 200 {
                            for fd in open { close(fd) }
                            open = []
                        }
                    }
                    for fd in open { close(fd) }
                }
            }
            // Every churned session is forgotten once its history runs out.
            let hub = try #require(server.http).api.hub
            _ = try await waitFor(
                "the churned sessions stayed followed", timeout: .seconds(30),
                { (hub.streamedSessions, hub.connections, server.engine.follows.counts.local) },
                until: { $0 == (1, 1, 1) }, details: { "(streamed sessions, streams, engine follows)" })
            let reply = try await onThread {
                try Client(endpoints).request(
                    .intent(wireIntent("after-churn", [ScreenContext("settings")], session: "bystander")))
            }
            #expect(reply.rejected.code == .unspecified, "\(reply)")
            try await bystander.wait("the batch after the churn") { $0.contains { $0.event == "batch" } }
        }
    }

    @Test(
        "secure mode: a client removed from the access file (SIGHUP) loses its open streams at once, not at token expiry"
    )
    func streamsReauthorized() async throws {
        let setup = try SecureSetup()
        defer { setup.remove() }
        let keyFile = try Self.tokenKeyFile(setup)
        let keys = try await TokenKey.load(file: keyFile)
        let shell = try await keys.sign(
            AccessToken(client: "alice-phone", role: "shell", sessions: ["s1"], lifetime: 3600))
        let admin = try await keys.sign(AccessToken(client: "ops", role: "admin", sessions: [], lifetime: 3600))
        let configure: (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            setup.configure(&$0.engine)
            $0.tokenKeyFile = keyFile
        }
        try await withNavigatord(configure) { server, _ in
            let address = try #require(server.httpAddress)
            let stream = try SSEClient(address, "/v1/sessions/s1/stream?access_token=\(shell)")
            defer { stream.close() }
            let socket = try WebSocketClient(address, "/v1/sessions/s1/stream?access_token=\(shell)")
            defer { socket.close() }
            let kept = try SSEClient(address, "/v1/sessions/s1/stream?access_token=\(admin)")
            defer { kept.close() }
            try await stream.wait("a snapshot") { !$0.isEmpty }
            try await socket.wait("a snapshot") { !$0.isEmpty }
            try await kept.wait("a snapshot") { !$0.isEmpty }
            try setup.writeAccess(shell: false, producer: true)
            try server.engine.reloadAccessFile()
            let events = try await stream.wait("the closing event") { $0.contains { $0.event == "closed" } }
            #expect(events.last?.streamEvent?.closed.contains("not in the access file") == true, "\(events)")
            let messages = try await socket.wait("the closing event") { $0.contains { $0.hasPrefix(#"{"closed""#) } }
            #expect(messages.last?.contains("access file changed") == true, "\(messages)")
            _ = try await waitFor(
                "no close frame", timeout: .seconds(10), { socket.closeCode }, until: { $0 != nil }, details: { "" })
            #expect(socket.closeCode == 4003)
            // The admin's stream of the same session goes on.
            #expect(!kept.events.contains { $0.event == "closed" } && !kept.ended)
            let again = try await onThread {
                try http(
                    address, "GET /v1/sessions/s1/stream?access_token=\(shell) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            }
            #expect(again.status == "HTTP/1.1 401 Unauthorized", "\(again)")
        }
    }

    @Test("a stream whose client reads nothing is cut off once its connection stays full; memory stays bounded")
    func stalledReader() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.httpStalledReaderTimeout = .seconds(2)
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let hub = try #require(server.http).api.hub
            // A reader with a tiny receive buffer that never reads after the head.
            let fd = try await onThread { () throws -> Int32 in
                let fd = try tcpConnect(address, receiveBuffer: 4096)
                var request = Array("GET /v1/sessions/sleepy/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
                _ = write(fd, &request, request.count)
                return fd
            }
            defer { close(fd) }
            _ = try await waitFor(
                "the stream did not open", timeout: .seconds(10), { hub.connections }, until: { $0 == 1 },
                details: { "" })
            let before = Self.residentBytes
            // Batches of about a kilobyte each, in rounds until the connection is cut off: how much
            // the kernel buffers before the channel stops taking writes depends on the machine
            // (loopback send-buffer autotuning), so the test does not guess a count.
            let long = String(repeating: "x", count: 900)
            let sent = try await onThread { () throws -> Int in
                let client = try Client(endpoints, linger: .seconds(5))
                let deadline = ContinuousClock.now + .seconds(90)
                var k = 0
                while hub.connections > 0, ContinuousClock.now < deadline {
                    // Back and forth between a chat and the settings, so that the stack does not
                    // grow to its limit and every intent makes a batch.
                    for _ in 0..<2_000 {
                        let screen =
                            k % 2 == 0
                            ? ScreenContext("chat", ["conversationId": "\(k)-\(long)"]) : ScreenContext("settings")
                        try client.send(wireIntent("big-\(k)", [screen], session: "sleepy"), session: "sleepy")
                        k += 1
                    }
                    // Give the cut-off (2 s once the connection is full) its chance before sending more.
                    let round = ContinuousClock.now + .seconds(3)
                    while hub.connections > 0, ContinuousClock.now < round { Thread.sleep(forTimeInterval: 0.05) }
                }
                return k
            }
            print("stalled reader: cut off after \(sent) intents")
            #expect(hub.connections == 0, "the stalled stream was not cut off after \(sent) intents")
            let growth = Self.residentBytes - before
            #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB for one reader that reads nothing")
            try await onThread { try Self.stillServes(address) }
        }
    }

    /// Sends `prefix`, then spaces until the service stops taking them (at most 256 MiB): the
    /// service's memory growth meanwhile, what it answered, and whether it closed the connection.
    static func endlessSpaces(_ address: String, after prefix: String) throws -> (
        growth: Int, answer: String, closed: Bool
    ) {
        let fd = try tcpConnect(address)
        defer { close(fd) }
        let before = Self.residentBytes
        var head = Array(prefix.utf8)
        _ = write(fd, &head, head.count)
        let spaces = [UInt8](repeating: 0x20, count: 1 << 20)
        for _ in 0..<256 where Self.flood(fd, spaces) == spaces.count {}
        let growth = Self.residentBytes - before
        // The answer, read before the connection closes (it lingers, dropping the rest).
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var closed = false
        while answer.count < 4096 {
            let count = read(fd, &buffer, buffer.count)
            closed = count == 0 || (count < 0 && errno == ECONNRESET)
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        return (growth, String(decoding: answer, as: UTF8.self), closed)
    }

    @Test(
        "a header field or a chunked body's trailer of endless spaces after its colon is refused 400 at 80 KiB; memory stays bounded"
    )
    func endlessHeaderSpaces() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            try await onThread {
                // The decoder counts neither these spaces nor a field's bytes until it ends, and
                // kept them all (258 MiB of growth for 256 MiB sent, and no answer).
                // In a head: answered 400.
                let head = try Self.endlessSpaces(address, after: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A:")
                #expect(head.growth < 48 << 20, "resident memory grew by \(head.growth >> 20) MiB (a head)")
                #expect(head.answer.hasPrefix("HTTP/1.1 400"), "\(head.answer.prefix(300))")
                #expect(head.answer.contains("MALFORMED"), "\(head.answer.prefix(300))")
                // In a chunked body's trailers: the request's answer is owed by then (it went to
                // the API with its head), so the connection is closed without one.
                let trailer = try Self.endlessSpaces(
                    address,
                    after: "POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-A:")
                #expect(trailer.growth < 48 << 20, "resident memory grew by \(trailer.growth >> 20) MiB (trailers)")
                #expect(trailer.closed, "the connection was not closed: \(trailer.answer.prefix(300))")
                try Self.stillServes(address)
            }
        }
    }

    @Test("what an SSE client sends once its stream is open is dropped; its stream goes on")
    func bytesOnAnOpenStream() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let stream = try SSEClient(address, "/v1/sessions/talker/stream")
            defer { stream.close() }
            try await stream.wait("snapshot") { !$0.isEmpty }
            // Read as a request part once the decoder was gone, the first byte stopped the process.
            var bytes = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nand more".utf8)
            _ = write(stream.fd, &bytes, bytes.count)
            try await onThread {
                let answer = try api(
                    address, "POST", "/v1/intents?wait=true",
                    body: #"{"id":"t1","session":"talker","path":[{"screen":"settings"}]}"#)
                #expect(answer.status == 200, "\(answer.reply)")
            }
            // The stream, whose connection read the bytes before this batch went out, still serves.
            try await stream.wait("the batch") { events in events.contains { $0.streamEvent?.batch.seq == 1 } }
            try await onThread { try Self.stillServes(address) }
        }
    }

    @Test("a WebSocket message over four times maxMessageBytes in one frame is closed with 1009")
    func oversizeSingleFrame() async throws {
        let small: @Sendable (inout NavigatordConfiguration) -> Void = {
            $0.httpAddress = "127.0.0.1:0"
            $0.engine.maxMessageBytes = 256
        }
        try await withNavigatord(small) { server, endpoints in
            let address = try #require(server.httpAddress)
            let socket = try WebSocketClient(address, "/v1/sessions/ws-big/stream")
            defer { socket.close() }
            _ = try await socket.wait("snapshot") { !$0.isEmpty }
            // 2,000 bytes in one frame, against a limit of 1,024: it was read and answered.
            let request = Array(#"{"requestId":"big","snapshot":{}}"#.utf8)
            socket.send(opcode: 0x1, request + [UInt8](repeating: 0x20, count: 2_000 - request.count))
            _ = try await waitFor(
                "no close frame", timeout: .seconds(10), { socket.closeCode }, until: { $0 != nil },
                details: { "\(socket.messages)" })
            #expect(socket.closeCode == 1009)
        }
    }

    @Test("a client's close code is echoed only if an endpoint may send it (RFC 6455, 7.4); else 1002")
    func closeCodes() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            for (sent, expected): (UInt16, UInt16) in [
                (1000, 1000), (4000, 4000), (1005, 1002), (1006, 1002), (999, 1002),
            ] {
                let socket = try WebSocketClient(address, "/v1/sessions/ws-close/stream")
                defer { socket.close() }
                _ = try await socket.wait("snapshot") { !$0.isEmpty }
                socket.send(opcode: 0x8, [UInt8(sent >> 8), UInt8(sent & 0xFF)])
                _ = try await waitFor(
                    "no close frame", timeout: .seconds(10), { socket.closeCode }, until: { $0 != nil },
                    details: { "" })
                #expect(socket.closeCode == expected, "a close with \(sent) was answered \(socket.closeCode ?? 0)")
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
