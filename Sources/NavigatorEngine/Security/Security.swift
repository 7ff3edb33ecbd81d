import Locking
import ZeroMQ

/// A secure navigatord's keys and access list: the server's CURVE key pair, and the clients of
/// the access file, swapped whole when SIGHUP reloads it. Every socket loop asks it who a
/// connection's User-Id (the client's name, given by the ZAP handler) is and what it may do.
public final class Security: Sendable {
    /// The ZAP domain of navigatord's sockets.
    static let domain = "navigator"

    let serverKeys: CurveKeyPair
    let accessFile: String
    private let state: Locked<(access: AccessList, generation: Int)>

    init(serverKeys: CurveKeyPair, accessFile: String, access: AccessList) {
        self.serverKeys = serverKeys
        self.accessFile = accessFile
        state = Locked((access, 1))
        peer = AccessList.Client(name: Self.peerName, key: serverKeys.publicKey, role: .admin, sessions: ["*"])
    }

    /// Another instance of this deployment: it proves itself with the server's own key pair,
    /// which the instances share (as replicas share a TLS certificate), and follows sessions for
    /// its streams as an admin.
    let peer: AccessList.Client

    /// The name a peer instance's connections have (not a name the access file can hold: it has
    /// a space).
    static let peerName = "navigatord peer"

    /// Reads the secret key file and the access file.
    static func load(secretKeyFile: String, accessFile: String) throws(ConfigurationError) -> Security {
        let keys = try readSecretKey(secretKeyFile)
        return Security(
            serverKeys: keys, accessFile: accessFile, access: try AccessList.load(contentsOfFile: accessFile))
    }

    public var publicKey: String { serverKeys.publicKey }

    /// The client behind a User-Id, as the access list says now (nil: unknown, or removed since).
    func client(named name: String?) -> AccessList.Client? {
        guard let name, !name.isEmpty else { return nil }
        if name == Self.peerName { return peer }
        return state.withLock { $0.access.client(named: name) }
    }

    /// The client name of a received message: the User-Id the ZAP handler gave its connection.
    static func clientName(of message: Message) -> String? { message.property("User-Id") }

    /// The metadata property in which the ZAP handler numbers each connection it admits (1, 2,
    /// … in the order admitted); every message on the connection carries it.
    static let connectionProperty = "X-Connection"

    /// Why the client `name` (``clientName(of:)``) may not do `action`, or nil if it may.
    func refusal(of action: AccessList.Action, by name: String?) -> String? {
        guard let client = client(named: name) else {
            return
                "the client \(name.map { "\"\($0)\"" } ?? "of this connection") is not in the access file (any more); nothing was changed"
        }
        guard !client.may(action) else { return nil }
        let what =
            switch action {
            case .publish(let session): "publish intents for session \(session)"
            case .follow(let session): "follow session \(session)"
            case .inspect: "read the service's stats and routes, or check and roll out route maps"
            }
        return
            "client \(client.name) (role \(client.role.rawValue), sessions \(client.sessions.joined(separator: ","))) may not \(what); nothing was changed"
    }

    /// The client holding a public key (Z85), for the ZAP handler.
    func client(key: String) -> AccessList.Client? {
        if key == serverKeys.publicKey { return peer }
        return state.withLock { $0.access.client(key: key) }
    }

    /// Bumped by every reload, so that a loop holding per-connection decisions re-checks them.
    var generation: Int { state.withLock { $0.generation } }

    var access: AccessList { state.withLock { $0.access } }

    /// Reads the access file again (SIGHUP). An invalid file is refused and the list in use
    /// stays. Returns what changed, for the log.
    func reload() throws(ConfigurationError) -> (clients: Int, removed: [String]) {
        let fresh = try AccessList.load(contentsOfFile: accessFile)
        let old = state.withLock { state -> AccessList in
            let old = state.access
            state.access = fresh
            state.generation += 1
            return old
        }
        let removed = old.clients.map(\.name).filter { name in
            fresh.client(named: name).map { $0 != old.client(named: name) } ?? true
        }
        return (fresh.clients.count, removed)
    }

    /// The server's secret key file: 40 Z85 characters, readable by its owner only.
    static func readSecretKey(_ path: String) throws(ConfigurationError) -> CurveKeyPair {
        do {
            return try CurveKeyPair.load(secretKeyFile: path)
        } catch {
            throw ConfigurationError("secret key file \(error) (navctl keygen makes one)")
        }
    }
}
