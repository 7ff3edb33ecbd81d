import Foundation
import Locking
import NavigatorWire
import SwiftProtobuf
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A Server-Sent Events client on a plain socket: sends the request, reads on a thread of its
/// own and parses events as they come.
public final class SSEClient: Sendable {
    public struct Event: Sendable {
        public var id: String?
        public var event: String
        public var data: String
        public var streamEvent: Navigator_V1_StreamEvent? { try? Navigator_V1_StreamEvent(jsonString: data) }
    }

    private struct State {
        var text = ""
        var events: [Event] = []
        var comments = 0
        var ended = false
    }

    private let state = Locked(State())
    public let fd: Int32

    public init(_ address: String, _ path: String, headers: [String: String] = [:]) throws {
        fd = try tcpConnect(address)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        var bytes = Array(request.utf8)
        _ = write(fd, &bytes, bytes.count)
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                state.withLock { state in
                    state.text += String(decoding: buffer[0..<count], as: UTF8.self)
                    Self.parse(&state)
                }
            }
            state.withLock { $0.ended = true }
        }
        thread.start()
    }

    /// Takes whole events (ended by a blank line) off the text read so far, after the head.
    private static func parse(_ state: inout State) {
        guard let head = state.text.range(of: "\r\n\r\n") else { return }
        var body = String(state.text[head.upperBound...])
        // Chunked transfer: drop the chunk-size lines (hex digits alone on a line).
        body = body.split(separator: "\r\n", omittingEmptySubsequences: false)
            .filter { line in !(line.allSatisfy(\.isHexDigit) && !line.isEmpty) }.joined()
        var events: [Event] = []
        var comments = 0
        for block in body.components(separatedBy: "\n\n").dropLast() {
            var event = Event(id: nil, event: "message", data: "")
            var isComment = true
            for line in block.split(separator: "\n") {
                if line.hasPrefix(":") { continue }
                isComment = false
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.event = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { event.data += String(line.dropFirst(6)) }
            }
            if isComment {
                comments += 1
            } else if event.event != "message" || !event.data.isEmpty {
                events.append(event)
            }
        }
        state.events = events
        state.comments = comments
    }

    public var head: String { state.withLock { $0.text.components(separatedBy: "\r\n\r\n")[0] } }
    public var events: [Event] { state.withLock { $0.events } }
    public var heartbeats: Int { state.withLock { $0.comments } }
    public var ended: Bool { state.withLock { $0.ended } }
    /// Whether the response ended (the chunked body's last chunk came), the connection open or not.
    public var responseEnded: Bool { state.withLock { $0.ended || $0.text.hasSuffix("\r\n0\r\n\r\n") } }

    /// Waits (bounded) until the events satisfy `condition`.
    @discardableResult
    public func wait(_ what: String, timeout: Duration = .seconds(10), until condition: ([Event]) -> Bool) async throws
        -> [Event]
    {
        try await waitFor(
            "the stream never showed \(what)", timeout: timeout, { self.events }, until: condition,
            details: { "it read:\n\(self.state.withLock { $0.text })" })
    }

    public func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    deinit { Glibc.close(fd) }
}

/// Reads `read()` until `condition` holds or `timeout` passes (then throws `failure` with
/// `details()`): the stream test clients' wait.
public func waitFor<T>(
    _ failure: String, timeout: Duration, _ read: () -> T, until condition: (T) -> Bool, details: () -> String
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        let value = read()
        if condition(value) { return value }
        guard ContinuousClock.now < deadline else { throw TestFailure("\(failure); \(details())") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// ``waitFor(_:timeout:_:until:details:)`` for a `read` that blocks (a ZeroMQ request, a
/// database query): each read runs on a thread of its own, never on the cooperative pool, which
/// every test's async work — the in-process services' HTTP handlers among it — shares.
public func waitForBlocking<T: Sendable>(
    _ failure: String, timeout: Duration, _ read: @escaping @Sendable () -> T, until condition: (T) -> Bool,
    details: @escaping @Sendable () -> String = { "" }
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        let value = try await DedicatedThread.run(name: "test-wait") { read() }
        if condition(value) { return value }
        guard ContinuousClock.now < deadline else {
            // Details may read a database or a service: on a thread, as the reads are.
            let more = try await DedicatedThread.run(name: "test-wait") { details() }
            throw TestFailure("\(failure) within \(timeout); last read: \(value)\(more.isEmpty ? "" : "; \(more)")")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}
