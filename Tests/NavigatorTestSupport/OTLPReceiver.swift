import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An OpenTelemetry collector's OTLP/HTTP traces endpoint, as small as a test needs: listens on
/// 127.0.0.1 (an ephemeral port), takes `POST /v1/traces` bodies of `application/x-protobuf`,
/// answers 200 with an empty ExportTraceServiceResponse, and decodes the spans itself (the
/// protobuf wire format by hand, no generated code). ``stop()`` ends it and its threads.
public final class OTLPReceiver: Sendable {
    /// A span as OTLP carries it (opentelemetry/proto/trace/v1/trace.proto).
    public struct Span: Sendable, CustomStringConvertible {
        public var traceID = ""
        public var spanID = ""
        public var parentSpanID = ""
        public var name = ""
        /// SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
        public var kind = 0
        public var start: UInt64 = 0
        public var end: UInt64 = 0
        /// Values as text: strings as they are, booleans `true`/`false`, integers in decimal.
        public var attributes: [String: String] = [:]
        /// Status code: 0 unset, 1 ok, 2 error.
        public var statusCode = 0
        public var statusMessage = ""
        /// The resource's attributes (service.name, …).
        public var resource: [String: String] = [:]

        public var description: String {
            "\(name) trace=\(traceID) span=\(spanID) parent=\(parentSpanID) kind=\(kind) [\(start)…\(end)] status=\(statusCode) \(statusMessage) \(attributes.sorted { $0.key < $1.key })"
        }
    }

    /// Where to send: `http://127.0.0.1:PORT` (OTEL_EXPORTER_OTLP_ENDPOINT).
    public let endpoint: String
    private let listener: Int32
    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)

    private struct State {
        var spans: [Span] = []
        var requests: [String] = []
        var problems: [String] = []
        var threads = 0
    }

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw TestFailure("the OTLP receiver cannot listen on 127.0.0.1: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        endpoint = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        spawn { [self] in acceptLoop() }
    }

    /// Every span received so far.
    public var spans: [Span] { state.withLock { $0.spans } }
    /// Each request's line and content type, as received.
    public var requests: [String] { state.withLock { $0.requests } }
    /// What the receiver could not take (a body it cannot decode, say): a test expects none.
    public var problems: [String] { state.withLock { $0.problems } }

    /// Waits (bounded) until `condition` holds for the spans received; returns them.
    public func wait(
        timeout: Duration = .seconds(20), _ what: String, until condition: ([Span]) -> Bool
    ) async throws -> [Span] {
        let end = ContinuousClock.now + timeout
        while true {
            let spans = self.spans
            if condition(spans) { return spans }
            guard ContinuousClock.now < end else {
                throw TestFailure(
                    "the OTLP receiver did not get \(what) within \(timeout); it got \(spans.count) spans:\n"
                        + spans.map(\.description).joined(separator: "\n") + "\nproblems: \(problems)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Stops listening and waits (bounded) for its threads to end.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        let end = ContinuousClock.now + .seconds(5)
        while state.withLock({ $0.threads }) > 0, ContinuousClock.now < end { usleep(5_000) }
    }

    deinit { stop() }

    private func spawn(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.threads += 1 }
        let thread = Thread { [self] in
            body()
            state.withLock { $0.threads -= 1 }
        }
        thread.name = "otlp-receiver"
        thread.start()
    }

    private func acceptLoop() {
        while !stopping.load(ordering: .acquiring) {
            var poll = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, 50) > 0 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            // Close-on-exec: a child another test spawns must not keep this connection open.
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            spawn { [self] in serve(connection) }
        }
    }

    /// Serves one connection's requests (keep-alive) until the peer closes it or the receiver
    /// stops.
    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer: [UInt8] = []
        func fill() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while !stopping.load(ordering: .acquiring) {
                let count = read(fd, &chunk, chunk.count)
                if count > 0 {
                    buffer += chunk[0..<count]
                    return true
                }
                if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { return false }
            }
            return false
        }
        while true {
            var headEnd: Int?
            while true {
                headEnd = buffer.indices.dropLast(3).first {
                    buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10
                }
                if headEnd != nil { break }
                guard fill() else { return }
            }
            let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
            buffer.removeFirst(headEnd! + 4)
            let lines = head.split(separator: "\r\n").map(String.init)
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                    .trimmingCharacters(in: .whitespaces)
            }
            var body: [UInt8] = []
            if headers["transfer-encoding"]?.lowercased() == "chunked" {
                while true {
                    var lineEnd: Int?
                    while true {
                        lineEnd = buffer.indices.dropLast().first { buffer[$0] == 13 && buffer[$0 + 1] == 10 }
                        if lineEnd != nil { break }
                        guard fill() else { return }
                    }
                    let sizeText = String(decoding: buffer[..<lineEnd!], as: UTF8.self).split(separator: ";")[0]
                    guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return }
                    buffer.removeFirst(lineEnd! + 2)
                    while buffer.count < size + 2 { guard fill() else { return } }
                    body += buffer[..<size]
                    buffer.removeFirst(size + 2)
                    if size == 0 { break }
                }
            } else {
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while buffer.count < length { guard fill() else { return } }
                body = Array(buffer[..<length])
                buffer.removeFirst(length)
            }
            let request = lines.first ?? ""
            let type = headers["content-type"] ?? ""
            state.withLock { $0.requests.append("\(request) \(type)") }
            if headers["content-encoding"].map({ $0 != "identity" }) ?? false {
                state.withLock { $0.problems.append("compressed body (\(headers["content-encoding"]!)): not decoded") }
            } else if request.hasPrefix("POST /v1/traces "), type.hasPrefix("application/x-protobuf") {
                do {
                    let spans = try Self.decodeExport(body)
                    state.withLock { $0.spans += spans }
                } catch {
                    state.withLock { $0.problems.append("\(request): \(error)") }
                }
            } else {
                state.withLock { $0.problems.append("unexpected request \(request) \(type)") }
            }
            let response = Array(
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n".utf8)
            guard write(fd, response, response.count) == response.count else { return }
        }
    }

    // MARK: The protobuf wire format, by hand

    struct Reader {
        let bytes: ArraySlice<UInt8>
        var index: Int

        init(_ bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            index = bytes.startIndex
        }

        var atEnd: Bool { index >= bytes.endIndex }

        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard index < bytes.endIndex, shift < 64 else { throw TestFailure("truncated varint") }
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }

        /// The next field: its number and wire type.
        mutating func tag() throws -> (field: Int, wire: Int) {
            let tag = try varint()
            return (Int(tag >> 3), Int(tag & 7))
        }

        mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, index + count <= bytes.endIndex else { throw TestFailure("truncated field") }
            defer { index += count }
            return bytes[index..<index + count]
        }

        mutating func delimited() throws -> ArraySlice<UInt8> { try take(Int(try varint())) }

        mutating func fixed64() throws -> UInt64 {
            try take(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func skip(_ wire: Int) throws {
            switch wire {
            case 0: _ = try varint()
            case 1: _ = try take(8)
            case 2: _ = try delimited()
            case 5: _ = try take(4)
            default: throw TestFailure("wire type \(wire) not expected")
            }
        }

        /// Each field of a message, handed to `body` (which reads its value or skips it).
        static func fields(
            _ bytes: ArraySlice<UInt8>, _ body: (Int, Int, inout Reader) throws -> Void
        ) throws {
            var reader = Reader(bytes)
            while !reader.atEnd {
                let (field, wire) = try reader.tag()
                try body(field, wire, &reader)
            }
        }
    }

    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
    static func decodeExport(_ body: [UInt8]) throws -> [Span] {
        var spans: [Span] = []
        try Reader.fields(body[...]) { field, wire, reader in
            guard field == 1, wire == 2 else { return try reader.skip(wire) }
            // ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
            var resource: [String: String] = [:]
            var found: [Span] = []
            try Reader.fields(try reader.delimited()) { field, wire, reader in
                switch (field, wire) {
                case (1, 2):
                    // Resource { repeated KeyValue attributes = 1; }
                    try Reader.fields(try reader.delimited()) { field, wire, reader in
                        guard field == 1, wire == 2 else { return try reader.skip(wire) }
                        let (key, value) = try keyValue(try reader.delimited())
                        resource[key] = value
                    }
                case (2, 2):
                    // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
                    try Reader.fields(try reader.delimited()) { field, wire, reader in
                        guard field == 2, wire == 2 else { return try reader.skip(wire) }
                        found.append(try span(try reader.delimited()))
                    }
                default: try reader.skip(wire)
                }
            }
            spans += found.map { span in
                var span = span
                span.resource = resource
                return span
            }
        }
        return spans
    }

    /// Span { trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8,
    /// attributes 9, status 15 }
    static func span(_ bytes: ArraySlice<UInt8>) throws -> Span {
        var span = Span()
        try Reader.fields(bytes) { field, wire, reader in
            switch (field, wire) {
            case (1, 2): span.traceID = hex(try reader.delimited())
            case (2, 2): span.spanID = hex(try reader.delimited())
            case (4, 2): span.parentSpanID = hex(try reader.delimited())
            case (5, 2): span.name = text(try reader.delimited())
            case (6, 0): span.kind = Int(try reader.varint())
            case (7, 1): span.start = try reader.fixed64()
            case (8, 1): span.end = try reader.fixed64()
            case (9, 2):
                let (key, value) = try keyValue(try reader.delimited())
                span.attributes[key] = value
            case (15, 2):
                // Status { string message = 2; StatusCode code = 3; }
                try Reader.fields(try reader.delimited()) { field, wire, reader in
                    switch (field, wire) {
                    case (2, 2): span.statusMessage = text(try reader.delimited())
                    case (3, 0): span.statusCode = Int(try reader.varint())
                    default: try reader.skip(wire)
                    }
                }
            default: try reader.skip(wire)
            }
        }
        return span
    }

    /// KeyValue { string key = 1; AnyValue value = 2; } with AnyValue { string 1, bool 2,
    /// int64 3, double 4, … }.
    static func keyValue(_ bytes: ArraySlice<UInt8>) throws -> (String, String) {
        var key = ""
        var value = ""
        try Reader.fields(bytes) { field, wire, reader in
            switch (field, wire) {
            case (1, 2): key = text(try reader.delimited())
            case (2, 2):
                try Reader.fields(try reader.delimited()) { field, wire, reader in
                    switch (field, wire) {
                    case (1, 2): value = text(try reader.delimited())
                    case (2, 0): value = try reader.varint() != 0 ? "true" : "false"
                    case (3, 0): value = String(Int64(bitPattern: try reader.varint()))
                    case (4, 1): value = String(Double(bitPattern: try reader.fixed64()))
                    default:
                        try reader.skip(wire)
                        value = "(another kind of value)"
                    }
                }
            default: try reader.skip(wire)
            }
        }
        return (key, value)
    }
}
