import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket
import NavigatorPort
import NavigatorWire

/// A WebSocket session stream inside the connection's pipeline, after ``StreamChannelHandler``
/// answered the upgrade: no task per connection. The same events as SSE, one
/// `navigator.v1.StreamEvent` in JSON per text message (the bytes of the session's encoded
/// event, shared), heartbeats as pings, written only while the channel is writable. Text
/// messages from the client are `navigator.v1.Request`s in JSON, answered with a `reply` event;
/// at most ``maxInFlight`` are answered at once — beyond, the client is not read from, and a
/// client that sent more than ``maxWaiting`` beyond them, or more than ``requestsPerSecond``
/// (bursts of ``requestBurst``), is closed with 1008. A client that does not read is not read
/// from either: nothing is written while the channel is not writable, and of the pings it sent
/// meanwhile only the last is answered (RFC 6455, 5.5.3), so no write queue grows.
final class WebSocketStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    static let maxInFlight = 8
    /// The largest frame a client may send (a message may come in several).
    static let maxFrameSize = 1 << 16
    /// Requests read while ``maxInFlight`` are being answered, at most.
    static let maxWaiting = 64
    /// Requests a client may send per second on average, and in a burst.
    static let requestsPerSecond = 50
    static let requestBurst = 100

    private let api: HTTPAPI
    private let subscription: StreamSubscription
    private let expiry: Date?
    private var closer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    private var ended = false
    /// A message that came in several frames, so far.
    private var message: ByteBuffer?
    private var messageIsText = false
    private var inFlight = 0
    /// Requests read while ``maxInFlight`` were in flight (text or not), answered as others
    /// finish.
    private var waiting: [(ByteBuffer, Bool)] = []
    /// The payload of the last ping not yet answered (written once the channel is writable).
    private var pongOwed: ByteBuffer?
    /// Whether the channel reads from the client now.
    private var reading = true
    private var requestBudget = RequestBudget(perSecond: requestsPerSecond, burst: requestBurst)

    /// A client that reads nothing is cut off.
    private var stalled = StalledReader()

    init(api: HTTPAPI, subscription: StreamSubscription, expiry: Date?) {
        self.api = api
        self.subscription = subscription
        self.expiry = expiry
    }

    /// `Sec-WebSocket-Accept` for a WebSocket upgrade request this service can take (GET,
    /// `Upgrade: websocket`, version 13, a key); nil for anything else.
    static func acceptKey(_ head: HTTPRequestHead) -> String? {
        guard isUpgrade(head), let key = head.headers.first(name: "sec-websocket-key") else { return nil }
        let digest = Insecure.SHA1.hash(data: Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))
        return Data(digest).base64EncodedString()
    }

    /// Whether `head` is a WebSocket upgrade request this service can take.
    static func isUpgrade(_ head: HTTPRequestHead) -> Bool {
        head.method == .GET
            && head.headers[canonicalForm: "upgrade"].contains { $0.lowercased() == "websocket" }
            && head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
            && head.headers.first(name: "sec-websocket-version") == "13"
            && !(head.headers.first(name: "sec-websocket-key") ?? "").isEmpty
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        closer = subscription.expire(at: expiry, on: context.eventLoop)
        let loop = context.eventLoop
        subscription.queue.setNotify { loop.execute { bound.value.drain() } }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        stalled.update(context, timeout: api.stalledReaderTimeout)
        updateReading()
        context.fireChannelWritabilityChanged()
    }

    /// Reads from the client only while it reads what is written to it and has room for more
    /// requests.
    private func updateReading() {
        guard let context, !ended else { return }
        let read = context.channel.isWritable && inFlight < Self.maxInFlight
        guard read != reading else { return }
        reading = read
        context.channel.setOption(ChannelOptions.autoRead, value: read).whenComplete { _ in }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is stopping, or the client closed its side: 1001, going away.
        if StreamChannelHandler.endsStream(event) {
            close(code: .goingAway, reason: "navigatord is stopping or the client closed its side")
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A frame the decoder refused (too large, malformed): 1002 or 1009, as RFC 6455 says.
        if let error = error as? NIOWebSocketError {
            close(
                code: error == .invalidFrameLength ? .messageTooLarge : .protocolError,
                reason: "a WebSocket frame this service cannot take: \(error)")
        } else {
            end()
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ended else { return }
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            // One frame may hold a whole message: the same bound as one in several.
            guard frame.unmaskedData.readableBytes <= api.maxBodyBytes else {
                return close(
                    code: .messageTooLarge, reason: "a message over \(api.maxBodyBytes) bytes; expected fewer")
            }
            message = frame.unmaskedData
            messageIsText = frame.opcode == .text
            if frame.fin { received() }
        case .continuation:
            guard var partial = message else {
                return close(code: .protocolError, reason: "a continuation frame with no message begun")
            }
            var data = frame.unmaskedData
            guard partial.readableBytes + data.readableBytes <= api.maxBodyBytes else {
                return close(
                    code: .messageTooLarge, reason: "a message over \(api.maxBodyBytes) bytes; expected fewer")
            }
            partial.writeBuffer(&data)
            message = partial
            if frame.fin { received() }
        case .ping:
            // Only the last ping is answered, and only while the client reads.
            pongOwed = frame.unmaskedData
            if context.channel.isWritable { drain() } else { updateReading() }
        case .connectionClose:
            // The client's code echoed, if it is one an endpoint may send (RFC 6455, 7.4): 1005,
            // 1006 and 1015 are never sent, and codes below 1000 or unassigned are a protocol error.
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self).map { number -> WebSocketErrorCode in
                switch number {
                case 1000...1003, 1007...1014, 3000...4999: WebSocketErrorCode(codeNumber: Int(number))
                default: .protocolError
                }
            }
            close(code: code ?? .normalClosure, reason: "")
        default:
            break  // pong, reserved opcodes
        }
    }

    /// A whole message from the client: a Request, answered on the stream.
    private func received() {
        guard let context, let bytes = message else { return }
        message = nil
        let incoming = (bytes, messageIsText)
        guard requestBudget.take(at: NIODeadline.now()) else {
            return close(
                code: .policyViolation,
                reason:
                    "over \(Self.requestsPerSecond) requests per second (bursts of \(Self.requestBurst)); expected fewer"
            )
        }
        guard inFlight < Self.maxInFlight else {
            // Frames already read keep coming after reading stopped; a few wait their turn.
            guard waiting.count < Self.maxWaiting else {
                return close(
                    code: .policyViolation,
                    reason:
                        "over \(Self.maxInFlight + Self.maxWaiting) requests unanswered; expected at most \(Self.maxInFlight) in flight"
                )
            }
            waiting.append(incoming)
            return
        }
        ask(incoming, context)
    }

    /// Sends one request of the client's to the service; its answer comes to ``answered(_:)``.
    private func ask(_ incoming: (ByteBuffer, Bool), _ context: ChannelHandlerContext) {
        inFlight += 1
        updateReading()
        let (api, session, caller, loop) = (self.api, subscription.session, subscription.caller, context.eventLoop)
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let reply = await api.answer(incoming.0, isText: incoming.1, session: session, caller: caller)
            var event = Navigator_V1_StreamEvent()
            event.reply = reply
            let frame = StreamFrame(.reply, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
            loop.execute { bound.value.answered(frame) }
        }
    }

    private func answered(_ frame: StreamFrame) {
        inFlight -= 1
        subscription.queue.push(frame)
        guard let context, !ended else { return }
        if !waiting.isEmpty {
            ask(waiting.removeFirst(), context)
        } else {
            updateReading()
        }
    }

    /// Writes what the queue holds while the channel takes it.
    private func drain() {
        guard let context, !ended else { return }
        var wrote = false
        defer { if wrote { context.flush() } }
        if !context.channel.isWritable, subscription.queue.isClosed {
            end()
            context.close(promise: nil)
            return
        }
        if let pong = pongOwed, context.channel.isWritable {
            pongOwed = nil
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: pong)), promise: nil)
            wrote = true
        }
        while context.channel.isWritable {
            let frame: StreamFrame
            switch subscription.queue.poll() {
            case .empty: return
            case .closed:
                close(code: .goingAway, reason: "the stream ended; reconnect")
                return
            case .frame(let next): frame = next
            }
            if frame.kind == .heartbeat {
                context.write(
                    wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())), promise: nil)
            } else {
                context.write(
                    wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: frame.jsonBytes)), promise: nil)
            }
            wrote = true
            if frame.kind == .closed {
                // Application codes: 4001, the token expired (refresh it and reconnect); 4003,
                // the client may no longer follow the session (the access file changed).
                close(
                    code: .init(codeNumber: Int(frame.closeCode)),
                    reason: frame.closeCode == 4001 ? "token expired" : "forbidden")
                return
            }
        }
    }

    /// Sends a close frame, then closes the connection once it is written (10 s at most).
    private func close(code: WebSocketErrorCode, reason: String) {
        guard let context, !ended else { return }
        end()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(String(reason.utf8.prefix(120)) ?? "")
        context.writeThenClose(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
    }

    private func end() {
        guard !ended else { return }
        ended = true
        stalled.cancel()
        closer?.cancel()
        subscription.close()
    }
}

/// A token bucket: `burst` requests at once, refilled at `perSecond`.
struct RequestBudget {
    let perSecond: Int
    let burst: Int
    private var tokens: Double
    private var at: NIODeadline?

    init(perSecond: Int, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
        tokens = Double(burst)
    }

    /// Takes one request's token at `now`; false when none is left.
    mutating func take(at now: NIODeadline) -> Bool {
        if let at {
            let seconds = Double((now - at).nanoseconds) / 1e9
            tokens = min(Double(burst), tokens + max(0, seconds) * Double(perSecond))
        }
        at = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
