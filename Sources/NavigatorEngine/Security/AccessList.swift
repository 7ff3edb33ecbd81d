import NavigatorWire
import NavigatorYAML
import Yams
import ZeroMQ

/// Who may talk to a secure navigatord and what each may touch: the clients of the access file
/// (`security.accessFile`), each a name, a CURVE public key, a role and the sessions it owns.
///
/// ```yaml
/// clients:
///   - name: push-gateway     # in logs, metrics and the audit stream
///     key: "<40-character Z85 public key>"
///     role: producer         # producer | shell | admin
///     sessions: ["*"]        # exact ids, or prefixes ending in *
///     audit: false           # shells: may read their sessions' audit records (they name
///                            # producers and sources); admins always may
/// ```
///
/// The ZAP handler admits only these keys and gives each connection its client's name as the
/// User-Id; every intent, request and subscription is then checked here against that name.
public struct AccessList: Sendable, Hashable {
    public enum Role: String, Sendable, Hashable, CaseIterable {
        /// Publishes intents (also acknowledged ones) and asks for dry runs, for its sessions.
        case producer
        /// Follows its sessions: subscribes to their batches and rejections, takes snapshots,
        /// sends client events.
        case shell
        /// Everything: every session, stats, routes, the audit stream, broad subscriptions.
        case admin
    }

    /// What a request or message wants to do.
    public enum Action: Sendable, Hashable {
        case publish(session: String)
        case follow(session: String)
        /// Stats and the route map.
        case inspect
    }

    public struct Client: Sendable, Hashable {
        public var name: String
        public var key: String
        public var role: Role
        /// Exact session ids, and prefixes (the text before a trailing `*`; `*` alone: all).
        public var sessions: [String]
        /// A shell may read its sessions' audit records (`a/<session>/`), which name the producers
        /// (`client`) and sources behind each decision: only if granted. Admins always may.
        public var audit: Bool

        public init(name: String, key: String, role: Role, sessions: [String], audit: Bool = false) {
            self.name = name
            self.key = key
            self.role = role
            self.sessions = sessions
            self.audit = audit
        }

        /// Whether the client owns `session`.
        public func owns(_ session: String) -> Bool {
            role == .admin
                || sessions.contains { pattern in
                    pattern.hasSuffix("*") ? session.hasPrefix(pattern.dropLast()) : session == pattern
                }
        }

        public func may(_ action: Action) -> Bool {
            switch action {
            case .publish(let session): (role == .producer || role == .admin) && owns(session)
            case .follow(let session): (role == .shell || role == .admin) && owns(session)
            case .inspect: role == .admin
            }
        }

        /// Whether the client may subscribe to `topic`, a prefix of the commands socket's topic
        /// frames: only if every topic it matches is of a session the client follows. Batches
        /// (`s/`) and rejections (`r/`) of its sessions for shells, and their audit records (`a/`)
        /// for shells granted `audit`; anything broader (`s/`, `r/`, `a/`, the empty prefix) for
        /// admins only.
        public func maySubscribe(to topic: String) -> Bool {
            if role == .admin { return true }
            guard role == .shell, topic.hasPrefix("s/") || topic.hasPrefix("r/") || (audit && topic.hasPrefix("a/"))
            else {
                return false
            }
            let rest = topic.dropFirst(2)
            if let slash = rest.firstIndex(of: "/") {
                // `s/<session>/...`: exactly one session's topic.
                return owns(String(rest[..<slash]))
            }
            // `s/<prefix>`: every session id that starts with the prefix must be owned, which a
            // pattern `p*` guarantees when the prefix starts with p.
            return sessions.contains { $0.hasSuffix("*") && rest.hasPrefix($0.dropLast()) }
        }
    }

    public private(set) var clients: [Client]
    private var byKey: [String: Int]
    private var byName: [String: Int]

    public init(clients: [Client]) {
        self.clients = clients
        byKey = Dictionary(clients.enumerated().map { ($1.key, $0) }, uniquingKeysWith: { first, _ in first })
        byName = Dictionary(clients.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public func client(key: String) -> Client? { byKey[key].map { clients[$0] } }
    public func client(named name: String) -> Client? { byName[name].map { clients[$0] } }

    /// Longest client name; names are shown in logs and stamped on audit records.
    public static let maxNameBytes = 64

    /// Reads and checks an access file; every problem is reported with its line, all at once.
    public static func load(contentsOfFile path: String) throws(ConfigurationError) -> AccessList {
        let text: String
        do {
            text = try TextFile.read(path)
        } catch {
            throw ConfigurationError("access file: \(error.description)")
        }
        return try load(text, source: path)
    }

    public static func load(_ text: String, source: String) throws(ConfigurationError) -> AccessList {
        var problems: [String] = []
        func problem(_ node: Node?, _ message: String) {
            problems.append("\(source):\(node?.mark?.line ?? 1): \(message)")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError("\(source): not valid YAML: \(error)")
        }
        guard let root, case .mapping(let top) = root, let list = top["clients"] else {
            throw ConfigurationError(
                "\(source): expected a mapping with a list of clients (clients: - name, key, role, sessions)")
        }
        for key in top.keys where key.string != "clients" {
            problem(key, "unknown key \(key.string ?? "?"); expected clients")
        }
        guard case .sequence(let items) = list else {
            throw ConfigurationError("\(source):\(list.mark?.line ?? 1): clients must be a list")
        }
        var clients: [Client] = []
        var names: Set<String> = []
        var keys: Set<String> = []
        for item in items {
            guard case .mapping(let fields) = item else {
                problem(item, "a client must be a mapping of name, key, role and sessions")
                continue
            }
            for key in fields.keys where !["name", "key", "role", "sessions", "audit"].contains(key.string ?? "") {
                problem(key, "unknown key \(key.string ?? "?") of a client; expected name, key, role, sessions, audit")
            }
            let name = fields["name"]?.string ?? ""
            if name.isEmpty || name.utf8.count > maxNameBytes
                || name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            {
                problem(fields["name"] ?? item, "client name \"\(name)\" must be 1 to \(maxNameBytes) printable bytes")
            } else if !names.insert(name).inserted {
                problem(fields["name"], "client name \(name) appears twice; expected each name once")
            }
            let key = fields["key"]?.string ?? ""
            if !CurveKeyPair.isValidKey(key) {
                problem(
                    fields["key"] ?? item,
                    "client \(name): key must be a CURVE public key, 40 Z85 characters (navctl keygen makes one)")
            } else if !keys.insert(key).inserted {
                problem(fields["key"], "client \(name): this key is another client's too; expected one client per key")
            }
            let roleText = fields["role"]?.string ?? ""
            let role = Role(rawValue: roleText)
            if role == nil {
                problem(
                    fields["role"] ?? item,
                    "client \(name): role \"\(roleText)\" is unknown; expected producer, shell or admin")
            }
            var sessions: [String] = []
            switch fields["sessions"] {
            case .sequence(let patterns)?:
                for pattern in patterns {
                    let text = pattern.string ?? ""
                    let id = text.hasSuffix("*") ? String(text.dropLast()) : text
                    if text != "*", let trouble = SessionID.problem(with: id) {
                        problem(pattern, "client \(name): session \"\(text)\": \(trouble) (or a prefix ending in *)")
                    } else if id.contains("*") {
                        problem(
                            pattern, "client \(name): session \"\(text)\" has * inside; expected it only at the end")
                    }
                    sessions.append(text)
                }
            case nil where role == .admin:
                sessions = ["*"]
            default:
                problem(
                    fields["sessions"] ?? item, "client \(name): sessions must be a list of session ids or prefixes*")
            }
            var audit = false
            if let field = fields["audit"] {
                switch field.string {
                case "true": audit = true
                case "false": audit = false
                default:
                    problem(field, "client \(name): audit \"\(field.string ?? "?")\" is not true or false")
                }
                if role == .producer, audit {
                    problem(
                        field,
                        "client \(name): audit is for shells (a producer follows no session; admins read every record)")
                }
            }
            if let role { clients.append(Client(name: name, key: key, role: role, sessions: sessions, audit: audit)) }
        }
        guard problems.isEmpty else {
            throw ConfigurationError("access file is not valid:\n  " + problems.joined(separator: "\n  "))
        }
        return AccessList(clients: clients)
    }
}
