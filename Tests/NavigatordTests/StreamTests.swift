import Foundation
import Locking
import NavigatorClient
import NavigatorCore
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Synchronization
import Testing

@testable import NavigatorEngine
@testable import NavigatorHTTP
@testable import navigatord

#if canImport(Glibc)
    import Glibc
#endif

@Suite("HTTP session streams (SSE)")
struct StreamTests {
    @Sendable static func configure(_ configuration: inout NavigatordConfiguration) {
        configuration.httpAddress = "127.0.0.1:0"
        configuration.streams.heartbeatSeconds = 1
    }

    @Test("a snapshot first, then each batch with its epoch:seq id and the session's rejections; heartbeats when idle")
    func follows() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let stream = try SSEClient(address, "/v1/sessions/sse-1/stream")
            defer { stream.close() }
            let first = try await stream.wait("a snapshot") { !$0.isEmpty }
            #expect(first[0].event == "snapshot")
            let snapshot = try #require(first[0].streamEvent?.snapshot)
            #expect(snapshot.session == "sse-1" && snapshot.seq == 0)
            #expect(first[0].id == "\(snapshot.epoch):0")
            #expect(stream.head.contains("Content-Type: text/event-stream"))
            #expect(stream.head.contains("Cache-Control: no-cache"))
            #expect(stream.head.contains("X-Accel-Buffering: no"))

            // An intent over ZeroMQ, then a bad one.
            try await onThread {
                let client = try Client(endpoints)
                _ = try client.request(.intent(wireIntent("i1", [ScreenContext("settings")], session: "sse-1")))
                try client.send(wireIntent("i2", [ScreenContext("nope")], session: "sse-1"), session: "sse-1")
            }
            let events = try await stream.wait("the batch and the rejection") { events in
                events.contains { $0.event == "batch" } && events.contains { $0.event == "rejection" }
            }
            let batch = try #require(events.first { $0.event == "batch" })
            #expect(batch.id == "\(snapshot.epoch):1")
            #expect(batch.streamEvent?.batch.intentID == "i1")
            let rejection = try #require(events.first { $0.event == "rejection" })
            #expect(rejection.id == nil)
            #expect(rejection.streamEvent?.rejection.code == .unknownScreen)
            // Idle: heartbeat comments (every second here).
            let deadline = ContinuousClock.now + .seconds(10)
            while stream.heartbeats < 2 {
                guard ContinuousClock.now < deadline else { throw TestFailure("no heartbeats on an idle stream") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    @Test(
        "a stream on a connection that made requests before: after a finished response, and pipelined behind one still being written"
    )
    func afterOtherRequests() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            /// Reads from `fd` until `text` has appeared `times` times (bounded).
            func read(_ fd: Int32, until text: String, times: Int = 1) async throws -> String {
                var received = ""
                var buffer = [UInt8](repeating: 0, count: 65536)
                let deadline = ContinuousClock.now + .seconds(10)
                while received.components(separatedBy: text).count - 1 < times {
                    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if poll(&poller, 1, 20) > 0 {
                        let count = Glibc.read(fd, &buffer, buffer.count)
                        guard count > 0 else { throw TestFailure("the connection closed; it read:\n\(received)") }
                        received += String(decoding: buffer[0..<count], as: UTF8.self)
                    }
                    guard ContinuousClock.now < deadline else {
                        throw TestFailure("no \(times) × \(text) within 10 s; it read:\n\(received)")
                    }
                    try await Task.sleep(for: .milliseconds(1))
                }
                return received
            }
            func send(_ fd: Int32, _ text: String) {
                var bytes = Array(text.utf8)
                _ = write(fd, &bytes, bytes.count)
            }
            // Keep-alive: a finished response, then the stream on the same connection.
            let first = try tcpConnect(address)
            defer { close(first) }
            send(first, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            _ = try await read(first, until: "ok")
            send(first, "GET /v1/sessions/keep-1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let streamed = try await read(first, until: "event: snapshot")
            #expect(streamed.contains("Content-Type: text/event-stream"))
            // Pipelined: the stream request arrives while /healthz is still answered; both come,
            // in order.
            let second = try tcpConnect(address)
            defer { close(second) }
            send(
                second,
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/sessions/keep-2/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            )
            let both = try await read(second, until: "event: snapshot")
            let health = try #require(both.range(of: "\r\n\r\nok"))
            let stream = try #require(both.range(of: "text/event-stream"))
            #expect(health.lowerBound < stream.lowerBound)
            // Both streams follow their sessions.
            try await onThread {
                let client = try Client(endpoints)
                for session in ["keep-1", "keep-2"] {
                    _ = try client.request(
                        .intent(wireIntent("k-\(session)", [ScreenContext("settings")], session: session)))
                }
            }
            _ = try await read(first, until: "event: batch")
            _ = try await read(second, until: "event: batch")
        }
    }

    @Test("a client that closes its side ends its stream: the service closes the connection and frees its place")
    func halfClosed() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let stream = try SSEClient(address, "/v1/sessions/half-1/stream")
            defer { stream.close() }
            _ = try await stream.wait("a snapshot") { !$0.isEmpty }
            let hub = server.http!.api.hub
            #expect(hub.connections == 1)
            shutdown(stream.fd, Int32(SHUT_WR))
            _ = try await waitFor(
                "the service kept the stream open", timeout: .seconds(10), { stream.ended && hub.connections == 0 },
                until: { $0 }, details: { "connections \(hub.connections)" })
        }
    }

    @Test("a reconnect with Last-Event-ID or ?since= gets recovered and only what it missed, else a snapshot")
    func resume() async throws {
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.streams.historySize = 3
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let first = try SSEClient(address, "/v1/sessions/sse-2/stream")
            let snapshot = try #require(try await first.wait("a snapshot") { !$0.isEmpty }[0].streamEvent?.snapshot)
            let epoch = snapshot.epoch
            func intent(_ id: String, _ screen: String) async throws {
                _ = try await onThread {
                    try Client(endpoints).request(.intent(wireIntent(id, [ScreenContext(screen)], session: "sse-2")))
                }
            }
            try await intent("r1", "settings")
            try await first.wait("batch 1") { $0.contains { $0.id == "\(epoch):1" } }
            first.close()
            // Missed while away: two batches.
            try await intent("r2", "search")
            try await intent("r3", "home")

            let resumed = try SSEClient(address, "/v1/sessions/sse-2/stream", headers: ["Last-Event-ID": "\(epoch):1"])
            defer { resumed.close() }
            let events = try await resumed.wait("recovered and two batches") { $0.count >= 3 }
            #expect(events.map(\.event) == ["recovered", "batch", "batch"])
            let recovered = try #require(events[0].streamEvent?.recovered)
            #expect(recovered.epoch == epoch && recovered.seq == 1 && recovered.missed == 2)
            #expect(events[1].id == "\(epoch):2" && events[2].id == "\(epoch):3")

            // Up to date: recovered with nothing missed.
            let current = try SSEClient(address, "/v1/sessions/sse-2/stream?since=\(epoch):3")
            defer { current.close() }
            let now = try await current.wait("recovered") { !$0.isEmpty }
            #expect(now[0].event == "recovered" && now[0].streamEvent?.recovered.missed == 0)

            // Beyond the history (3 batches kept, 4 missed since seq 0), another epoch, or a
            // position ahead of the session's: a snapshot.
            try await intent("r4", "settings")
            for since in ["\(epoch):0", "\(epoch &+ 1):1", "\(epoch):99"] {
                let stale = try SSEClient(address, "/v1/sessions/sse-2/stream", headers: ["Last-Event-ID": since])
                defer { stale.close() }
                let got = try await stale.wait("a snapshot for \(since)") { !$0.isEmpty }
                #expect(got[0].event == "snapshot", "since \(since)")
                #expect(got[0].streamEvent?.snapshot.seq == 4, "since \(since)")
            }
            // Not a position: refused.
            let bad = try await onThread {
                try http(address, "GET /v1/sessions/sse-2/stream?since=1-2 HTTP/1.1\r\n\r\n")
            }
            #expect(bad.status == "HTTP/1.1 400 Bad Request")
            #expect(bad.body.contains("REJECT_CODE_MALFORMED"))
        }
    }

    @Test("readers joining a busy session get a snapshot each; the readers already there go on batch by batch")
    func joinersDoNotDisturb() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let first = try SSEClient(address, "/v1/sessions/busy-1/stream")
            defer { first.close() }
            try await first.wait("a snapshot") { !$0.isEmpty }
            let joiners = Locked<[SSEClient]>([])
            defer { for joiner in joiners.withLock({ $0 }) { joiner.close() } }
            try await onThread {
                let client = try Client(endpoints)
                for k in 1...40 {
                    let screen = k.isMultiple(of: 2) ? "settings" : "search"
                    try client.send(wireIntent("j\(k)", [ScreenContext(screen)]), session: "busy-1")
                    if k.isMultiple(of: 8) {
                        let joiner = try SSEClient(address, "/v1/sessions/busy-1/stream")
                        joiners.withLock { $0.append(joiner) }
                    }
                }
            }
            let events = try await first.wait("forty batches") { $0.filter { $0.event == "batch" }.count == 40 }
            #expect(events.filter { $0.event == "snapshot" }.count == 1, "\(events.map(\.event))")
            var seqs: [Int] = []
            for event in events where event.event == "batch" {
                if let id = event.id, let seq = Int(id.split(separator: ":").last ?? "") { seqs.append(seq) }
            }
            #expect(seqs == Array(1...40), "\(events.map { "\($0.event) \($0.id ?? "-")" })")
            for joiner in joiners.withLock({ $0 }) {
                let seen = try await joiner.wait("its snapshot and the batches after it") { events in
                    guard let snapshot = events.first?.streamEvent?.snapshot else { return false }
                    return snapshot.seq + UInt64(events.filter { $0.event == "batch" }.count) == 40
                }
                // One snapshot, then exactly the batches after it, in order.
                let start = try #require(seen.first?.streamEvent?.snapshot).seq
                let after = seen.dropFirst().filter { $0.event == "batch" }.compactMap {
                    $0.id?.split(separator: ":").last.flatMap { UInt64($0) }
                }
                #expect(seen.filter { $0.event == "snapshot" }.count == 1)
                #expect(after == Array((start + 1)..<41))
            }
        }
    }

    @Test("a reader that falls behind its queue gets a snapshot instead of the batches it missed")
    func slowReader() async throws {
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.streams.queueSize = 4
        }
        try await withNavigatord(configure) { server, endpoints in
            let api = server.http!.api
            let subscription = try api.hub.subscribe("sse-3", since: nil, as: .anonymous)
            defer { subscription.close() }
            // The next frame that is not a heartbeat (one may come before the first snapshot).
            func next() async throws -> StreamFrame? {
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline {
                    switch subscription.queue.poll() {
                    case .frame(let frame): if frame.kind != .heartbeat { return frame }
                    case .closed: return nil
                    case .empty: try await Task.sleep(for: .milliseconds(5))
                    }
                }
                throw TestFailure("no frame came")
            }
            let first = try #require(try await next())
            #expect(first.kind == .snapshot)
            // Ten batches while the reader reads nothing.
            try await onThread {
                let client = try Client(endpoints)
                for k in 1...10 {
                    let screen = k.isMultiple(of: 2) ? "settings" : "search"
                    _ = try client.request(.intent(wireIntent("s\(k)", [ScreenContext(screen)], session: "sse-3")))
                }
            }
            // The follower publishes to the queue a moment after the reply: wait for it to overflow.
            let deadline = ContinuousClock.now + .seconds(10)
            while subscription.queue.overflows == 0 {
                guard ContinuousClock.now < deadline else { throw TestFailure("the queue never overflowed") }
                try await Task.sleep(for: .milliseconds(10))
            }
            let caughtUp = try #require(try await next())
            #expect(caughtUp.kind == .snapshot)
            let snapshot = try Navigator_V1_StreamEvent(jsonString: String(buffer: caughtUp.jsonBytes)).snapshot
            // The snapshot has every batch so far; what follows (if anything) is newer.
            #expect(snapshot.seq >= 4)
            #expect(api.hub.connections == 1)
        }
    }

    @Test("beyond maxStreams a stream is refused with 429; a closed one frees its place")
    func limit() async throws {
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.streams.maxStreams = 1
        }
        try await withNavigatord(configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let api = server.http!.api
            let first = try SSEClient(address, "/v1/sessions/sse-4/stream")
            try await first.wait("a snapshot") { !$0.isEmpty }
            let refused = try await onThread {
                try http(address, "GET /v1/sessions/sse-5/stream HTTP/1.1\r\n\r\n")
            }
            #expect(refused.status == "HTTP/1.1 429 Too Many Requests")
            #expect(refused.body.contains("maxStreams"))
            first.close()
            // The server notices at its next write (the heartbeat, every second here).
            let deadline = ContinuousClock.now + .seconds(10)
            while api.hub.connections > 0 {
                guard ContinuousClock.now < deadline else { throw TestFailure("the closed stream kept its place") }
                try await Task.sleep(for: .milliseconds(20))
            }
            let second = try SSEClient(address, "/v1/sessions/sse-5/stream")
            defer { second.close() }
            try await second.wait("a snapshot") { !$0.isEmpty }
        }
    }

    @Test(
        "sessions kept for resuming are at most maxStreams: streams of ever new sessions opened and closed leave the longest idle forgotten, and their follows stopped"
    )
    func idleSessionsBounded() async throws {
        let configure: @Sendable (inout NavigatordConfiguration) -> Void = {
            Self.configure(&$0)
            $0.streams.maxStreams = 5
        }
        try await withNavigatord(configure) { server, _ in
            let address = try #require(server.httpAddress)
            let api = server.http!.api
            // Four rounds of five sessions each, streamed and closed: each kept for resuming
            // (historySeconds, 120 s by default) unless forgotten.
            for round in 0..<4 {
                let clients = try (0..<5).map { try SSEClient(address, "/v1/sessions/churn-\(round)-\($0)/stream") }
                for client in clients { try await client.wait("a snapshot") { !$0.isEmpty } }
                for client in clients { client.close() }
                // The server notices at its next write (the heartbeat, every second here).
                let deadline = ContinuousClock.now + .seconds(30)
                while api.hub.connections > 0 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("closed streams kept their place") }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(api.hub.streamedSessions <= 5)
            // The forgotten ones are followed no more (the engine's own follows, in process).
            let deadline = ContinuousClock.now + .seconds(30)
            while server.engine.follows.counts.local > 5, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(server.engine.follows.counts.local <= 5)
            // The newest are still there to resume.
            let last = try SSEClient(address, "/v1/sessions/churn-3-4/stream")
            defer { last.close() }
            try await last.wait("a snapshot") { !$0.isEmpty }
            #expect(api.hub.streamedSessions <= 5)
        }
    }

    @Test(
        "several instances: a burst of sessions followed through a peer fills its connections one at a time: 50 at once on 10 per connection open 5"
    )
    func remoteFollowConnections() async throws {
        try await withService { server, endpoints in
            let peer = ServerEndpoints(intents: "", requests: endpoints.requests[0], commands: endpoints.commands[0])
            let logger = TestService.logger("remote-follows")
            let pool = RemoteFollows(capacity: 10, logger: logger) { peer }
            let asked = Atomic<Bool>(false)
            let slow = RemoteFollows(capacity: 10, logger: logger) {
                asked.store(true, ordering: .releasing)
                usleep(300_000)
                return peer
            }
            do {
                let taken = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<50 { group.addTask { try await pool.take().1 } }
                    var slots: [Int] = []
                    for try await slot in group { slots.append(slot) }
                    return slots
                }
                // Each follow that found no room used to open a connection of its own (a thread and
                // a ZeroMQ context each): tens of them for a burst of new sessions.
                #expect(pool.connections == 5)
                #expect(
                    Dictionary(grouping: taken, by: { $0 }).mapValues(\.count) == [0: 10, 1: 10, 2: 10, 3: 10, 4: 10])
                pool.give(back: 2)
                #expect(try await pool.take().1 == 2)
                await pool.close("the test ends")
                #expect(pool.connections == 0)
                await #expect(throws: FollowError.self) { try await pool.take() }

                // Closed while a connection is being opened: the follow waiting for it is told so,
                // and that connection is closed, not kept.
                let taker = Task { try await slow.take() }
                let deadline = ContinuousClock.now + .seconds(10)
                while !asked.load(ordering: .acquiring) {
                    guard ContinuousClock.now < deadline else {
                        throw TestFailure("the follows never began to open a connection")
                    }
                    try await Task.sleep(for: .milliseconds(5))
                }
                await slow.close("the test ends")
                #expect(slow.connections == 0)
                await #expect(throws: FollowError.self) { try await taker.value }
                #expect(slow.connections == 0)
            } catch {
                // Whatever failed, no connection (a thread and a context each) outlives the test.
                await pool.close("the test failed")
                await slow.close("the test failed")
                throw error
            }
        }
    }

    @Test(
        "the queue: beyond its capacity what it holds is dropped (replies kept) and the reader told; a closed queue ends"
    )
    func queue() async {
        let queue = StreamQueue(capacity: 2)
        #expect(!queue.push(StreamFrame(.batch, position: StreamPosition(epoch: 7, seq: 1), json: [])))
        #expect(!queue.push(StreamFrame(.reply, position: nil, json: [])))
        #expect(queue.push(StreamFrame(.batch, position: StreamPosition(epoch: 7, seq: 2), json: [])))
        #expect(queue.overflows == 1)
        guard case .frame(let kept) = queue.poll(), kept.kind == .reply else {
            Issue.record("expected the reply, kept")
            return
        }
        guard case .empty = queue.poll() else {
            Issue.record("expected the batches dropped")
            return
        }
        queue.push(StreamFrame(.batch, position: StreamPosition(epoch: 7, seq: 5), json: []))
        guard case .frame(let frame) = queue.poll() else {
            Issue.record("expected a frame")
            return
        }
        #expect(frame.position?.seq == 5)
        queue.close()
        guard case .closed = queue.poll() else {
            Issue.record("expected the queue closed")
            return
        }
        #expect(StreamPosition("12:34") == StreamPosition(epoch: 12, seq: 34))
        #expect(StreamPosition("12") == nil && StreamPosition("a:1") == nil)
    }

    @Test("over WebSocket (the same path, upgraded): the same events, and client events answered on the socket")
    func webSocket() async throws {
        try await withNavigatord(Self.configure) { server, endpoints in
            let address = try #require(server.httpAddress)
            let socket = try WebSocketClient(address, "/v1/sessions/ws-1/stream")
            defer { socket.close() }
            let first = try await socket.wait("a snapshot") { !$0.isEmpty }
            #expect(socket.head.hasPrefix("HTTP/1.1 101"))
            let snapshot = try Navigator_V1_StreamEvent(jsonString: first[0]).snapshot
            #expect(snapshot.session == "ws-1" && snapshot.seq == 0)
            _ = try await onThread {
                try Client(endpoints).request(
                    .intent(wireIntent("w1", [ScreenContext("chat", ["conversationId": "7"])], session: "ws-1")))
            }
            let messages = try await socket.wait("the batch") { $0.count >= 2 }
            let batch = try Navigator_V1_StreamEvent(jsonString: messages[1]).batch
            #expect(batch.seq == 1 && batch.intentID == "w1")
            // Back to the chat list, reported on the socket; its outcome comes back with the id.
            let chatList = try #require(
                snapshot.tree.root.tabBar.tabs.first { $0.name == "chats" }?.stack.first?.id)
            socket.send(
                text: #"{"requestId":"b1","clientEvent":{"lastSeq":"1","poppedTo":{"screenId":"\#(chatList)"}}}"#)
            socket.send(text: #"{"requestId":"b2","stats":{}}"#)
            socket.send(text: "not json")
            let received = try await socket.wait("three replies") { messages in
                messages.filter { $0.hasPrefix(#"{"reply""#) }.count >= 3
            }
            let replies = received.filter { $0.hasPrefix(#"{"reply""#) }.map {
                (try? Navigator_V1_StreamEvent(jsonString: $0)) ?? Navigator_V1_StreamEvent()
            }
            let applied = try #require(replies.first { $0.reply.requestID == "b1" })
            #expect(applied.reply.eventApplied.seq == 2, "\(applied)")
            let refused = try #require(replies.first { $0.reply.requestID == "b2" })
            #expect(refused.reply.rejected.code == .unknownRequest)
            #expect(replies.contains { $0.reply.rejected.code == .malformed })
            // The event's own batch comes on the stream too.
            try await socket.wait("batch 2") { messages in
                messages.contains { (try? Navigator_V1_StreamEvent(jsonString: $0))?.batch.seq == 2 }
            }
            // Resuming over WebSocket: ?since= the last batch, nothing missed.
            let resumed = try WebSocketClient(address, "/v1/sessions/ws-1/stream?since=\(snapshot.epoch):2")
            defer { resumed.close() }
            let again = try await resumed.wait("recovered") { !$0.isEmpty }
            #expect(try Navigator_V1_StreamEvent(jsonString: again[0]).recovered.missed == 0)
            // Many requests at once: each answered (at most 8 in flight; the rest wait unread).
            for index in 0..<30 { resumed.send(text: #"{"requestId":"f\#(index)","snapshot":{}}"#) }
            _ = try await resumed.wait("30 replies") { messages in
                messages.filter { $0.hasPrefix(#"{"reply""#) }.count >= 30
            }
            // A message over four times maxMessageBytes (here in five frames of 60,000 bytes)
            // closes the stream with 1009.
            let part = [UInt8](repeating: 0x20, count: 60_000)
            resumed.send(opcode: 0x1, part, fin: false)
            for index in 1..<5 { resumed.send(opcode: 0x0, part, fin: index == 4) }
            let deadline = ContinuousClock.now + .seconds(10)
            while resumed.closeCode == nil {
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("no close frame after an oversize frame")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(resumed.closeCode == 1009)
        }
    }

    @Test(
        "several instances: thirty streams opened at once on one, for sessions another serves, each show their snapshot and then their batch",
        .enabled(if: TestPostgres.enabled))
    func manyAcrossInstances() async throws {
        try await TestPostgres.withDatabase { url in
            try await withNavigatords(["one", "two"], url: url, Self.configure) { navigators in
                let (first, second) = (navigators[0].engine, navigators[1].engine)
                let address = try #require(navigators[0].httpAddress)
                let ownership = try #require(second.store.ownership)
                let deadline = ContinuousClock.now + .seconds(30)
                while ownership.served.count != 128 || first.store.ownership!.served.count != 128 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the partitions were not split") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let sessions = Array(
                    (0..<5000).map { "m\($0)" }.filter { ownership.serves(ownership.partition(of: $0)) }.prefix(30))
                #expect(sessions.count == 30)
                while sessions.contains(where: { first.store.ownership!.forwardEndpoint(of: $0) == nil }) {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the first never learned the owner") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                // All open at once: their follows through the second race for its connections
                // (ten sessions each), and each one's first snapshot with its own set-up.
                let streams = try sessions.map { try SSEClient(address, "/v1/sessions/\($0)/stream") }
                defer { for stream in streams { stream.close() } }
                var epochs: [UInt64] = []
                for (stream, session) in zip(streams, sessions) {
                    let opened = try await stream.wait("\(session)'s snapshot", timeout: .seconds(20)) { !$0.isEmpty }
                    let snapshot = try #require(opened[0].streamEvent?.snapshot, "\(session): \(opened[0])")
                    epochs.append(snapshot.epoch)
                }
                // Then a batch of each, made on the second (the first forwards each intent).
                for session in sessions {
                    let reply = try await onThread {
                        try Client(first.endpoints).request(
                            .intent(wireIntent("i-\(session)", [ScreenContext("settings")], session: session)))
                    }
                    #expect(reply.resolved.batch.seq == 1, "\(session): \(reply)")
                }
                for ((stream, session), epoch) in zip(zip(streams, sessions), epochs) {
                    _ = try await stream.wait("\(session)'s batch", timeout: .seconds(20)) { events in
                        events.contains { $0.id == "\(epoch):1" }
                    }
                }
            }
        }
    }

    @Test(
        "several instances: a stream opened on one follows a session another serves, and across its hand-over",
        .enabled(if: TestPostgres.enabled))
    func acrossInstances() async throws {
        try await TestPostgres.withDatabase { url in
            let configure: (inout NavigatordConfiguration) -> Void = {
                Self.configure(&$0)
                $0.engine.leaseSeconds = 2
            }
            try await withNavigatords(["one", "two"], url: url, configure) { navigators in
                let (first, second) = (navigators[0].engine, navigators[1])
                let address = try #require(navigators[0].httpAddress)
                let ownership = try #require(second.engine.store.ownership)
                let deadline = ContinuousClock.now + .seconds(20)
                while ownership.served.count != 128 || first.store.ownership!.served.count != 128 {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the partitions were not split") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let session = (0..<1000).map { "x\($0)" }.first { ownership.serves(ownership.partition(of: $0)) }!
                // The first learns where the second takes forwarded messages at its next round.
                while first.store.ownership!.forwardEndpoint(of: session) == nil {
                    guard ContinuousClock.now < deadline else { throw TestFailure("the first never learned the owner") }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let stream = try SSEClient(address, "/v1/sessions/\(session)/stream")
                defer { stream.close() }
                let opened: [SSEClient.Event]
                do {
                    opened = try await stream.wait("a snapshot") { !$0.isEmpty }
                } catch {
                    // What the first knew then. (It failed so until a follow took the snapshot that
                    // came back before its attempt was recorded: RemoteFollowTests.)
                    let peers = first.livePeers.list.map {
                        "\($0.id) requests \($0.requestEndpoints) commands \($0.commandEndpoints)"
                    }
                    throw TestFailure(
                        "\(error)\nthe first's peers: \(peers); remote connections \(first.follows.remote?.connections ?? -1), follows \(first.follows.remote?.count ?? -1); the first serves the session: \(first.store.notServed(session) ?? "yes")"
                    )
                }
                let before = try #require(opened[0].streamEvent?.snapshot)
                #expect(before.epoch == ownership.epoch(of: ownership.partition(of: session)))
                func intent(_ id: String, _ screen: String) async throws {
                    _ = try await onThread {
                        try Client(first.endpoints).request(
                            .intent(wireIntent(id, [ScreenContext(screen)], session: session)))
                    }
                }
                try await intent("a1", "settings")
                try await stream.wait("the batch from the second") { $0.contains { $0.id == "\(before.epoch):1" } }

                // The second stops: it hands its partitions over; the first serves the session at
                // a new epoch, and the stream says so with a snapshot of that epoch.
                await second.stop()
                var reply = Navigator_V1_Reply()
                while true {
                    reply = try await onThread {
                        try Client(first.endpoints).request(
                            .intent(wireIntent("a2", [ScreenContext("search")], session: session)))
                    }
                    if case .resolved = reply.kind { break }
                    guard ContinuousClock.now < deadline + .seconds(20) else {
                        throw TestFailure("the first never took the session over: \(reply)")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
                let epoch = reply.resolved.batch.epoch
                #expect(epoch != before.epoch)
                let events = try await stream.wait("the new epoch's batch") { events in
                    events.contains { $0.id == "\(epoch):\(reply.resolved.batch.seq)" }
                }
                let snapshotAt = try #require(
                    events.lastIndex { $0.event == "snapshot" && $0.id?.hasPrefix("\(epoch):") == true })
                let batchAt = try #require(events.firstIndex { $0.id == "\(epoch):\(reply.resolved.batch.seq)" })
                // A snapshot of the new epoch comes before its batch, or has it already.
                #expect(
                    snapshotAt < batchAt || events[snapshotAt].streamEvent!.snapshot.seq >= reply.resolved.batch.seq)
            }
        }
    }
}
