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
    @discardableResult
    public func reloadRouteMap() throws -> String {
        do {
            var (resolver, source) = try Self.loadResolver(configuration)
            resolver.options.dedupKey = resolvers.resolver.options.dedupKey  // the state file's
            resolvers.replace(with: resolver, source: source)
            logger.info(
                "route map reloaded", metadata: ["routes": "\(source)", "screens": "\(resolver.map.screens.count)"])
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
    static func loadResolver(_ configuration: EngineConfiguration) throws -> (Resolver, String) {
        let map: RouteMap
        let source: String
        if let path = configuration.routeMapPath {
            map = try RouteMapYAML.load(contentsOfFile: path)
            source = path
        } else {
            map = .demo
            source = "embedded demo"
        }
        var options = Resolver.Options()
        options.dedupWindow = Int64(configuration.dedupWindowSeconds) * 1_000_000_000
        options.defaultTTL = Int64(configuration.parkedTTLSeconds) * 1_000_000_000
        options.maxParked = configuration.maxParkedPerSession
        options.limits = TreeLimits(
            maxModals: configuration.maxModals, maxStackDepth: configuration.maxStackDepth,
            maxTabs: configuration.maxTabs, maxInfoEntries: configuration.maxInfoEntries,
            maxTextBytes: configuration.maxTextBytes)
        options.maxConditions = configuration.maxConditions
        options.maxConditionKeyBytes = configuration.maxConditionKeyBytes
        return (try Resolver(map: map, options: options), source)
    }
}
