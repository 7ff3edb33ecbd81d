import Foundation
import Logging
import NavigatorEngine
import NavigatorStore
import NavigatorTestSupport
import ZeroMQ

@testable import navigatord

/// navigatord in this process as the executable puts it together (``Navigator``): the engine on
/// ephemeral ports of 127.0.0.1 with state in a temporary directory, and its HTTP server on a
/// free port; `body` gets it and the engine's endpoints, and it is stopped whatever happens.
func withNavigatord(
    workers: Int = 2, dataDirectory: URL? = nil, _ configure: (inout NavigatordConfiguration) -> Void = { _ in },
    _ body: @Sendable (Navigator, BoundEndpoints) async throws -> Void
) async throws {
    let directory = dataDirectory ?? temporaryDirectory("navd")
    defer { if dataDirectory == nil { try? FileManager.default.removeItem(at: directory) } }
    let navigator = try await Navigator(
        configuration: NavigatordConfiguration.forTests(directory, workers: workers, configure),
        logger: TestService.logger("navigatord-test"))
    try await navigator.start()
    do {
        try await body(navigator, navigator.engine.endpoints)
    } catch {
        await navigator.stop()
        throw error
    }
    await navigator.stop()
}

/// Several navigatords on one PostgreSQL database, in this process: one per id, started in
/// order, handed to `body`, and all stopped afterwards — also when `body` throws or a later one
/// cannot start.
func withNavigatords<R>(
    _ ids: [String], url: String, _ configure: (inout NavigatordConfiguration) -> Void = { _ in },
    _ body: ([Navigator]) async throws -> R
) async throws -> R {
    let directory = temporaryDirectory("navpg")
    defer { try? FileManager.default.removeItem(at: directory) }
    var navigators: [Navigator] = []
    func stopAll() async { for navigator in navigators.reversed() { await navigator.stop() } }
    do {
        for id in ids {
            let configuration = NavigatordConfiguration.forTests(directory.appendingPathComponent(id), workers: 2) {
                $0.engine.store = .postgresql(url: url)
                $0.engine.instanceID = id
                configure(&$0)
            }
            let navigator = try await Navigator(
                configuration: configuration, logger: TestService.logger("navigatord-\(id)"))
            try await navigator.start()
            navigators.append(navigator)
        }
        let result = try await body(navigators)
        await stopAll()
        return result
    } catch {
        await stopAll()
        throw error
    }
}

extension NavigatordConfiguration {
    /// The engine as ``TestService`` configures it, and the HTTP server on a free port of
    /// 127.0.0.1.
    static func forTests(_ directory: URL, workers: Int, _ configure: (inout NavigatordConfiguration) -> Void)
        -> NavigatordConfiguration
    {
        var configuration = NavigatordConfiguration()
        configuration.engine = TestService.configuration(dataDirectory: directory, workers: workers)
        configuration.httpAddress = "127.0.0.1:0"
        configure(&configuration)
        return configuration
    }
}
