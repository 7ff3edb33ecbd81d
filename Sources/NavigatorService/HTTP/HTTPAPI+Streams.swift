import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NavigatorWire

extension HTTPAPI {
    static let lastEventID = HTTPFields.Element.Name("Last-Event-ID")!
    static let accelBuffering = HTTPFields.Element.Name("X-Accel-Buffering")!

    /// `GET /v1/sessions/{id}/stream`: the session as Server-Sent Events — a snapshot first (or,
    /// resuming from `Last-Event-ID` or `?since=epoch:seq`, `recovered` and only the batches
    /// missed), then each batch with its position as the event id, the session's rejections,
    /// and a heartbeat comment when idle.
    func registerStreams(on router: Router<BasicRequestContext>) {
        router.get("/v1/sessions/:id/stream") { [self] request, context in
            do {
                let session = try Self.session(context).get()
                if let problem = SessionID.problem(with: session) { throw APIError(.invalidSession, problem) }
                let expiry = try await authorize(request, .follow(session: session))
                let since = try Self.since(request)
                let subscription = try await hub.subscribe(session, since: since)
                var headers = HTTPFields()
                headers[.contentType] = "text/event-stream"
                headers[.cacheControl] = "no-cache"
                headers[Self.accelBuffering] = "no"
                return Response(
                    status: .ok, headers: headers,
                    body: ResponseBody { writer in
                        let closer = Self.closeAtExpiry(expiry, subscription)
                        defer {
                            closer?.cancel()
                            subscription.close()
                        }
                        // How long EventSource waits before reconnecting.
                        try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
                        while let frame = await subscription.next() {
                            try await writer.write(frame.serverSentEvent)
                            if frame.kind == .closed { break }
                        }
                        try await writer.finish(nil)
                    })
            } catch let error as APIError {
                return error.response
            }
        }
    }

    /// Secure mode: when the caller's token expires, the stream gets a `closed` event saying so
    /// and ends — never kept open past it, never downgraded.
    static func closeAtExpiry(_ expiry: Date?, _ subscription: StreamSubscription) -> Task<Void, Never>? {
        guard let expiry else { return nil }
        return Task {
            try? await Task.sleep(for: .milliseconds(StreamSubscription.milliseconds(until: expiry)))
            guard !Task.isCancelled else { return }
            subscription.queue.push(.frame(expiredFrame))
        }
    }

    /// The last event of a stream whose bearer token expired.
    static let expiredFrame: StreamFrame = {
        var event = Navigator_V1_StreamEvent()
        event.closed =
            "the bearer token expired; get a new one (navctl token) and reconnect with it, resuming from the last id"
        return StreamFrame(.closed, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
    }()

    /// The position a stream resumes from: `Last-Event-ID` (what EventSource sends on a
    /// reconnect), else `?since=`; nil for neither.
    static func since(_ request: Request) throws -> (epoch: UInt64, seq: UInt64)? {
        let text = request.headers[lastEventID] ?? request.uri.queryParameters["since"].map(String.init)
        guard let text, !text.isEmpty else { return nil }
        guard let position = StreamFrame.position(text) else {
            throw APIError(
                .malformed,
                "the position to resume from, \(LogText(text)), is not epoch:seq (two whole numbers, as the events' ids)"
            )
        }
        return position
    }
}

extension HTTPAPI {
    /// The session and resume position of a WebSocket upgrade request for
    /// `/v1/sessions/{id}/stream`; nil when it is not one this API can serve (the request then
    /// goes on as plain HTTP, and the SSE route answers it — with the error, if there is one).
    func webSocketTarget(path: String, lastEventID: String?, authorization: String?) async -> (
        session: String, since: (epoch: UInt64, seq: UInt64)?, expiry: Date?
    )? {
        guard let rawSession = StreamChannelHandler.streamedSession(path) else { return nil }
        let query = path.firstIndex(of: "?").map { String(path[$0...].dropFirst()) }
        // Refused (the SSE route answers the same request with the refusal) or not a stream: nil.
        return try? await streamTarget(
            rawSession: rawSession, query: query, lastEventID: lastEventID, authorization: authorization)
    }

    /// A WebSocket stream: the same events as SSE, one `StreamEvent` in JSON per text message
    /// (heartbeats are WebSocket pings); the client may send `navigator.v1.Request`s in JSON —
    /// a client event or a snapshot of this session — each answered by a `StreamEvent.reply`.
    func serveWebSocket(
        session: String, since: (epoch: UInt64, seq: UInt64)?, expiry: Date?, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async throws {
        let subscription: StreamSubscription
        do {
            subscription = try await hub.subscribe(session, since: since)
        } catch let error as APIError {
            // 1013: try again later (the stream limit, a stopping service).
            try await outbound.close(.init(codeNumber: 1013), reason: String(error.message.prefix(120)))
            return
        }
        let closer = Self.closeAtExpiry(expiry, subscription)
        defer {
            closer?.cancel()
            subscription.close()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while let frame = await subscription.next() {
                    guard frame.kind != .heartbeat else { continue }
                    try await outbound.writeTextMessage(String(buffer: frame.jsonBytes))
                    if frame.kind == .closed {
                        // 4001: the token expired (an application code: refresh and reconnect).
                        try await outbound.close(.init(codeNumber: 4001), reason: "token expired")
                        return
                    }
                }
            }
            group.addTask { [self] in
                for try await message in inbound.messages(maxSize: maxBodyBytes) {
                    let reply = await answer(message, session: session)
                    var event = Navigator_V1_StreamEvent()
                    event.reply = reply
                    let frame = StreamFrame(.reply, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
                    guard await subscription.queue.pushReply(frame) else { return }
                }
            }
            // Either side ending ends the stream: the client closed, or the stream was closed.
            try await group.next()
            group.cancelAll()
            subscription.close()
        }
    }

    /// The answer to one message a WebSocket client sent: a Request in JSON whose kind is a
    /// client event or a snapshot of the streamed session.
    func answer(_ message: WebSocketMessage, session: String) async -> Navigator_V1_Reply {
        var reply = Navigator_V1_Reply()
        func refuse(_ code: Navigator_V1_RejectCode, _ text: String) -> Navigator_V1_Reply {
            reply.rejected = .with {
                $0.code = code
                $0.message = text
            }
            return reply
        }
        guard case .text(let text) = message else {
            return refuse(.malformed, "a binary message; expected text: a navigator.v1.Request in JSON")
        }
        var request: Navigator_V1_Request
        do {
            request = try Self.decode(Navigator_V1_Request.self, Array(text.utf8))
        } catch let error as APIError {
            return refuse(error.code, error.message)
        } catch {
            return refuse(.malformed, "\(error)")
        }
        reply.requestID = request.requestID
        switch request.kind {
        case .clientEvent(var event):
            if !event.session.isEmpty && event.session != session {
                return refuse(
                    .sessionMismatch,
                    "the event's session \(LogText(event.session)) differs from the stream's \(LogText(session)); leave it out"
                )
            }
            event.session = session
            request.clientEvent = event
        case .snapshot(var snapshot):
            snapshot.session = session
            request.snapshot = snapshot
        default:
            return refuse(
                .unknownRequest,
                "a WebSocket stream takes requests of kind client_event or snapshot for its own session; use the HTTP API or the requests socket for others"
            )
        }
        do {
            var answered = try await client().request(request.kind!)
            answered.requestID = request.requestID
            return answered
        } catch {
            return refuse(.unavailable, "navigatord did not answer: \(error); retry")
        }
    }
}
