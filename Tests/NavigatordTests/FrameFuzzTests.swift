import Foundation
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing
import ZeroMQ

@testable import NavigatorEngine
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

/// The frame fuzzer (issue 20): random and mutated messages on every socket of a real service
/// (intents PULL, requests ROUTER, commands XPUB), raw bytes on each TCP port (ZeroMQ's and the
/// HTTP one), peers that come and go. Every 2,000 messages, and at the end, a probe checks that the
/// service still answers and still resolves; at the end /healthz and /readyz must answer 200.
///   FRAME_FUZZ_MESSAGES (default 20,000), FRAME_FUZZ_SEED (default 20);
///   `scripts/fuzz-frames.sh` runs a long one.
@Suite("Frame fuzzer")
struct FrameFuzzTests {
    static let environment = ProcessInfo.processInfo.environment
    static let messages = environment["FRAME_FUZZ_MESSAGES"].flatMap(Int.init) ?? 20_000
    static let seed = environment["FRAME_FUZZ_SEED"].flatMap(UInt64.init) ?? 20

    @Test("random and mutated frames on every socket leave the service standing and serving")
    func fuzz() async throws {
        let configure: (inout NavigatordConfiguration) -> Void = {
            $0.httpAddress = "127.0.0.1:0"
            $0.engine.maxSessions = 5_000
        }
        try await withNavigatord(configure) { server, endpoints in
            let (messages, seed) = (Self.messages, Self.seed)
            let report = try await onThread { () throws -> FrameFuzzer.Report in
                let fuzzer = try FrameFuzzer(endpoints, http: server.httpAddress, seed: seed)
                defer { fuzzer.close() }
                return try fuzzer.run(messages)
            }
            print("frame fuzzer: seed \(seed): \(report)")
            #expect(report.sent == messages)
            #expect(report.probes == messages / FrameFuzzer.probeEvery + 1)
            let address = try #require(server.httpAddress)
            let (health, ready) = try await onThread {
                (try http(address, "GET /healthz HTTP/1.1\r\n\r\n"), try http(address, "GET /readyz HTTP/1.1\r\n\r\n"))
            }
            #expect(health.status == "HTTP/1.1 200 OK")
            #expect(ready.status == "HTTP/1.1 200 OK")
        }
    }
}

/// Owns its sockets; runs on one thread.
final class FrameFuzzer {
    static let probeEvery = 2_000
    static let sessions = ["f0", "f1", "f2", "f3"]

    struct Report: CustomStringConvertible {
        var sent = 0
        var byTarget: [String: Int] = [:]
        var replies = 0
        var probes = 0
        var rejections: UInt64 = 0
        var sessions: UInt64 = 0
        var description: String {
            let targets = byTarget.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "\(sent) messages (\(targets)); \(replies) replies read; \(probes) probes answered; "
                + "the service counted \(rejections) rejections and holds \(sessions) sessions"
        }
    }

    let endpoints: BoundEndpoints
    /// The HTTP server's address (raw bytes go there too).
    let http: String?
    let context: Context
    let probe: Client
    var random: FuzzRandom
    var push: Socket
    var dealer: Socket
    var xsub: Socket
    var report = Report()
    var counter = 0

    init(_ endpoints: BoundEndpoints, http: String?, seed: UInt64) throws {
        self.http = http
        self.endpoints = endpoints
        random = FuzzRandom(state: seed)
        context = try Context()
        probe = try Client(endpoints, sendTimeout: .seconds(10))
        push = try Self.open(context, .push, endpoints.intents[0])
        dealer = try Self.open(context, .dealer, endpoints.requests[0])
        xsub = try Self.open(context, .xsub, endpoints.commands[0])
    }

    /// A peer that fails the test rather than wait forever for a service that stopped reading.
    static func open(_ context: Context, _ type: SocketType, _ endpoint: String) throws -> Socket {
        let socket = try Socket(context, type: type)
        try socket.set(.sendTimeout, .seconds(10))
        try socket.connect(endpoint)
        return socket
    }

    func close() {
        for socket in [push, dealer, xsub] { socket.close() }
    }

    func run(_ messages: Int) throws -> Report {
        for index in 0..<messages {
            switch random.below(100) {
            case 0..<40: try intentMessage()
            case 40..<75: try requestMessage()
            case 75..<95: try subscriptionMessage()
            case 95..<98: try reconnect()
            default: try rawBytes()
            }
            report.sent += 1
            try drain()
            if (index + 1) % Self.probeEvery == 0 { try checkServing() }
        }
        try checkServing()
        let stats = try probe.request(.stats(.init())).stats
        report.rejections = stats.rejectionsByCode.values.reduce(0, +)
        report.sessions = stats.sessions
        return report
    }

    func count(_ target: String) { report.byTarget[target, default: 0] += 1 }

    // MARK: the sockets

    func intentMessage() throws {
        count("intents")
        let session = randomSession()
        let payload = mutated(try validIntent(session: random.chance(3) ? session : "").serializedBytes())
        try push.send(multipart: shaped([Array(session.utf8), payload]))
    }

    func requestMessage() throws {
        count("requests")
        let bytes = mutated(try validRequest().serializedBytes())
        try dealer.send(multipart: shaped([[], bytes]))
    }

    func subscriptionMessage() throws {
        count("commands")
        let topics = ["s/f0/", "s/f1/", "s/", "", "r/", "a/", "s/f2/", "r/f3/"]
        var topic = random.chance(4) ? random.bytes(random.below(300)) : Array(random.pick(topics).utf8)
        if random.chance(8) { topic = mutated(topic) }
        let message: [[UInt8]] =
            switch random.below(10) {
            case 0: [random.bytes(random.below(64))]  // not a subscription at all
            case 1: [[1] + topic, random.bytes(8)]  // a subscription with more frames after it
            case 2...4: [[0] + topic]
            default: [[1] + topic]
            }
        try xsub.send(multipart: message)
    }

    /// Closes one peer and connects a new one: the service sees disconnects mid-conversation.
    func reconnect() throws {
        count("reconnects")
        switch random.below(3) {
        case 0:
            push.close()
            push = try Self.open(context, .push, endpoints.intents[0])
        case 1:
            dealer.close()
            dealer = try Self.open(context, .dealer, endpoints.requests[0])
        default:
            xsub.close()
            xsub = try Self.open(context, .xsub, endpoints.commands[0])
        }
    }

    /// Bytes that are not ZMTP (or not HTTP) straight onto a TCP port, then a close.
    func rawBytes() throws {
        count("raw tcp")
        var addresses = [endpoints.intents[0], endpoints.requests[0], endpoints.commands[0]].map {
            String($0.dropFirst("tcp://".count))
        }
        if let http { addresses.append(http) }
        let greeting: [UInt8] = [0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0] + Array("NULL".utf8)
        let bytes: [UInt8] =
            switch random.below(4) {
            case 0: greeting + [UInt8](repeating: 0, count: 16) + random.bytes(random.below(2_000))
            case 1: Array("GET /\(String(repeating: "a", count: random.below(9_000))) HTTP/1.1\r\n".utf8)
            case 2: mutated(greeting)
            default: random.bytes(random.below(4_000))
            }
        try writeAndClose(random.pick(addresses), bytes)
    }

    /// Reads whatever came back, so no peer's queue fills.
    func drain() throws {
        while try dealer.tryReceiveMultipart() != nil { report.replies += 1 }
        while try xsub.tryReceiveMultipart() != nil {}
    }

    /// The service still answers a request and still resolves an intent into a batch. The
    /// probes go to one session created by the first of them (the fuzzing may fill the service up
    /// to maxSessions meanwhile, which refuses new sessions as it should), alternating between
    /// two tabs so that each one changes the tree.
    func checkServing() throws {
        report.probes += 1
        let target = report.probes % 2 == 0 ? ScreenContext("home") : ScreenContext("settings")
        let reply = try probe.request(.intent(wireIntent("p\(report.probes)", [target], session: "probe")))
        guard case .resolved(let resolved)? = reply.kind, resolved.batch.seq == UInt64(report.probes) else {
            throw TestFailure(
                "probe \(report.probes): expected a resolved intent with batch seq \(report.probes), got \(reply)")
        }
    }

    // MARK: what is sent

    func randomSession() -> String {
        switch random.below(10) {
        case 0: String(decoding: random.bytes(random.below(200)), as: UTF8.self)
        case 1: "junk-\(random.below(1_000_000))"
        default: random.pick(Self.sessions)
        }
    }

    func validIntent(session: String) -> Navigator_V1_Intent {
        counter += 1
        let paths: [[ScreenContext]] = [
            [ScreenContext("home")],
            [ScreenContext("chat", ["conversationId": "\(random.below(5))"])],
            [
                ScreenContext("chat", ["conversationId": "1"]),
                ScreenContext("thread", ["conversationId": "1", "threadId": "2"]),
            ],
            [ScreenContext("settings", ["section": random.pick(["account", "privacy", "nope"])])],
            [ScreenContext("editProfile")],
            [ScreenContext("payment", ["conversationId": "1", "amount": "5", "currency": "EUR"])],
            [ScreenContext("login")],
            [],
        ]
        var intent = wireIntent(
            "i\(counter)", random.pick(paths), url: random.chance(5) ? random.pick(["app://chat/7", "app://x"]) : "",
            session: session, priority: random.pick(Intent.Priority.allCases), ttl: UInt32(random.below(3) * 1_000))
        intent.waitForReady = random.chance(10)
        return intent
    }

    func validEvent(session: String) -> Navigator_V1_ClientEvent {
        let ids: [UInt64] = [0, 1, 2, 3, 5, 1 << 63, (1 << 63) + 1, UInt64.max, (1 << 63) - 1]
        let id = NodeID(rawValue: random.chance(4) ? random.next() : random.pick(ids))
        let events: [ClientEvent] = [
            .ready(), .ready(appVersion: AppVersion("2.1")), .suspended, .poppedTo(id),
            .dismissedTo(random.chance(2) ? nil : id),
            .tabSelected(random.pick(["home", "search", "chats", "profile", "nope"])),
            .pushed(
                Screen(id: .client(UInt64(random.below(40) + 1)), ScreenContext("chat", ["conversationId": "3"])),
                onto: random.pick([.tab("chats"), .root, .modal(id)])),
            .presented(
                Modal(
                    id: .client(UInt64(random.below(40) + 1)), style: .sheet,
                    stack: [Screen(id: .client(UInt64(random.below(40) + 41)), ScreenContext("login"))])),
            .ack(UInt64(random.below(50))),
            .conditions(["authenticated": random.chance(2)]),
            .sync(RouteMap.demo.initialTree()),
        ]
        return Navigator_V1_ClientEvent(
            random.pick(events), session: session, lastSeq: random.chance(2) ? 0 : UInt64(random.below(40)),
            epoch: random.chance(2) ? 0 : UInt64(random.below(3)))
    }

    func validRequest() -> Navigator_V1_Request {
        let session = randomSession()
        var request = Navigator_V1_Request()
        request.requestID = random.chance(20) ? "" : "q\(counter)"
        switch random.below(8) {
        case 0, 1: request.kind = .intent(validIntent(session: session))
        case 2, 3, 4: request.kind = .clientEvent(validEvent(session: session))
        case 5: request.kind = .snapshot(.with { $0.session = session })
        case 6: request.kind = .explain(validIntent(session: session))
        default: request.kind = random.chance(2) ? .stats(.init()) : .routes(.init())
        }
        return request
    }

    /// Usually a little damage, sometimes none, sometimes a lot.
    func mutated(_ bytes: [UInt8]) -> [UInt8] {
        guard !random.chance(3) else { return bytes }
        var bytes = bytes
        for _ in 0..<(1 + random.below(4)) {
            let index = bytes.isEmpty ? 0 : random.below(bytes.count)
            switch random.below(7) {
            case 0 where !bytes.isEmpty: bytes[index] ^= 1 << UInt8(random.below(8))
            case 1 where !bytes.isEmpty: bytes[index] = UInt8(random.below(256))
            case 2: bytes = Array(bytes.prefix(index))
            case 3: bytes.insert(contentsOf: random.bytes(1 + random.below(16)), at: index)
            case 4: bytes.removeSubrange(index..<min(bytes.count, index + 1 + random.below(8)))
            case 5: bytes += bytes[index...]
            default: bytes += random.bytes(1 + random.below(32))
            }
        }
        return bytes
    }

    /// The right frames most of the time; otherwise too few, too many, far too many or too big.
    func shaped(_ frames: [[UInt8]]) -> [[UInt8]] {
        switch random.below(25) {
        case 0: return [frames[random.below(frames.count)]]
        case 1: return frames + (0..<(1 + random.below(4))).map { _ in random.bytes(random.below(20)) }
        case 2: return frames + [[UInt8]](repeating: [], count: 1_000 + random.below(4_000))
        case 3: return frames.dropLast() + [random.bytes(60_000 + random.below(10_000))]
        case 4: return [[]] + frames
        default: return frames
        }
    }
}

/// Connects to `address` (host:port), writes `bytes`, closes.
func writeAndClose(_ address: String, _ bytes: [UInt8]) throws {
    let fd = try tcpConnect(address)
    defer { Glibc.close(fd) }
    var bytes = bytes
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = write(fd, &bytes, bytes.count)
}
