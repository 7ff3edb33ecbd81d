import Foundation
import Logging
import NavigatorCore
import NavigatorEngine
import NavigatorTestSupport
import NavigatorWire
import SwiftProtobuf
import Testing
import ZeroMQ

@Suite("Durability")
struct DurabilityTests {
    @Test("a restart restores trees, seqs, conditions, parked intents and dedup")
    func restart() async throws {
        let directory = temporaryDirectory("navdur")
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try await snapshotAfter(directory) { client in
            _ = try client.request(
                .intent(wireIntent("c1", [ScreenContext("chat", ["conversationId": "42"])], session: "d")))
            _ = try client.request(.intent(wireIntent("g1", [ScreenContext("editProfile")], session: "d")))
            // Fire-and-forget work is written behind; it must survive a graceful stop too. (The
            // intents and requests sockets are not ordered with each other: wait for it to land.)
            try client.send(wireIntent("f1", [ScreenContext("settings")]), session: "d2")
            let deadline = ContinuousClock.now + .seconds(10)
            while try client.request(.snapshot(.with { $0.session = "d2" })).snapshot.seq < 1 {
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("the fire-and-forget intent never landed")
                }
            }
        }
        let (after, duplicate, other) = try await withRestarted(directory) { client in
            (
                try client.request(.snapshot(.with { $0.session = "d" })).snapshot,
                try client.request(
                    .intent(wireIntent("c1", [ScreenContext("chat", ["conversationId": "7"])], session: "d"))),
                try client.request(.snapshot(.with { $0.session = "d2" })).snapshot
            )
        }
        #expect(after == before)
        #expect(after.seq == 2)
        #expect(after.parked.map(\.intent.id) == ["g1"])
        #expect(duplicate.ignored.reason == "duplicate intent id c1")
        #expect(other.seq == 1)
        #expect(try other.tree.core().top.context.screen == "settings")
    }

    @Test("an unreadable state file is reported and left untouched")
    func corrupt() throws {
        let directory = temporaryDirectory("navbad")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("navigator.sqlite")
        let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try garbage.write(to: file)
        var configuration = EngineConfiguration()
        configuration.dataDirectory = directory.path
        #expect {
            _ = try Engine(configuration: configuration, logger: Logger(label: "test"))
        } throws: { error in
            let text = "\(error)"
            return text.contains("state file \(file.path) cannot be read") && text.contains("left as it is")
        }
        #expect(try Data(contentsOf: file) == garbage)
    }

    /// Runs `work` against a fresh service on `directory`, stops it, returns session d's snapshot
    /// as it was before the stop.
    private func snapshotAfter(_ directory: URL, _ work: @escaping @Sendable (Client) throws -> Void) async throws
        -> Navigator_V1_Snapshot
    {
        let box = SnapshotBox()
        try await withService(dataDirectory: directory) { _, endpoints in
            box.value = try await onThread {
                let client = try Client(endpoints)
                try work(client)
                return try client.request(.snapshot(.with { $0.session = "d" })).snapshot
            }
        }
        return box.value
    }

    private func withRestarted<T: Sendable>(_ directory: URL, _ work: @escaping @Sendable (Client) throws -> T)
        async throws -> T
    {
        let box = ResultBox<T>()
        try await withService(dataDirectory: directory) { _, endpoints in
            box.value = try await onThread { try work(try Client(endpoints)) }
        }
        return box.value!
    }
}

final class SnapshotBox: @unchecked Sendable {
    // @unchecked: written once inside withService's body, read after it returned.
    var value = Navigator_V1_Snapshot()
}

final class ResultBox<T>: @unchecked Sendable {
    // @unchecked: written once inside withService's body, read after it returned.
    var value: T?
}
