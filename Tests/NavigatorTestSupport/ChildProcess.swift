import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with `posix_spawn`, for the tests that run the built executables.
///
/// Not Foundation's `Process`: on Linux its `run()` reads past a `dirent` while listing
/// /proc/self/fd (`findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation#5472, fixed after
/// this toolchain) and intermittently crashes the whole test process with SIGSEGV in
/// `memmove`; seen here once in 6 full runs. The descriptors given to the child are dup'ed onto
/// 0, 1 and 2; every other descriptor of the test process that matters is close-on-exec.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the settings are written before `run()` by the owner only; the exit status
    // is behind a Mutex.
    public var executableURL: URL?
    public var arguments: [String] = []
    /// nil: the test process's own environment.
    public var environment: [String: String]?
    /// Descriptors for the child's standard input, output and error (nil: inherited).
    public var standardInput: Int32?
    public var standardOutput: Int32?
    public var standardError: Int32?
    public private(set) var processIdentifier: pid_t = 0
    private let status = Locked<Int32?>(nil)

    public init() {}

    /// Held while a pipe is made close-on-exec and while a child is spawned. pipe2 is not in
    /// Swift's Glibc module, so a pipe is close-on-exec only once `fcntl` has run: a child
    /// spawned by another test between the two would inherit both ends, keep the write end open
    /// for its whole life, and the test reading that pipe would wait for an end of stream that
    /// never comes (seen in CI: every test stalled ~10 s while two such waits held the
    /// cooperative pool's threads).
    static let spawning = Locked<Void>(())

    /// A pipe, close-on-exec: the read end to read the child's output from (``ChildOutput``), the
    /// write end to give the child — close it once the child runs.
    public static func pipe() throws -> (read: FileHandle, write: Int32) {
        var ends: [Int32] = [-1, -1]
        try spawning.withLock { _ in
            guard Glibc.pipe(&ends) == 0 else { throw ChildProcessError("pipe: \(String(cString: strerror(errno)))") }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        return (FileHandle(fileDescriptor: ends[0], closeOnDealloc: true), ends[1])
    }

    public func run() throws {
        guard let path = executableURL?.path else { throw ChildProcessError("no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, target) in [(standardInput, 0), (standardOutput, 1), (standardError, 2)] {
            if let descriptor { posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(target)) }
        }
        let environment = (self.environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = Self.spawning.withLock { _ in posix_spawn(&pid, path, &actions, nil, argv, envp) }
        guard result == 0 else { throw ChildProcessError("posix_spawn \(path): \(String(cString: strerror(result)))") }
        processIdentifier = pid
    }

    /// Reaps the child if it has ended; returns its status word.
    private func reap() -> Int32? {
        status.withLock { status in
            if let status { return status }
            var word: Int32 = 0
            let result = waitpid(processIdentifier, &word, WNOHANG)
            if result == processIdentifier { status = word }
            return status
        }
    }

    public var isRunning: Bool { processIdentifier != 0 && reap() == nil }

    /// SIGTERM.
    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    public func waitUntilExit() {
        while processIdentifier != 0, reap() == nil { usleep(2_000) }
    }

    /// The same, for async callers: it does not hold one of the cooperative pool's threads.
    public func exited() async {
        while processIdentifier != 0, reap() == nil { try? await Task.sleep(for: .milliseconds(2)) }
    }

    /// The exit code, or the number of the signal that ended it (as Foundation's `Process`).
    public var terminationStatus: Int32 {
        guard let word = reap() else { return -1 }
        return word & 0x7F == 0 ? (word >> 8) & 0xFF : word & 0x7F
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Where the package's executables were built: beside the test bundle that runs (whatever the
/// scratch path or sanitizer of the build — `./dev tsan` builds into `.build-tsan`).
public enum BuiltProducts {
    public static var directory: URL {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // swift test runs <scratch>/<triple>/debug/NavigatorPackageTests.xctest.
        if bundle.lastPathComponent.hasSuffix(".xctest") { return bundle.deletingLastPathComponent() }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug")
    }

    /// The executable `name` (navigatord, navctl, navload).
    public static func executable(_ name: String) -> URL { directory.appendingPathComponent(name) }
}
