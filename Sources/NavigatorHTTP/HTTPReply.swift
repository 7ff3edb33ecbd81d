/// What navigatord answers on one HTTP path.
struct HTTPReply: Sendable {
    var code: Int
    var contentType: String
    var body: [UInt8]
    /// More header fields (`Retry-After`, `WWW-Authenticate`, `Allow`).
    var headers: [(String, String)] = []

    init(_ code: Int, _ text: String) {
        self.init(code, "text/plain; charset=utf-8", Array(text.utf8))
    }

    init(_ code: Int, _ contentType: String, _ body: [UInt8]) {
        self.code = code
        self.contentType = contentType
        self.body = body
    }

    /// "200 OK", "503 Service Unavailable", ...
    var status: String {
        let reason =
            switch code {
            case 200: "OK"
            case 202: "Accepted"
            case 400: "Bad Request"
            case 401: "Unauthorized"
            case 403: "Forbidden"
            case 404: "Not Found"
            case 405: "Method Not Allowed"
            case 409: "Conflict"
            case 413: "Content Too Large"
            case 415: "Unsupported Media Type"
            case 429: "Too Many Requests"
            case 500: "Internal Server Error"
            case 503: "Service Unavailable"
            default: ""
            }
        return "\(code) \(reason)"
    }

    /// The whole response as bytes, for a connection answered before HTTP/1 is set up on it (or
    /// after it broke): it says `Connection: close`, and the connection closes once it is written.
    var closingResponse: [UInt8] {
        var head = "HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}
