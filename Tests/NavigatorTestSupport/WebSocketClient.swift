import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal WebSocket client on a plain socket (RFC 6455): the upgrade, masked text frames
/// out, text messages in (answering pings), read on a thread of its own.
public final class WebSocketClient: Sendable {
    private struct State {
        var head = ""
        var upgraded = false
        var buffer: [UInt8] = []
        var messages: [String] = []
        var closeCode: UInt16?
        var ended = false
    }

    private let state = Locked(State())
    private let writing = Locked(())
    public let fd: Int32

    public init(_ address: String, _ path: String, headers: [String: String] = [:]) throws {
        fd = try tcpConnect(address)
        var request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        send(raw: Array(request.utf8))
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                let pings = state.withLock { state -> [[UInt8]] in
                    state.buffer += buffer[0..<count]
                    return Self.parse(&state)
                }
                for payload in pings { self.send(opcode: 0xA, payload) }
            }
            state.withLock { $0.ended = true }
        }
        thread.start()
    }

    /// Takes the head, then whole frames, off the bytes read; returns the payloads of pings.
    private static func parse(_ state: inout State) -> [[UInt8]] {
        if !state.upgraded {
            let marker: [UInt8] = [13, 10, 13, 10]
            guard
                let end = (0..<max(0, state.buffer.count - 3)).first(where: {
                    Array(state.buffer[$0..<$0 + 4]) == marker
                })
            else { return [] }
            state.head = String(decoding: state.buffer[0..<end], as: UTF8.self)
            state.buffer.removeFirst(end + 4)
            state.upgraded = true
            guard state.head.hasPrefix("HTTP/1.1 101") else {
                state.ended = true
                return []
            }
        }
        var pings: [[UInt8]] = []
        while state.buffer.count >= 2 {
            let opcode = state.buffer[0] & 0x0F
            var length = Int(state.buffer[1] & 0x7F)
            var offset = 2
            if length == 126 {
                guard state.buffer.count >= 4 else { break }
                length = Int(state.buffer[2]) << 8 | Int(state.buffer[3])
                offset = 4
            } else if length == 127 {
                guard state.buffer.count >= 10 else { break }
                length = (2..<10).reduce(0) { $0 << 8 | Int(state.buffer[$1]) }
                offset = 10
            }
            guard state.buffer.count >= offset + length else { break }
            let payload = Array(state.buffer[offset..<offset + length])
            state.buffer.removeFirst(offset + length)
            switch opcode {
            case 0x1: state.messages.append(String(decoding: payload, as: UTF8.self))
            case 0x8: state.closeCode = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
            case 0x9: pings.append(payload)
            default: break
            }
        }
        return pings
    }

    private func send(raw bytes: [UInt8]) {
        writing.withLock { _ in
            var bytes = bytes
            _ = write(fd, &bytes, bytes.count)
        }
    }

    /// One masked frame.
    public func send(opcode: UInt8, _ payload: [UInt8], fin: Bool = true) {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65536 {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        send(raw: frame)
    }

    public func send(text: String) { send(opcode: 0x1, Array(text.utf8)) }

    public var head: String { state.withLock { $0.head } }
    public var messages: [String] { state.withLock { $0.messages } }
    public var closeCode: UInt16? { state.withLock { $0.closeCode } }
    public var ended: Bool { state.withLock { $0.ended } }

    /// Waits (bounded) until the messages satisfy `condition`.
    @discardableResult
    public func wait(_ what: String, timeout: Duration = .seconds(10), until condition: ([String]) -> Bool) async throws
        -> [String]
    {
        try await waitFor(
            "the WebSocket never showed \(what)", timeout: timeout, { self.messages }, until: condition,
            details: { "head \(self.head), messages:\n\(self.messages)" })
    }

    public func close() {
        send(opcode: 0x8, [0x03, 0xE8])
        shutdown(fd, Int32(SHUT_RDWR))
    }

    deinit { Glibc.close(fd) }
}
