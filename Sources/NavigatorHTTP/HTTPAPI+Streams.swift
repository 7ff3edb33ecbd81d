import Foundation
import NIOCore
import NavigatorPort
import NavigatorWire

extension HTTPAPI {
    /// The last event of a stream whose bearer token expired.
    static let expiredFrame: StreamFrame = {
        var event = Navigator_V1_StreamEvent()
        event.closed =
            "the bearer token expired; get a new one (navctl token) and reconnect with it, resuming from the last id"
        return StreamFrame(.closed, position: nil, json: (try? event.jsonUTF8Bytes()) ?? [])
    }()

    /// What a stream request (`GET /v1/sessions/{id}/stream`) asks for, checked: the session (its
    /// raw, percent-encoded form from the path), the caller (`Authorization` header or
    /// `?access_token=`; the token's expiry) and where to resume (`Last-Event-ID`, else
    /// `?since=epoch:seq`). Throws the refusal.
    func streamTarget(rawSession: String, query: String?, lastEventID: String?, authorization: String?)
        async throws(APIError) -> (session: String, since: StreamPosition?, caller: Caller, expiry: Date?)
    {
        var sinceText = lastEventID
        for pair in (query ?? "").split(separator: "&") where pair.hasPrefix("since=") && (sinceText?.isEmpty ?? true) {
            sinceText = String(pair.dropFirst(6)).removingPercentEncoding ?? ""
        }
        let (caller, expiry) = try await authenticate(
            header: authorization, query: try Self.accessToken(inQuery: query))
        guard let session = rawSession.removingPercentEncoding else {
            throw APIError(
                .invalidSession, "the session in the path, \(LogText(rawSession)), is not valid percent-encoding")
        }
        guard let sinceText, !sinceText.isEmpty else { return (session, nil, caller, expiry) }
        guard let since = StreamPosition(sinceText) else {
            throw APIError(
                .malformed,
                "the position to resume from, \(LogText(sinceText)), is not epoch:seq (two whole numbers, as the events' ids)"
            )
        }
        return (session, since, caller, expiry)
    }

    /// Opens a stream for a request taken by ``StreamChannelHandler``.
    func openStream(rawSession: String, query: String?, lastEventID: String?, authorization: String?)
        async throws(APIError) -> (StreamSubscription, Date?)
    {
        let target = try await streamTarget(
            rawSession: rawSession, query: query, lastEventID: lastEventID, authorization: authorization)
        return (try hub.subscribe(target.session, since: target.since, as: target.caller), target.expiry)
    }

    /// The answer to one message a WebSocket client sent: a Request in JSON whose kind is a
    /// client event or a snapshot of the streamed session, asked as the stream's caller.
    func answer(_ message: ByteBuffer, isText: Bool, session: String, caller: Caller) async -> Navigator_V1_Reply {
        var reply = Navigator_V1_Reply()
        func refuse(_ code: Navigator_V1_RejectCode, _ text: String) -> Navigator_V1_Reply {
            reply.rejected = .with {
                $0.code = code
                $0.message = text
            }
            return reply
        }
        guard isText else {
            return refuse(.malformed, "a binary message; expected text: a navigator.v1.Request in JSON")
        }
        var request: Navigator_V1_Request
        do {
            request = try Self.decode(Navigator_V1_Request.self, Array(message.readableBytesView))
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
        var answered = await port.ask(request, as: caller)
        answered.requestID = request.requestID  // the client's, even when it left it empty
        return answered
    }
}
