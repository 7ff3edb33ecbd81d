import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import NavigatorPort
import NavigatorWire

/// Serves `GET /v1/sessions/{id}/stream` — as Server-Sent Events, or as a WebSocket when the
/// request asks for the upgrade — inside the connection's channel pipeline: the one stream
/// implementation of each transport. Hummingbird gives each connection a task, which keeps the
/// high-water mark of its async frames for as long as the connection lives; a stream taken here
/// never reaches it, the connection's task ends (``StreamingHTTPChannel``), and the stream costs
/// its NIO channel, this handler (or ``WebSocketStreamHandler``) and its queue. Each event is one
/// write of a buffer encoded once per session, on the channel's event loop, only while the channel
/// is writable: a reader that falls behind leaves its events in the bounded ``StreamQueue``, and
/// gets a snapshot instead.
///
/// It sits right after the HTTP/1 request decoder, before Hummingbird's connection handling. Every
/// other request passes through untouched. A stream request that comes while Hummingbird still
/// owes responses to earlier requests on the connection waits for them (nothing more is read
/// meanwhile); a stream that cannot be opened (refused, malformed, over the limit) is answered here
/// with the API's refusal (``HTTPAPI/APIError/reply``), and the connection goes on.
final class StreamChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// Requests go to Hummingbird.
        case passing
        /// A stream request waits for Hummingbird's responses to the requests before it; its
        /// parts, and any that follow, wait here.
        case waitingTurn([HTTPServerRequestPart])
        /// A stream request is being authorized and subscribed; its parts wait here.
        case opening([HTTPServerRequestPart])
        case streaming(StreamSubscription, Scheduled<Void>?)
        case ended
    }

    private let api: HTTPAPI
    private var state = State.passing
    /// Requests passed to Hummingbird whose response it has not finished writing.
    private var responsesOwed = 0
    private var context: ChannelHandlerContext?
    /// Hummingbird's async channel once a request is passed on to it (made then, by
    /// `makeHummingbirdChannel`), or nil once the first request is a stream taken here (or the
    /// connection closed before any). The connection's task waits for it, and ends at once for a
    /// stream.
    let forHummingbird: EventLoopPromise<StreamingHTTPChannel.HummingbirdChannel?>
    private let makeHummingbirdChannel: () throws -> StreamingHTTPChannel.HummingbirdChannel
    private var decided = false
    /// The server began stopping, or the client closed its side, while a stream was opening.
    private var stopping = false
    /// Closes a connection whose client is too slow with its request (``armDeadline(_:)``).
    private var deadline: Scheduled<Void>?
    /// A request's head was read and its end not yet.
    private var midRequest = false
    /// A streaming client that reads nothing is cut off.
    private var stalled = StalledReader()
    /// The bound on what the request decoder holds, first in the pipeline: told of each part.
    private let headLimit: HeadLimit

    /// How long a new connection has to send its first request's head.
    private let firstRequestDeadline: TimeAmount
    /// How long a request's body may take after its head, and a connection may stay idle between
    /// requests.
    private let requestDeadline: TimeAmount

    init(
        api: HTTPAPI, eventLoop: any EventLoop, deadlines: (firstRequest: Duration, request: Duration),
        headLimit: HeadLimit, hummingbird: @escaping () throws -> StreamingHTTPChannel.HummingbirdChannel
    ) {
        self.api = api
        self.headLimit = headLimit
        firstRequestDeadline = .nanoseconds(Int64(deadlines.firstRequest / .nanoseconds(1)))
        requestDeadline = .nanoseconds(Int64(deadlines.request / .nanoseconds(1)))
        self.forHummingbird = eventLoop.makePromise()
        self.makeHummingbirdChannel = hummingbird
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // A connection that sends nothing, or half a request, does not hold its file descriptor.
        armDeadline(firstRequestDeadline)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        decide(false)
        end()
        self.context = nil
    }

    /// Closes the connection in `time` unless the client does its part first: the head of its
    /// first request within ``firstRequestDeadline`` of connecting; then each request's body
    /// within ``requestDeadline`` of its head, and the next request's head within that of the
    /// last response. Nothing is timed while a response is owed or the connection streams.
    private func armDeadline(_ time: TimeAmount) {
        deadline?.cancel()
        guard let context else { return }
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: time) { LingeringClose.start(channel) }
    }

    private func disarmDeadline() {
        deadline?.cancel()
        deadline = nil
    }

    /// Settles who serves the connection, once: Hummingbird (its async channel is made now, at
    /// the end of the pipeline, before the first request reaches it) or a stream.
    private func decide(_ hummingbird: Bool) {
        guard !decided else { return }
        decided = true
        guard hummingbird else { return forHummingbird.succeed(nil) }
        do {
            forHummingbird.succeed(try makeHummingbirdChannel())
        } catch {
            forHummingbird.fail(error)
            context?.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Once a stream is open the request decoder is gone: what the client sends comes as raw
        // bytes, dropped here (read as a request part, they trapped the process).
        switch state {
        case .streaming, .ended: return
        case .passing, .waitingTurn, .opening: break
        }
        let part = unwrapInboundIn(data)
        headLimit.partRead()
        switch part {
        case .head(let head):
            midRequest = true
            armDeadline(requestDeadline)
            if let refusal = api.refusal(
                host: head.headers.first(name: "host"), origin: head.headers.first(name: "origin"))
            {
                // Answered and closed: what the request still sends is not read.
                return refuseAndClose(refusal, context)
            }
        case .body:
            break
        case .end:
            midRequest = false
            disarmDeadline()
        }
        read(part, context)
    }

    /// A request that cannot be parsed as HTTP/1.1 (two Content-Lengths, Content-Length with
    /// Transfer-Encoding, a negative length, a broken chunk, an oversize head) is answered 400 and
    /// the connection closed: its framing cannot be trusted for anything that follows.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError else { return context.fireErrorCaught(error) }
        if case .ended = state { return }  // answered already
        refuseAndClose(
            HTTPAPI.APIError(
                .malformed,
                "the request is not valid HTTP/1.1 (\(error)); expected a request line, header fields with at most one Content-Length (not negative) or Transfer-Encoding: chunked, and a body of that length",
                status: 400), context)
    }

    /// Answers `refusal` and closes the connection, reading nothing more — at once if a response
    /// is owed already (the answer cannot go before it).
    private func refuseAndClose(_ refusal: HTTPAPI.APIError, _ context: ChannelHandlerContext) {
        disarmDeadline()
        let canAnswer: Bool
        switch state {
        case .passing: canAnswer = responsesOwed == 0
        case .waitingTurn, .opening, .streaming, .ended: canAnswer = false
        }
        end()
        decide(false)
        guard canAnswer else { return context.close(promise: nil) }
        // The encoder is past: the answer goes out as bytes (no HTTP/1 state to keep), then the
        // connection lingers (what the client still sends is dropped).
        let channel = context.channel
        if let encoder = try? context.pipeline.syncOperations.handler(type: HTTPResponseEncoder.self) {
            context.pipeline.syncOperations.removeHandler(encoder, promise: nil)
        }
        let written = context.writeAndFlush(NIOAny(ByteBuffer(bytes: refusal.reply.closingResponse)))
        LingeringClose.start(channel, after: written)
    }

    private func read(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        switch state {
        case .passing:
            pass(part, context)
        case .waitingTurn(var parts):
            parts.append(part)
            state = .waitingTurn(parts)
        case .opening(var parts):
            parts.append(part)
            state = .opening(parts)
        case .streaming, .ended:
            break  // a stream reads nothing more from its client
        }
    }

    /// Passes a request part on to Hummingbird, counting the requests it owes a response; a
    /// stream request is kept here instead, opened at once or once the responses owed are written.
    private func pass(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        if case .head(let head) = part, head.method == .GET, Self.streamedSession(head.uri) != nil {
            // Nothing more is read until the stream is open or answered.
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            if responsesOwed == 0 {
                open(head, context)
            } else {
                state = .waitingTurn([part])
            }
            return
        }
        if case .head = part {
            decide(true)
            responsesOwed += 1
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// Hummingbird's responses pass here; the end of each settles one request passed to it. A
    /// stream request waiting for its turn opens once none is owed.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let ended = if case .end = unwrapOutboundIn(data) { true } else { false }
        if ended { responsesOwed = max(0, responsesOwed - 1) }
        context.write(data, promise: promise)
        if ended, responsesOwed == 0, !midRequest, case .passing = state { armDeadline(requestDeadline) }
        if ended, responsesOwed == 0, case .waitingTurn(let parts) = state, case .head(let head) = parts.first {
            state = .passing
            open(head, context, then: Array(parts.dropFirst()))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        decide(false)
        end()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        if case .streaming = state {
            stalled.update(context, timeout: api.stalledReaderTimeout)
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is stopping (a stream ends: its client reconnects elsewhere or later), or
        // the client closed its side (the server allows half-closure; a stream has no more use).
        if Self.endsStream(event) {
            switch state {
            case .streaming: finish()
            case .opening, .waitingTurn: stopping = true
            case .passing where !decided && !midRequest:
                // A client that leaves before its first request: nothing to answer.
                if (event as? ChannelEvent) == .inputClosed { context.close(promise: nil) }
            case .passing, .ended: break
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Whether a pipeline event ends a stream: the server is stopping, or the client closed its
    /// sending side (the server allows half-closure; a stream has no more use for the connection).
    static func endsStream(_ event: Any) -> Bool {
        event is ChannelShouldQuiesceEvent || (event as? ChannelEvent) == .inputClosed
    }

    /// The session of a stream path (`/v1/sessions/{id}/stream`, any query), nil for other paths.
    static func streamedSession(_ target: String?) -> String? {
        guard let target else { return nil }
        let path = target.prefix { $0 != "?" }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count == 5, segments[0].isEmpty, segments[1] == "v1", segments[2] == "sessions",
            segments[4] == "stream", !segments[3].isEmpty
        else { return nil }
        return String(segments[3])
    }

    /// Authorizes and subscribes the stream that `head` asks for, off the event loop; `then` are
    /// the parts read after it so far.
    private func open(_ head: HTTPRequestHead, _ context: ChannelHandlerContext, then: [HTTPServerRequestPart] = []) {
        state = .opening([.head(head)] + then)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (api, loop) = (self.api, context.eventLoop)
        let rawSession = Self.streamedSession(head.uri) ?? ""
        let query = head.uri.firstIndex(of: "?").map { String(head.uri[$0...].dropFirst()) }
        let lastEventID = head.headers.first(name: "last-event-id")
        let authorization = head.headers.first(name: "authorization")
        let upgrade = head.headers.contains(name: "upgrade")
        Task {
            let opened: Result<(StreamSubscription, Date?), HTTPAPI.APIError>
            do throws(HTTPAPI.APIError) {
                if upgrade, !WebSocketStreamHandler.isUpgrade(head) {
                    throw HTTPAPI.APIError(
                        .malformed,
                        "an upgrade of a stream must be a WebSocket one (Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key); expected that, or no upgrade for Server-Sent Events"
                    )
                }
                opened = .success(
                    try await api.openStream(
                        rawSession: rawSession, query: query, lastEventID: lastEventID, authorization: authorization))
            } catch {
                opened = .failure(error)
            }
            loop.execute { bound.value.opened(opened) }
        }
    }

    private func opened(_ opened: Result<(StreamSubscription, Date?), HTTPAPI.APIError>) {
        guard let context, case .opening(let parts) = state, context.channel.isActive else {
            if case .success(let (subscription, _)) = opened { subscription.close() }
            return
        }
        if stopping {
            if case .success(let (subscription, _)) = opened { subscription.close() }
            decide(false)
            end()
            context.close(promise: nil)
            return
        }
        context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
        guard case .head(let request) = parts.first else { return }
        let (subscription, expiry): (StreamSubscription, Date?)
        switch opened {
        case .success(let value):
            (subscription, expiry) = value
        case .failure(let refusal):
            refuse(request, refusal, context)
            // The parts of the refused request are done with; what came after it goes on.
            state = .passing
            if !midRequest { armDeadline(requestDeadline) }
            let rest = parts.drop { if case .end = $0 { false } else { true } }.dropFirst()
            for part in rest { read(part, context) }
            context.fireChannelReadComplete()
            return
        }
        decide(false)
        disarmDeadline()
        // What is left of HTTP/1 on this connection goes: the request decoder and its head limit
        // (what the client sends now is read and dropped) and Hummingbird's idle timeout, which sees none of the
        // stream's traffic and must not close it.
        let operations = context.pipeline.syncOperations
        if let decoder = try? operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            operations.removeHandler(decoder, promise: nil)
        }
        if let idle = try? operations.handler(type: HTTPConnectionStateHandler.self) {
            operations.removeHandler(idle, promise: nil)
        }
        operations.removeHandler(headLimit, promise: nil)
        if let accept = WebSocketStreamHandler.acceptKey(request) {
            becomeWebSocket(request, accept: accept, subscription, expiry, context)
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        state = .streaming(subscription, subscription.expire(at: expiry, on: context.eventLoop))
        let headers = HTTPHeaders([
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"),
        ])
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers))),
            promise: nil)
        // How long EventSource waits before reconnecting.
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "retry: 1000\n\n")))), promise: nil)
        context.flush()
        let loop = context.eventLoop
        subscription.queue.setNotify { loop.execute { bound.value.drain() } }
    }

    /// Answers a stream request that cannot be opened with the API's refusal.
    private func refuse(_ request: HTTPRequestHead, _ refusal: HTTPAPI.APIError, _ context: ChannelHandlerContext) {
        let reply = refusal.reply
        var headers = HTTPHeaders([
            ("Content-Type", reply.contentType), ("Cache-Control", "no-store"),
            ("Content-Length", "\(reply.body.count)"),
        ])
        for (name, value) in reply.headers { headers.add(name: name, value: value) }
        // After a request that asked for an upgrade (or a CONNECT) the request decoder parses
        // nothing more: kept alive, the connection would read the client's next request and never
        // answer it. It closes after the answer instead.
        let upgrade = request.headers.contains(name: "upgrade") || request.method == .CONNECT
        if upgrade { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(
                .head(
                    HTTPResponseHead(
                        version: request.version, status: HTTPResponseStatus(statusCode: reply.code), headers: headers))
            ),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: reply.body)))), promise: nil)
        if request.isKeepAlive && !upgrade {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            context.writeThenClose(wrapOutboundOut(.end(nil)))
        }
    }

    /// The upgrade to WebSocket, done here: `101 Switching Protocols`, then the WebSocket frame
    /// codec and a ``WebSocketStreamHandler`` take the place of HTTP/1 and of this handler.
    private func becomeWebSocket(
        _ request: HTTPRequestHead, accept: String, _ subscription: StreamSubscription, _ expiry: Date?,
        _ context: ChannelHandlerContext
    ) {
        state = .ended
        let headers = HTTPHeaders([
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", accept),
        ])
        context.writeAndFlush(
            wrapOutboundOut(
                .head(HTTPResponseHead(version: request.version, status: .switchingProtocols, headers: headers))),
            promise: nil)
        let operations = context.pipeline.syncOperations
        do {
            if let encoder = try? operations.handler(type: HTTPResponseEncoder.self) {
                operations.removeHandler(encoder, promise: nil)
            }
            let stream = WebSocketStreamHandler(api: api, subscription: subscription, expiry: expiry)
            try operations.addHandlers(
                [
                    ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketStreamHandler.maxFrameSize)),
                    WebSocketFrameEncoder(), stream,
                ],
                position: .after(self))
            operations.removeHandler(context: context, promise: nil)
        } catch {
            subscription.close()
            context.close(promise: nil)
        }
    }

    /// Writes what the queue holds while the channel takes it.
    private func drain() {
        guard let context, case .streaming(let subscription, _) = state else { return }
        var wrote = false
        defer { if wrote { context.flush() } }
        // A stream that ended while its client reads nothing: nothing more would be written.
        if !context.channel.isWritable, subscription.queue.isClosed {
            end()
            context.close(promise: nil)
            return
        }
        while context.channel.isWritable {
            let frame: StreamFrame
            switch subscription.queue.poll() {
            case .empty: return
            case .closed:
                finish()
                return
            case .frame(let next): frame = next
            }
            context.write(wrapOutboundOut(.body(.byteBuffer(frame.serverSentEvent))), promise: nil)
            wrote = true
            if frame.kind == .closed {
                finish()
                return
            }
        }
    }

    /// Ends the response and the connection.
    private func finish() {
        guard let context, case .streaming = state else { return }
        end()
        context.writeThenClose(wrapOutboundOut(.end(nil)))
    }

    /// Closes the subscription of a running stream; one still opening is closed by `opened`.
    private func end() {
        stalled.cancel()
        if case .streaming(let subscription, let closer) = state {
            closer?.cancel()
            subscription.close()
        }
        state = .ended
    }
}

extension ChannelHandlerContext {
    /// Writes and flushes `data`, then closes the channel once it went out (whatever was written
    /// before it included) — or after ten seconds of a client that does not read.
    func writeThenClose(_ data: NIOAny) {
        let channel = self.channel
        let written = eventLoop.makePromise(of: Void.self)
        writeAndFlush(data, promise: written)
        let timeout = eventLoop.scheduleTask(in: .seconds(10)) { channel.close(promise: nil) }
        written.futureResult.whenComplete { _ in
            timeout.cancel()
            channel.close(promise: nil)
        }
    }
}

/// Hummingbird's HTTP/1 channel with a ``StreamChannelHandler`` right after the request
/// decoder of each connection. The pipeline is Hummingbird's (``HTTP1Channel``'s), except that the
/// async channel Hummingbird serves requests through is made only when the first request is one
/// for Hummingbird: a connection whose first request is a stream never has one, and its task ends
/// at once.
struct StreamingHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    typealias HummingbirdChannel = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let idleTimeout: Duration
    let api: HTTPAPI
    let connections: ConnectionLimit
    /// The first request's deadline and every later one's (``StreamChannelHandler``).
    let deadlines: (firstRequest: Duration, request: Duration)

    struct Value: ServerChildChannelValue {
        let channel: any NIOCore.Channel
        /// Hummingbird's async channel, or nil when the connection became a stream.
        let hummingbird: EventLoopFuture<HummingbirdChannel?>
    }

    func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<Value> {
        let (api, idleTimeout, deadlines) = (self.api, self.idleTimeout, self.deadlines)
        guard connections.admit(channel) else {
            return channel.eventLoop.makeSucceededFuture(
                Value(channel: channel, hummingbird: channel.eventLoop.makeSucceededFuture(nil)))
        }
        return channel.eventLoop.makeCompletedFuture {
            let operations = channel.pipeline.syncOperations
            try operations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: .init())
            // Each connection keeps its receive buffer for the next read: 2 KiB by default, most
            // of an idle stream's memory. Requests start with 512 bytes, doubled while they fill.
            try channel.syncOptions?.setOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536))
            let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            let headLimit = HeadLimit()
            try operations.addHandler(headLimit, position: .first)
            let streams = StreamChannelHandler(
                api: api, eventLoop: channel.eventLoop, deadlines: deadlines, headLimit: headLimit
            ) {
                try HummingbirdChannel(
                    wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
            }
            try operations.addHandler(streams, position: .after(decoder))
            try operations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try operations.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
            return Value(channel: channel, hummingbird: streams.forHummingbird.futureResult)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard let channel = try? await value.hummingbird.get() else { return }
        await handleHTTP(asyncChannel: channel, logger: logger)
    }
}
