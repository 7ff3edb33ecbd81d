import Hummingbird
import NIOCore
import NavigatorPort
import NavigatorWire

/// Addresses, responses and the fallback of ``HTTPServer``.
public enum HTTPEndpoint {
    /// `host:port`, `[v6]:port`, `localhost:port` -> (host, port).
    public static func parse(_ address: String) throws(HTTPServerError) -> (String, Int) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (0...65535).contains(port)
        else {
            throw HTTPServerError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host.first != "[" else {
            throw HTTPServerError("HTTP address \(address) is not host:port (for IPv6: [address]:port)")
        }
        return (host == "localhost" ? "127.0.0.1" : host, port)
    }

    static func text(_ address: SocketAddress, host: String) -> String {
        let ip = address.ipAddress ?? host
        let port = address.port ?? 0
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    static func response(_ reply: HTTPReply) -> Response {
        var headers: HTTPFields = [.contentType: reply.contentType, .cacheControl: "no-store"]
        for (name, value) in reply.headers {
            if let name = HTTPFields.Element.Name(name) { headers.append(.init(name: name, value: value)) }
        }
        return Response(
            status: .init(code: reply.code, reasonPhrase: String(reply.status.drop { $0 != " " }.dropFirst())),
            headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
    }

    /// Answers what no route matched: 405 for a served path asked with another method, 404
    /// otherwise, each listing what there is (as JSON for the API's paths).
    struct Fallback: RouterMiddleware {
        typealias Context = BasicRequestContext
        let paths: [String]

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
            async throws -> Response
        {
            do {
                return try await next(request, context)
            } catch let error as HTTPError where error.status == .notFound {
                if request.uri.path.hasPrefix("/v1/") {
                    return apiFallback(request)
                }
                guard paths.contains(request.uri.path) else {
                    return HTTPEndpoint.response(
                        HTTPReply(404, "no such path; try \(paths.joined(separator: ", "))\n"))
                }
                var reply = HTTPReply(405, "\(request.method) is not served on \(request.uri.path); use GET\n")
                reply.headers = [("Allow", "GET, HEAD")]
                return HTTPEndpoint.response(reply)
            }
        }

        func apiFallback(_ request: Request) -> Response {
            var reply = Navigator_V1_Reply()
            let path = request.uri.path
            guard let method = HTTPAPI.method(of: path) else {
                reply.rejected = .with {
                    $0.code = .unknownRequest
                    $0.message =
                        "no API path \(LogText(path)); expected one of \(HTTPAPI.paths.map { "\($0.method) \($0.pattern)" }.joined(separator: ", "))"
                }
                return HTTPAPI.response(404, reply)
            }
            reply.rejected = .with {
                $0.code = .unknownRequest
                $0.message = "\(request.method) is not served on \(LogText(path)); use \(method)"
            }
            var answer = HTTPAPI.reply(405, reply)
            answer.headers.append(("Allow", method))
            return HTTPEndpoint.response(answer)
        }
    }
}
