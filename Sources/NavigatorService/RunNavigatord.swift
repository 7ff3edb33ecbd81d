import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs navigatord until SIGTERM or SIGINT (graceful: intake stops, in-flight work drains, state
/// is flushed) and reloads the route map on SIGHUP (an invalid map is refused, the old kept).
public func runNavigatord(configuration: ServiceConfiguration, logger: Logger) async throws {
    let server = try NavigatorServer(configuration: configuration, logger: logger)
    let reloader = RouteMapReloader(server: server, logger: logger)
    let group = ServiceGroup(
        configuration: .init(
            services: [.init(service: server), .init(service: reloader)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    try await group.run()
}

/// Reloads the route map (and, in secure mode, the access file) on each SIGHUP until graceful
/// shutdown.
struct RouteMapReloader: Service {
    let server: NavigatorServer
    let logger: Logger

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading the route map\(server.security == nil ? "" : " and the access file")")
            _ = try? server.reloadRouteMap()  // a refusal is logged; the service goes on
            try? server.reloadAccessFile()
        }
    }
}

/// The process environment as a dictionary, without Foundation.
public enum ProcessEnvironment {
    public static var current: [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}
