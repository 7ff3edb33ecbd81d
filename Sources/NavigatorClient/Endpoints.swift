import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where navigatord listens, and how to prove who this client is when it runs in secure mode;
/// the defaults match navigatord's.
public struct ServerEndpoints: Hashable, Sendable {
    /// Empty for a connection that publishes no fire-and-forget intents (a follower).
    public var intents: String
    public var requests: String
    public var commands: String
    /// Secure mode: this client's CURVE key pair and the server's public key; nil to connect
    /// without security.
    public var curve: CurveCredentials?

    public init(
        intents: String = "tcp://127.0.0.1:7401", requests: String = "tcp://127.0.0.1:7402",
        commands: String = "tcp://127.0.0.1:7403", curve: CurveCredentials? = nil
    ) {
        self.intents = intents
        self.requests = requests
        self.commands = commands
        self.curve = curve
    }

    /// What a timeout may mean, said after "is navigatord running?".
    var timeoutHint: String {
        curve == nil
            ? "is navigatord running? does it run in secure mode (then pass the server key and this client's key)?"
            : "is navigatord running? if it is, authentication may have failed: a wrong server key, or this client's key is not in its access file (CURVE handshakes fail silently)"
    }
}

/// A secure client's keys: its own CURVE key pair (its public key is in navigatord's access
/// file) and navigatord's public key (printed when navigatord starts).
public struct CurveCredentials: Hashable, Sendable {
    public var keys: CurveKeyPair
    public var serverKey: String

    public init(keys: CurveKeyPair, serverKey: String) {
        self.keys = keys
        self.serverKey = serverKey
    }

    /// Reads the client's secret key file (as `navctl keygen` writes it: 40 Z85 characters,
    /// mode 0600) and takes the server's key as Z85 text or a file holding it.
    public static func load(keyFile: String, serverKey: String) throws(ClientError) -> CurveCredentials {
        let keys: CurveKeyPair
        do {
            keys = try CurveKeyPair.load(secretKeyFile: keyFile)
        } catch {
            throw ClientError(.invalidArgument, "key file \(error) (navctl keygen writes one)")
        }
        guard !CurveKeyPair.isValidKey(serverKey) else { return CurveCredentials(keys: keys, serverKey: serverKey) }
        do {
            return CurveCredentials(keys: keys, serverKey: try CurveKeyPair.readKey(fromFile: serverKey, secret: false))
        } catch {
            throw ClientError(
                .invalidArgument,
                "server key \(serverKey) is not 40 Z85 characters, nor a file holding them (\(error)); navigatord prints its public key at start"
            )
        }
    }

    /// The credentials a command line gives: `--server-key` and `--key-file`, else the
    /// environment's NAVIGATOR_SERVER_KEY and NAVIGATOR_KEY_FILE; nil when neither is set (no
    /// security), an error when only one is.
    public static func fromOptions(serverKey: String?, keyFile: String?) throws(ClientError) -> CurveCredentials? {
        let server = serverKey ?? getenv("NAVIGATOR_SERVER_KEY").map { String(cString: $0) }
        let file = keyFile ?? getenv("NAVIGATOR_KEY_FILE").map { String(cString: $0) }
        switch (server, file) {
        case (nil, nil): return nil
        case (let server?, let file?): return try load(keyFile: file, serverKey: server)
        case (nil, _?):
            throw ClientError(.invalidArgument, "--key-file needs --server-key (navigatord's public key) too")
        case (_?, nil):
            throw ClientError(.invalidArgument, "--server-key needs --key-file (this client's secret key) too")
        }
    }
}

extension Socket {
    /// Makes this socket a CURVE client with `credentials`, if any.
    public func secure(with credentials: CurveCredentials?) throws(ZeroMQError) {
        guard let credentials else { return }
        try makeCurveClient(credentials.keys, serverKey: credentials.serverKey)
    }
}
