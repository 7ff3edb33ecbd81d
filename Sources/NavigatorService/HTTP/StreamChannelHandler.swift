import Foundation
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import NavigatorWire

/// Serves `GET /v1/sessions/{id}/stream` — as Server-Sent Events, or as a WebSocket when the
/// request asks for the upgrade — inside the connection's channel pipeline. Hummingbird gives each
/// connection a task, which keeps the high-water mark of its async frames (about 9 KiB once a
/// request has been handled, 16 KiB inside a handler) for as long as the connection lives; a
/// stream taken here never reaches it, the connection's task ends (``StreamingHTTPChannel``), and
/// the stream costs its NIO channel, this handler (or ``WebSocketStreamHandler``) and its queue.
/// Each event is one write of a buffer encoded once per session, on the channel's event loop,
/// only while the channel is writable: a reader that falls behind leaves its events in the
/// bounded ``StreamQueue``, which turns them into a snapshot.
///
/// It sits right after the HTTP/1 request decoder, before the WebSocket upgrade negotiation and
/// Hummingbird's connection handling. A request it does not take — any other, a stream request
/// while a response of Hummingbird's is still being written — passes through untouched; another
/// upgrade request removes it from the pipeline; a stream request it cannot serve (refused,
/// malformed, over the limit) is passed on after all, and Hummingbird's route or WebSocket upgrade
/// answers it with the error, so every refusal is written in one place.
final class StreamChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// Requests go to Hummingbird.
        case passing
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
    /// Whether Hummingbird has the connection to serve: false once the first request is a
    /// stream taken here (or the connection closed before any), true once one is passed on.
    /// The connection's task waits for it, and ends at once for a stream.
    let forHummingbird: EventLoopPromise<Bool>
    private var decided = false
    /// The server began stopping, or the client closed its side, while a stream was opening.
    private var stopping = false

    init(api: HTTPAPI, eventLoop: any EventLoop) {
        self.api = api
        self.forHummingbird = eventLoop.makePromise()
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        decide(false)
        end()
        self.context = nil
    }

    private func decide(_ hummingbird: Bool) {
        guard !decided else { return }
        decided = true
        forHummingbird.succeed(hummingbird)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .passing:
            if !pass(unwrapInboundIn(data), context, mayOpen: true) {
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            }
        case .opening(var parts):
            parts.append(unwrapInboundIn(data))
            state = .opening(parts)
        case .streaming, .ended:
            break  // a stream reads nothing more from its client (raw bytes once the decoder is gone)
        }
    }

    /// Passes a request part on to Hummingbird, counting the requests it owes a response; a
    /// stream request (`mayOpen`, nothing owed) is opened here instead. False after an upgrade
    /// request: what follows may not be HTTP, and this handler must leave the pipeline.
    private func pass(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext, mayOpen: Bool) -> Bool {
        if case .head(let head) = part {
            if mayOpen, responsesOwed == 0, head.method == .GET,
                !head.headers.contains(name: "upgrade") || WebSocketStreamHandler.isUpgrade(head),
                let session = Self.streamedSession(head.uri)
            {
                open(session, head, context)
                return true
            }
            decide(true)
            responsesOwed += 1
            context.fireChannelRead(wrapInboundOut(part))
            // A WebSocket (or other) upgrade.
            return !head.headers.contains(name: "upgrade")
        }
        context.fireChannelRead(wrapInboundOut(part))
        return true
    }

    /// Hummingbird's responses pass here; the end of each settles one request passed to it.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { responsesOwed = max(0, responsesOwed - 1) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        decide(false)
        end()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is stopping (a stream ends: its client reconnects elsewhere or later), or
        // the client closed its side (the server allows half-closure; a stream has no more use).
        if Self.endsStream(event) {
            switch state {
            case .streaming: finish()
            case .opening: stopping = true
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

    private func open(_ rawSession: String, _ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        state = .opening([.head(head)])
        // Nothing more is read until the stream is open or passed on.
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (api, loop) = (self.api, context.eventLoop)
        let query = head.uri.firstIndex(of: "?").map { String(head.uri[$0...].dropFirst()) }
        let lastEventID = head.headers.first(name: "last-event-id")
        let authorization = head.headers.first(name: "authorization")
        Task {
            let opened: (StreamSubscription, Date?)?
            do {
                opened = try await api.openStream(
                    rawSession: rawSession, query: query, lastEventID: lastEventID, authorization: authorization)
            } catch {
                opened = nil  // the route answers the same request with the error
            }
            loop.execute { bound.value.opened(opened) }
        }
    }

    private func opened(_ opened: (StreamSubscription, Date?)?) {
        guard let context, case .opening(let parts) = state, context.channel.isActive else {
            opened?.0.close()
            return
        }
        if stopping {
            opened?.0.close()
            decide(false)
            end()
            context.close(promise: nil)
            return
        }
        context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
        guard let (subscription, expiry) = opened else {
            // Hummingbird answers it (with the error); the parts that came meanwhile follow,
            // each counted, none opened here.
            state = .passing
            var stays = true
            for part in parts where !pass(part, context, mayOpen: false) { stays = false }
            context.fireChannelReadComplete()
            if !stays { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
            return
        }
        decide(false)
        // What is left of HTTP/1 on this connection goes: the request decoder (what the client
        // sends now is read and dropped), the upgrade negotiation, and Hummingbird's idle
        // timeout, which sees none of the stream's traffic and must not close it.
        let operations = context.pipeline.syncOperations
        if let decoder = try? operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            operations.removeHandler(decoder, promise: nil)
        }
        if let upgrade = try? operations.handler(
            type: NIOTypedHTTPServerUpgradeHandler<HTTP1WebSocketUpgradeChannel.UpgradeResult>.self)
        {
            operations.removeHandler(upgrade, promise: nil)
        }
        if let idle = try? operations.handler(type: HTTPConnectionStateHandler.self) {
            operations.removeHandler(idle, promise: nil)
        }
        if case .head(let request) = parts.first, let accept = WebSocketStreamHandler.acceptKey(request) {
            becomeWebSocket(request, accept: accept, subscription, expiry, context)
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        state = .streaming(subscription, subscription.expire(at: expiry, on: context.eventLoop))
        guard case .head(let request) = parts.first else { return }
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
                [ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 16)), WebSocketFrameEncoder(), stream],
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
            switch subscription.poll() {
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

/// Hummingbird's HTTP/1 channel with WebSocket upgrades, with a ``StreamChannelHandler`` put
/// right after the request decoder of each connection.
/// A connection's task ends as soon as its first request is a stream taken by the handler.
struct StreamingHTTPChannel: ServerChildChannel {
    let inner: HTTP1WebSocketUpgradeChannel
    let api: HTTPAPI

    struct Value: ServerChildChannelValue {
        let inner: HTTP1WebSocketUpgradeChannel.Value
        let forHummingbird: EventLoopFuture<Bool>
        var channel: any NIOCore.Channel { inner.channel }
    }

    func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<Value> {
        let api = self.api
        return inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // Each connection keeps its receive buffer for the next read: 2 KiB by default, most
            // of an idle stream's memory. Requests start with 512 bytes, doubled while they fill.
            try channel.syncOptions?.setOption(
                .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536))
            let operations = channel.pipeline.syncOperations
            let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            let streams = StreamChannelHandler(api: api, eventLoop: channel.eventLoop)
            try operations.addHandler(streams, position: .after(decoder))
            return Value(inner: value, forHummingbird: streams.forHummingbird.futureResult)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard (try? await value.forHummingbird.get()) == true else { return }
        await inner.handle(value: value.inner, logger: logger)
    }
}

extension HTTPAPI {
    /// What a stream request asks for, checked as the SSE route checks it: the session (its raw,
    /// percent-encoded form from the path), the caller's authorization (`Authorization` header or
    /// `?access_token=`; the token's expiry) and where to resume (`Last-Event-ID`, else
    /// `?since=epoch:seq`). Throws the refusal.
    func streamTarget(rawSession: String, query: String?, lastEventID: String?, authorization: String?)
        async throws -> (session: String, since: (epoch: UInt64, seq: UInt64)?, expiry: Date?)
    {
        guard let session = rawSession.removingPercentEncoding, SessionID.problem(with: session) == nil else {
            throw APIError(.invalidSession, "not a session id")
        }
        var accessToken: String?
        var sinceText = lastEventID
        for pair in (query ?? "").split(separator: "&") {
            if pair.hasPrefix("access_token=") { accessToken = String(pair.dropFirst(13)).removingPercentEncoding }
            if pair.hasPrefix("since="), sinceText?.isEmpty ?? true {
                sinceText = String(pair.dropFirst(6)).removingPercentEncoding ?? ""
            }
        }
        let expiry = try await authorize(header: authorization, query: accessToken, .follow(session: session))
        guard let sinceText, !sinceText.isEmpty else { return (session, nil, expiry) }
        guard let since = StreamFrame.position(sinceText) else { throw APIError(.malformed, "not epoch:seq") }
        return (session, since, expiry)
    }

    /// Opens a stream for a request taken by ``StreamChannelHandler``.
    func openStream(rawSession: String, query: String?, lastEventID: String?, authorization: String?) async throws
        -> (StreamSubscription, Date?)
    {
        let target = try await streamTarget(
            rawSession: rawSession, query: query, lastEventID: lastEventID, authorization: authorization)
        return (try await hub.subscribe(target.session, since: target.since), target.expiry)
    }
}
