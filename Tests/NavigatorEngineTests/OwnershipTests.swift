import Foundation
import GRDB
import NavigatorCore
import NavigatorStore
import NavigatorTestSupport
import Synchronization
import Testing
import ZeroMQ

@testable import NavigatorEngine

@Suite("One owner per data directory; state files of other schemas", .serialized)
struct OwnershipTests {
    @Test("a second navigatord on the same data directory refuses to start, naming it and the holder's pid")
    func twoDaemons() async throws {
        let directory = temporaryDirectory("navlock")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try Daemon(dataDirectory: directory)
        defer { first.reap() }
        _ = try await first.endpoints()
        let second = try Daemon(dataDirectory: directory)
        defer { second.reap() }
        #expect(try await second.exitStatus() != 0)
        #expect(
            second.log.contains(
                "the data directory \(directory.path) is in use by another navigatord (pid \(first.process.processIdentifier))"
            ),
            "\(second.log)")
        #expect(first.process.isRunning)
        // kill -9 leaves no lock behind: the kernel lets it go with the process.
        first.signal(SIGKILL)
        _ = try await first.exitStatus()
        let third = try Daemon(dataDirectory: directory)
        defer { third.reap() }
        _ = try await third.endpoints()
        third.signal(SIGTERM)
        #expect(try await third.exitStatus() == 0)
    }

    @Test("in one process too: a second server on the directory is refused until the first stops")
    func twoServers() async throws {
        let directory = temporaryDirectory("navlock")
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = TestService.configuration(dataDirectory: directory)
        let first = try Engine(configuration: configuration, logger: TestService.logger("first"))
        try await first.start()
        #expect {
            _ = try Engine(configuration: configuration, logger: TestService.logger("second"))
        } throws: { error in
            "\(error)".contains("is in use by another navigatord (pid \(getpid()))")
        }
        await first.stop()
        let second = try Engine(configuration: configuration, logger: TestService.logger("second"))
        try await second.start()
        await second.stop()
    }

    @Test("a version-1 state file (JSON rows) is refused with its version and left byte for byte as it was")
    func versionOneFile() throws {
        let directory = temporaryDirectory("navv1")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("navigator.sqlite").path
        try DatabaseQueue(path: path).write { db in
            try db.execute(
                sql: """
                    CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL, state BLOB NOT NULL,
                        updated_at INTEGER NOT NULL);
                    INSERT INTO sessions VALUES ('old', 3, CAST('{"tree":{},"conditions":{}}' AS BLOB), 0);
                    PRAGMA user_version = 1;
                    """)
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect {
            _ = try StateFile(directory: directory.path)
        } throws: { error in
            let text = "\(error)"
            return text.contains("has schema version 1 (sessions stored as JSON") && text.contains("left as it is")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        // And so is one from a later schema this build does not know.
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "PRAGMA user_version = 7") }
        #expect {
            _ = try StateFile(directory: directory.path)
        } throws: { error in "\(error)".contains("has schema version 7") }
    }
}

@Suite("Route map reloads")
struct ResolverHolderTests {
    @Test("a worker following the generation never holds an older resolver under a newer generation")
    func snapshotsAreConsistent() async throws {
        let resolver = try Resolver(map: .demo)
        let holder = ResolverHolder(resolver, source: "g0")
        let reloads = 20_000
        // Held before the reloader starts: on a busy machine it can finish all its reloads before
        // this thread runs again, and the loop must still take the newest generation at least once.
        let first = holder.snapshot
        // The reader spins: on a thread of its own, never on Swift concurrency's pool.
        let (held, mismatches, taken) = try await onThread {
            var held = first
            let reloader = DedicatedThreadBox {
                for index in 1...reloads { holder.replace(with: resolver, source: "g\(index)") }
            }
            var mismatches = 0
            var taken = 0
            while !reloader.finished || holder.generation != held.generation {
                if holder.generation != held.generation {
                    held = holder.snapshot
                    taken += 1
                    if held.source != "g\(held.generation)" { mismatches += 1 }
                }
            }
            reloader.join()
            return (held, mismatches, taken)
        }
        #expect(mismatches == 0)
        #expect(taken > 0)
        #expect(held.generation == reloads && held.source == "g\(reloads)")
    }
}

/// A thread that runs `body` once; `finished` turns true after it.
final class DedicatedThreadBox: Sendable {
    final class Flag: Sendable { let done = Atomic<Bool>(false) }
    private let flag = Flag()
    private let thread: DedicatedThread
    var finished: Bool { flag.done.load(ordering: .acquiring) }

    init(_ body: @escaping @Sendable () -> Void) {
        let flag = self.flag
        thread = DedicatedThread(name: "reloader") {
            body()
            flag.done.store(true, ordering: .releasing)
        }
    }

    func join() { thread.join() }
}

@Suite("Data directory")
struct DataDirectoryTests {
    @Test("a data directory that cannot be made is named with the system's reason")
    func cannotCreate() throws {
        let directory = temporaryDirectory("navdir")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("file").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect {
            try DataDirectoryLock.makeDirectory(file + "/data")
        } throws: { error in
            "\(error)" == "cannot create the data directory \(file)/data: Not a directory"
        }
        #expect {
            try DataDirectoryLock.makeDirectory(file)
        } throws: { error in
            "\(error)" == "the data directory \(file) is not a directory"
        }
        try DataDirectoryLock.makeDirectory(directory.path + "/a/b")
        #expect(FileManager.default.fileExists(atPath: directory.path + "/a/b"))
    }
}
