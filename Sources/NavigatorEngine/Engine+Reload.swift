import Logging
import NavigatorClient
import NavigatorCore
import NavigatorPort
import NavigatorStore
import NavigatorYAML
import ServiceLifecycle
import Synchronization
import ZeroMQ

// What SIGHUP reloads: the route map, and in secure mode the access file.
extension Engine {
    /// Loads the route map again from its file (SIGHUP). An invalid map is refused: the error is
    /// logged and thrown, and the map in use stays.
    /// When the file's map changed, a rollout under way (or a promoted map other than the file's)
    /// ends: the file's map replaces the maps for every session, and with several instances the
    /// others end theirs too at their next round. Blocks on the store (the rollout's end is
    /// written): call it off Swift concurrency's pool.
    @discardableResult
    public func reloadRouteMap() throws -> String {
        do {
            var (resolver, source, version) = try Self.loadResolver(configuration)
            resolver.options.dedupKey = resolvers.file.resolver.options.dedupKey  // the state file's
            let ended = rolloutKeeper.reload(
                .init(resolver: resolver, source: source, version: version),
                note:
                    "ended by a reload (SIGHUP) on instance \(configuration.instanceID): every session resolves with \(source) (version \(version))"
            )
            var metadata: Logger.Metadata = [
                "routes": "\(source)", "version": "\(version)", "screens": "\(resolver.map.screens.count)",
            ]
            if let (ended, was) = ended {
                metadata["rollout"] =
                    "the \(was == .promoted ? "promoted map" : "rollout") \(ended.version) (\(ended.source)) ended: a reload replaces the maps for every session\(leaseKeeper == nil ? "" : ", on every instance")"
            }
            logger.info("route map reloaded", metadata: metadata)
            return source
        } catch {
            logger.error("route map reload refused; the previous map stays", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Secure mode: reads the access file again (SIGHUP). An invalid file is refused (logged and
    /// thrown) and the list in use stays. A client removed or narrowed gets no new connection
    /// and no further request served; egress drops its subscriptions that are no longer allowed.
    public func reloadAccessFile() throws {
        guard let security else { return }
        do {
            let (clients, changed) = try security.reload()
            logger.info(
                "access file reloaded",
                metadata: [
                    "file": "\(security.accessFile)", "clients": "\(clients)",
                    "removedOrChanged": "\(changed.joined(separator: ","))",
                ])
        } catch {
            logger.error("access file reload refused; the previous list stays", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// The route map and the resolver's options from the configuration (the dedup key is the
    /// state file's: the caller sets it).
    static func loadResolver(_ configuration: EngineConfiguration) throws -> (Resolver, String, String) {
        let map: RouteMap
        let source: String
        let version: String
        if let path = configuration.routeMapPath {
            let text: String
            (map, text) = try RouteMapYAML.loadWithText(contentsOfFile: path)
            source = path
            version = RouteMapVersion.of(text: text)
        } else {
            map = .demo
            source = "embedded demo"
            version = RouteMapVersion.embedded
        }
        var options = Resolver.Options()
        options.dedupWindow = Int64(configuration.dedupWindowSeconds) * 1_000_000_000
        options.defaultTTL = Int64(configuration.parkedTTLSeconds) * 1_000_000_000
        options.maxParked = configuration.maxParkedPerSession
        options.limits = TreeLimits(
            maxModals: configuration.maxModals, maxStackDepth: configuration.maxStackDepth,
            maxTabs: configuration.maxTabs, maxInfoEntries: configuration.maxInfoEntries,
            maxTextBytes: configuration.maxTextBytes, maxTreeBytes: configuration.maxTreeBytes)
        options.maxConditions = configuration.maxConditions
        options.maxConditionKeyBytes = configuration.maxConditionKeyBytes
        return (try Resolver(map: map, options: options), source, version)
    }
}
