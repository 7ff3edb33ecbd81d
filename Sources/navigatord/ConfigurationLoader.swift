import Logging
import NavigatorEngine
import NavigatorHTTP
import NavigatorStore
import NavigatorYAML
import Yams
import ZeroMQ

/// Builds a ``NavigatordConfiguration`` from the embedded defaults, a YAML file, the environment and
/// command-line flags, each overriding the one before.
///
/// All three sources name settings the same way (the YAML keys below; environment variables are
/// `NAVIGATOR_` plus the key in upper snake case, lists comma-separated), and every value is
/// checked by the same code, so a mistake reads alike wherever it was made.
public enum ConfigurationLoader {
    /// One setting: its key and how a raw value is applied.
    struct Setting: Sendable {
        let key: String
        let help: String
        let isList: Bool
        let apply: @Sendable (inout NavigatordConfiguration, [String]) throws(ConfigurationError) -> Void

        var environmentName: String { ConfigurationLoader.environmentName(key) }
    }

    static let settings: [Setting] = [
        Setting(key: "intents", help: "intent endpoints", isList: true) { config, values throws(ConfigurationError) in
            config.engine.intentEndpoints = try endpoints(values, "intents")
        },
        Setting(key: "requests", help: "request endpoints", isList: true) { config, values throws(ConfigurationError) in
            config.engine.requestEndpoints = try endpoints(values, "requests")
        },
        Setting(key: "commands", help: "command endpoints", isList: true) { config, values throws(ConfigurationError) in
            config.engine.commandEndpoints = try endpoints(values, "commands")
        },
        Setting(key: "http", help: "host:port or off", isList: false) { config, values throws(ConfigurationError) in
            config.httpAddress = try address(values[0])
        },
        Setting(key: "dataDirectory", help: "state directory", isList: false) {
            config, values throws(ConfigurationError) in
            guard !values[0].isEmpty else {
                throw ConfigurationError("dataDirectory is empty; expected a directory path")
            }
            config.engine.dataDirectory = values[0]
        },
        Setting(key: "store", help: "sqlite or a postgresql:// URL", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.store = try store(values[0])
        },
        Setting(key: "instanceId", help: "this instance's unique name", isList: false) {
            config, values throws(ConfigurationError) in
            let id = values[0]
            guard !id.isEmpty, id.utf8.count <= 128, !id.contains(","),
                id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
            else {
                throw ConfigurationError(
                    "instanceId \"\(id)\" is not valid; expected 1 to 128 bytes without spaces, commas or control characters"
                )
            }
            config.engine.instanceID = id
        },
        Setting(key: "leaseSeconds", help: "partition lease time", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.leaseSeconds = try integer(values[0], "leaseSeconds", 1...600)
        },
        Setting(key: "clusterEndpoint", help: "cluster endpoint or off", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.clusterEndpoint = values[0] == "off" ? "off" : try endpoints(values, "clusterEndpoint")[0]
        },
        Setting(key: "advertiseHost", help: "host peers reach this instance at", isList: false) {
            config, values throws(ConfigurationError) in
            guard values[0].utf8.count <= 253, !values[0].contains(where: { $0 == "/" || $0 == " " || $0 == ":" })
            else {
                throw ConfigurationError(
                    "advertiseHost \"\(values[0])\" is not a host name or IPv4 address; expected one (or empty: the host name)"
                )
            }
            config.engine.advertiseHost = values[0]
        },
        Setting(key: "routes", help: "route map file", isList: false) { config, values throws(ConfigurationError) in
            config.engine.routeMapPath = values[0].isEmpty || values[0] == "demo" ? nil : values[0]
        },
        Setting(key: "workers", help: "worker threads", isList: false) { config, values throws(ConfigurationError) in
            config.engine.workers = try integer(values[0], "workers", 1...256)
        },
        Setting(key: "logLevel", help: "log level", isList: false) { config, values throws(ConfigurationError) in
            guard let level = Logger.Level(rawValue: values[0].lowercased()) else {
                throw ConfigurationError(
                    "logLevel \"\(values[0])\" is unknown; expected trace, debug, info, notice, warning, error or critical"
                )
            }
            config.logLevel = level
        },
        Setting(key: "maxMessageBytes", help: "largest message", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxMessageBytes = try integer(values[0], "maxMessageBytes", 256...(64 * 1024 * 1024))
        },
        Setting(key: "highWaterMark", help: "queued messages per peer", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.highWaterMark = Int32(try integer(values[0], "highWaterMark", 1...10_000_000))
        },
        Setting(key: "handoffHighWaterMark", help: "queued messages between the service's threads", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.handoffHighWaterMark = Int32(try integer(values[0], "handoffHighWaterMark", 1...1_000_000))
        },
        Setting(key: "dedupWindowSeconds", help: "dedup window", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.dedupWindowSeconds = try integer(values[0], "dedupWindowSeconds", 0...86_400)
        },
        Setting(key: "parkedTTLSeconds", help: "default parked TTL", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.parkedTTLSeconds = try integer(values[0], "parkedTTLSeconds", 1...86_400)
        },
        Setting(key: "maxParkedPerSession", help: "parked intents per session", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxParkedPerSession = try integer(values[0], "maxParkedPerSession", 1...10_000)
        },
        Setting(key: "maxSessions", help: "sessions held at once", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxSessions = try integer(values[0], "maxSessions", 1...100_000_000)
        },
        Setting(key: "maxMemoryMegabytes", help: "resident memory ceiling (MiB; 0: none)", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxMemoryMegabytes = try integer(values[0], "maxMemoryMegabytes", 0...16_777_216)
        },
        Setting(key: "maxModals", help: "modals per session", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxModals = try integer(values[0], "maxModals", 1...1024)
        },
        Setting(key: "maxStackDepth", help: "screens per stack", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxStackDepth = try integer(values[0], "maxStackDepth", 1...4096)
        },
        Setting(key: "maxTabs", help: "tabs per tab bar", isList: false) { config, values throws(ConfigurationError) in
            config.engine.maxTabs = try integer(values[0], "maxTabs", 1...256)
        },
        Setting(key: "maxInfoEntries", help: "info entries per screen", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxInfoEntries = try integer(values[0], "maxInfoEntries", 1...1024)
        },
        Setting(key: "maxTreeBytes", help: "bytes of a tree's names, keys and values", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxTreeBytes = try integer(values[0], "maxTreeBytes", 256...(64 << 20))
        },
        Setting(key: "maxTextBytes", help: "bytes per name or value", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxTextBytes = try integer(values[0], "maxTextBytes", 16...65_536)
        },
        Setting(key: "maxConditions", help: "conditions per session", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxConditions = try integer(values[0], "maxConditions", 1...4096)
        },
        Setting(key: "maxSubscriptionsPerPeer", help: "topics per subscriber connection", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxSubscriptionsPerPeer = try integer(values[0], "maxSubscriptionsPerPeer", 1...10_000_000)
        },
        Setting(key: "streamHistorySize", help: "batches kept per streamed session", isList: false) {
            config, values throws(ConfigurationError) in
            config.streams.historySize = try integer(values[0], "streamHistorySize", 0...4096)
        },
        Setting(key: "streamHistorySeconds", help: "seconds a streamed batch is kept", isList: false) {
            config, values throws(ConfigurationError) in
            config.streams.historySeconds = try integer(values[0], "streamHistorySeconds", 1...86_400)
        },
        Setting(key: "streamQueueSize", help: "events queued per stream connection", isList: false) {
            config, values throws(ConfigurationError) in
            config.streams.queueSize = try integer(values[0], "streamQueueSize", 1...65_536)
        },
        Setting(key: "maxStreams", help: "stream connections open at once", isList: false) {
            config, values throws(ConfigurationError) in
            config.streams.maxStreams = try integer(values[0], "maxStreams", 1...10_000_000)
        },
        Setting(key: "maxConnections", help: "HTTP connections open at once", isList: false) {
            config, values throws(ConfigurationError) in
            config.maxHTTPConnections = try integer(values[0], "maxConnections", 1...10_000_000)
        },
        Setting(key: "allowedHosts", help: "Host and Origin names HTTP takes without security", isList: true) {
            config, values throws(ConfigurationError) in
            var hosts = Set<String>()
            for value in values {
                // An IPv6 address stands bare here (::1), as Host gives it in brackets.
                let isIPv6 = value.contains(":") && value.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
                let name = isIPv6 ? value.lowercased() : HTTPConfiguration.hostName(value)
                guard let name, isIPv6 || name == value.lowercased() else {
                    throw ConfigurationError(
                        "allowedHosts \"\(value)\" is not a host name; expected names such as localhost, 127.0.0.1, ::1 or navigator.internal (no port, scheme or path)"
                    )
                }
                hosts.insert(name)
            }
            config.allowedHosts = hosts
        },
        Setting(key: "streamHeartbeatSeconds", help: "seconds before an idle stream's heartbeat", isList: false) {
            config, values throws(ConfigurationError) in
            config.streams.heartbeatSeconds = try integer(values[0], "streamHeartbeatSeconds", 1...3600)
        },
        Setting(key: "maxConditionKeyBytes", help: "bytes per condition name", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.maxConditionKeyBytes = try integer(values[0], "maxConditionKeyBytes", 8...1024)
        },
        Setting(key: "sessionIdleExpirySeconds", help: "idle time before a session is forgotten", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.sessionIdleExpirySeconds = try integer(values[0], "sessionIdleExpirySeconds", 0...315_360_000)
        },
        Setting(key: "flushIntervalMilliseconds", help: "write-behind interval", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.flushIntervalMilliseconds = try integer(values[0], "flushIntervalMilliseconds", 1...60_000)
        },
        Setting(key: "writeBehindNice", help: "nice values the flush thread runs below the workers", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.writeBehindNice = try integer(values[0], "writeBehindNice", 0...19)
        },
        Setting(key: "packIdleAfterSeconds", help: "idle time before a session is packed", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.packIdleAfterSeconds = try integer(values[0], "packIdleAfterSeconds", 0...86_400)
        },
        Setting(key: "landingWindowSeconds", help: "time a shell has to acknowledge a batch", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.landingWindowSeconds = try integer(values[0], "landingWindowSeconds", 1...3_600)
        },
        Setting(
            key: "maxTracedIntentsPerSecond", help: "intents traced a second for their producers' sampled flag",
            isList: false
        ) {
            config, values throws(ConfigurationError) in
            config.engine.maxTracedIntentsPerSecond = try integer(values[0], "maxTracedIntentsPerSecond", 1...1_000_000)
        },
        Setting(
            key: "flightRecorderIntents", help: "recent intents kept to replay against a candidate route map",
            isList: false
        ) {
            config, values throws(ConfigurationError) in
            config.engine.flightRecorderIntents = try integer(values[0], "flightRecorderIntents", 0...100_000)
        },
        Setting(key: "security.secretKeyFile", help: "the server's CURVE secret key (secure mode)", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.secretKeyFile = values[0].isEmpty ? nil : values[0]
        },
        Setting(key: "security.accessFile", help: "the clients and what they may touch (secure mode)", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.accessFile = values[0].isEmpty ? nil : values[0]
        },
        Setting(key: "security.tokenKeyFile", help: "the key of HTTP's bearer tokens (secure mode)", isList: false) {
            config, values throws(ConfigurationError) in
            config.tokenKeyFile = values[0].isEmpty ? nil : values[0]
        },
        Setting(
            key: "security.allowInsecureRemote", help: "bind non-loopback endpoints without security", isList: false
        ) {
            config, values throws(ConfigurationError) in
            config.engine.allowInsecureRemote = try boolean(values[0], "security.allowInsecureRemote")
        },
        Setting(key: "shutdownTimeoutSeconds", help: "shutdown bound", isList: false) {
            config, values throws(ConfigurationError) in
            config.engine.shutdownTimeoutSeconds = try integer(values[0], "shutdownTimeoutSeconds", 1...600)
        },
    ]

    /// The keys a configuration file, the environment and flags may set.
    public static var keys: [String] { settings.map(\.key) }

    /// Older names of settings, still taken: `metrics` was the HTTP server's address when it
    /// served only metrics.
    static let aliases = ["metrics": "http"]

    /// The configuration from these sources. `flags` maps setting keys to the values given on
    /// the command line (several for list settings).
    public static func load(
        file: String?, environment: [String: String], flags: [String: [String]]
    ) throws(ConfigurationError) -> NavigatordConfiguration {
        var config = NavigatordConfiguration()
        if let file {
            for (key, values, line) in try readFile(file) {
                try apply(key, values, to: &config, source: "\(file):\(line)")
            }
        }
        for setting in settings {
            let names =
                [setting.environmentName] + aliases.filter { $0.value == setting.key }.map { environmentName($0.key) }
            for name in names.reversed() {
                guard let raw = environment[name] else { continue }
                let values = setting.isList ? raw.split(separator: ",").map { String($0).trimmed } : [raw.trimmed]
                try apply(setting.key, values, to: &config, source: "environment \(name)")
            }
        }
        for setting in settings {
            guard let values = flags[setting.key], !values.isEmpty else { continue }
            try apply(setting.key, values, to: &config, source: "--\(flagName(setting.key))")
        }
        try checkExposure(config)
        return config
    }

    /// Safe by default: the engine's own check (``EngineConfiguration/checkExposure()``), a token
    /// key only in secure mode, and without security an HTTP server on loopback only, unless
    /// `security.allowInsecureRemote` says otherwise.
    static func checkExposure(_ config: NavigatordConfiguration) throws(ConfigurationError) {
        if config.tokenKeyFile != nil && !config.engine.isSecure {
            throw ConfigurationError(
                "security.tokenKeyFile is set without secure mode; tokens need security.secretKeyFile and security.accessFile too"
            )
        }
        try config.engine.checkExposure()
        guard !config.engine.isSecure, !config.engine.allowInsecureRemote, config.httpAddress != "off" else { return }
        if let (host, _) = try? HTTPEndpoint.parse(config.httpAddress), !EndpointCheck.isLoopback(host) {
            throw ConfigurationError(
                "http address \(config.httpAddress) is not loopback, and security is off: anyone who reaches its JSON API could steer and watch every session; expected 127.0.0.1:port or [::1]:port — or configure security, or pass --allow-insecure-remote"
            )
        }
    }

    /// `parkedTTLSeconds` -> `parked-ttl-seconds`, as swift-argument-parser names the option; a
    /// key in a section names its flag by its last part (`security.accessFile` -> `access-file`).
    public static func flagName(_ key: String) -> String {
        words(String(key.split(separator: ".").last ?? "")).joined(separator: "-")
    }

    /// `parkedTTLSeconds` -> `NAVIGATOR_PARKED_TTL_SECONDS`;
    /// `security.accessFile` -> `NAVIGATOR_SECURITY_ACCESS_FILE`.
    public static func environmentName(_ key: String) -> String {
        "NAVIGATOR_" + key.split(separator: ".").flatMap { words(String($0)) }.joined(separator: "_").uppercased()
    }

    /// Splits a camel-case key into lower-case words, keeping acronyms whole.
    static func words(_ key: String) -> [String] {
        let characters = Array(key)
        var words: [String] = []
        var current = ""
        for (index, character) in characters.enumerated() {
            let previous = index > 0 ? characters[index - 1] : nil
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            let startsWord =
                character.isUppercase
                && (previous.map { $0.isLowercase || $0.isNumber } == true
                    || (previous?.isUppercase == true && next?.isLowercase == true))
            if startsWord, !current.isEmpty {
                words.append(current)
                current = ""
            }
            current += character.lowercased()
        }
        if !current.isEmpty { words.append(current) }
        return words
    }

    static func apply(_ key: String, _ values: [String], to config: inout NavigatordConfiguration, source: String)
        throws(ConfigurationError)
    {
        let key = aliases[key] ?? key
        guard let setting = settings.first(where: { $0.key == key }) else {
            throw ConfigurationError(
                "\(source): unknown setting \(key); expected one of \(keys.joined(separator: ", "))")
        }
        guard !values.isEmpty, setting.isList || values.count == 1 else {
            throw ConfigurationError(
                "\(source): \(key) takes \(setting.isList ? "one or more values" : "one value"), got \(values.count)")
        }
        do {
            try setting.apply(&config, values)
        } catch {
            throw ConfigurationError("\(source): \(error.description)")
        }
    }

    /// The file's settings with their lines; a file that is not a mapping of known keys to
    /// scalars (or lists of scalars) is refused with the line of the problem.
    static func readFile(_ path: String) throws(ConfigurationError) -> [(String, [String], Int)] {
        let text: String
        do {
            text = try TextFile.read(path)
        } catch {
            throw ConfigurationError(error.description)
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError("\(path): not valid YAML: \(error)")
        }
        guard let root else { return [] }
        guard case .mapping(let mapping) = root else {
            throw ConfigurationError("\(path):\(root.mark?.line ?? 1): expected a mapping of settings (key: value)")
        }
        var result: [(String, [String], Int)] = []
        var entries: [(key: String, value: Node, line: Int)] = []
        for (keyNode, valueNode) in mapping {
            let line = keyNode.mark?.line ?? 1
            guard let key = keyNode.string else {
                throw ConfigurationError("\(path):\(line): a setting name must be text")
            }
            // A section (`security:`) holds settings named `section.key`.
            if case .mapping(let section) = valueNode, sections.contains(key) {
                for (innerKey, innerValue) in section {
                    guard let name = innerKey.string else {
                        throw ConfigurationError("\(path):\(innerKey.mark?.line ?? line): a setting name must be text")
                    }
                    entries.append(("\(key).\(name)", innerValue, innerKey.mark?.line ?? line))
                }
            } else {
                entries.append((key, valueNode, line))
            }
        }
        for (key, valueNode, line) in entries {
            switch valueNode {
            case .scalar(let scalar):
                result.append((key, [scalar.string], line))
            case .sequence(let sequence):
                var values: [String] = []
                for item in sequence {
                    guard let value = item.string else {
                        throw ConfigurationError(
                            "\(path):\(item.mark?.line ?? line): \(key) lists something that is not a plain value")
                    }
                    values.append(value)
                }
                result.append((key, values, line))
            default:
                throw ConfigurationError("\(path):\(line): \(key) must be a value or a list of values")
            }
        }
        return result
    }

    /// Keys that group settings in a configuration file.
    static let sections: Set<String> = ["security"]

    static func boolean(_ value: String, _ key: String) throws(ConfigurationError) -> Bool {
        switch value.trimmed.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw ConfigurationError("\(key) \"\(value)\" is not true or false")
        }
    }

    static func endpoints(_ values: [String], _ key: String) throws(ConfigurationError) -> [String] {
        for value in values {
            if let problem = Endpoint.problem(with: value) {
                throw ConfigurationError("\(key) endpoint \(value): \(problem)")
            }
        }
        return values
    }

    /// `sqlite`, or a PostgreSQL URL with at least a host and a database; errors never show the
    /// password.
    static func store(_ value: String) throws(ConfigurationError) -> StoreSelection {
        if value == "sqlite" || value.isEmpty { return .sqlite }
        let shown = PostgresStateDatabase.redact(value)
        guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else {
            throw ConfigurationError(
                "store \"\(shown)\" is unknown; expected sqlite or postgresql://user[:password]@host[:port]/database")
        }
        let rest = value[value.firstRange(of: "://")!.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let host = rest[..<authorityEnd].split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        let database = rest[authorityEnd...].dropFirst().prefix { $0 != "?" }
        guard !host.isEmpty, rest[authorityEnd...].hasPrefix("/"), !database.isEmpty else {
            throw ConfigurationError(
                "store \"\(shown)\" names no host or no database; expected postgresql://user[:password]@host[:port]/database"
            )
        }
        return .postgresql(url: value)
    }

    static func address(_ value: String) throws(ConfigurationError) -> String {
        if value == "off" { return value }
        guard (try? HTTPEndpoint.parse(value)) != nil else {
            throw ConfigurationError(
                "http \"\(value)\" is not host:port or [ipv6]:port (port 0 to 65535; 0 picks a free one) or off")
        }
        return value
    }

    static func integer(_ value: String, _ key: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let number = Int(value.trimmed), range.contains(number) else {
            throw ConfigurationError(
                "\(key) \"\(value)\" is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }
}

extension String {
    var trimmed: String {
        var text = Substring(self)
        while text.first?.isWhitespace == true { text = text.dropFirst() }
        while text.last?.isWhitespace == true { text = text.dropLast() }
        return String(text)
    }
}
