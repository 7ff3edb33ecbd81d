import Hummingbird
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
                try checkAccess()
                let session = try Self.session(context).get()
                if let problem = SessionID.problem(with: session) { throw APIError(.invalidSession, problem) }
                let since = try Self.since(request)
                let subscription = try await hub.subscribe(session, since: since)
                var headers = HTTPFields()
                headers[.contentType] = "text/event-stream"
                headers[.cacheControl] = "no-cache"
                headers[Self.accelBuffering] = "no"
                return Response(
                    status: .ok, headers: headers,
                    body: ResponseBody { writer in
                        defer { subscription.close() }
                        // How long EventSource waits before reconnecting.
                        try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
                        while let frame = await subscription.next() {
                            try await writer.write(ByteBuffer(bytes: frame.serverSentEvent))
                        }
                        try await writer.finish(nil)
                    })
            } catch let error as APIError {
                return error.response
            }
        }
    }

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
