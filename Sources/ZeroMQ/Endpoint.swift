/// Endpoint syntax, checked before libzmq sees an endpoint (libzmq 4.3 accepts port 99999
/// silently, and its EINVAL does not say what is wrong).
public enum Endpoint {
    /// nil if `endpoint` is `tcp://host:port` (port 1 to 65535, or `*`), `ipc://path` or
    /// `inproc://name`; else what is wrong with it.
    public static func problem(with endpoint: String) -> String? {
        if endpoint.hasPrefix("tcp://") {
            let rest = endpoint.dropFirst(6)
            guard let colon = rest.lastIndex(of: ":") else { return "expected tcp://host:port" }
            let host = rest[..<colon]
            let port = rest[rest.index(after: colon)...]
            guard !host.isEmpty else { return "has no host; expected tcp://host:port" }
            if port == "*" { return nil }
            guard let number = Int(port), (1...65535).contains(number) else {
                return "port \(port) is not a number from 1 to 65535 (or *)"
            }
            return nil
        }
        if endpoint.hasPrefix("ipc://") { return endpoint.count > 6 ? nil : "expected ipc://path" }
        if endpoint.hasPrefix("inproc://") { return endpoint.count > 9 ? nil : "expected inproc://name" }
        return "unknown transport; expected tcp://, ipc:// or inproc://"
    }
}
