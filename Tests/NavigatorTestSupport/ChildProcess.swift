import Foundation
import Locking
import NavigatorClient
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
/// 0, 1 and 2; every other descriptor of the test process is closed in the child.
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

    /// A pipe, close-on-exec: the read end to read the child's output from (``ChildOutput``), the
    /// write end to give the child — close it once the child runs.
    public static func pipe() throws -> (read: FileHandle, write: Int32) {
        let ends = try pipeEnds()
        return (FileHandle(fileDescriptor: ends.read, closeOnDealloc: true), ends.write)
    }

    /// The same pipe's two descriptors. (pipe2 is not in Swift's Glibc module, so the pipe is
    /// close-on-exec only once `fcntl` has run; a child spawned meanwhile by ``run()`` or a
    /// ``Lifeline`` does not inherit it either way: it closes every descriptor above 2.)
    static func pipeEnds() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw ChildProcessError("pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later): a GNU extension that
    /// Swift's Glibc module does not import (it is declared under `_GNU_SOURCE`), so looked up.
    static let closeFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else {
            fatalError("glibc has no posix_spawn_file_actions_addclosefrom_np; expected glibc 2.34 or later")
        }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// `strings` as the NUL-ended array posix_spawn takes; free each one after.
    static func cStrings(_ strings: [String]) -> [UnsafeMutablePointer<CChar>?] {
        strings.map { strdup($0) } + [nil]
    }

    /// The test process's environment, for posix_spawn.
    static var environmentStrings: [String] { ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" } }

    public func run() throws {
        guard let path = executableURL?.path else { throw ChildProcessError("no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, target) in [(standardInput, 0), (standardOutput, 1), (standardError, 2)] {
            if let descriptor { posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(target)) }
        }
        // Nothing else of the test process's: a socket or pipe a child held on to would never
        // look closed to its peer while the child lives.
        guard Self.closeFrom(&actions, 3) == 0 else { throw ChildProcessError("posix_spawn: cannot close from 3") }
        let argv = Self.cStrings([path] + arguments)
        let envp = Self.cStrings(self.environment.map { $0.map { "\($0.key)=\($0.value)" } } ?? Self.environmentStrings)
        defer { for pointer in argv + envp { free(pointer) } }
        // Signals as a shell gives them: none blocked, and SIGTERM, SIGINT and SIGHUP not ignored
        // even if something in the test process ignores them (a child would inherit that).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw ChildProcessError("posix_spawn \(path): \(String(cString: strerror(result)))") }
        processIdentifier = pid
        (lifeline ?? Lifeline.shared)?.watch(pid)
    }

    /// The lifeline that stops this child if the test process ends first; nil: the shared one.
    public var lifeline: Lifeline?

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

/// Stops the children of a test process that ended without stopping them — killed by a signal,
/// crashed, or ended by a closed pipe (`swift test | head`) — which would otherwise run on,
/// holding ports and CPU. A watchdog (`/bin/bash`), started with the first child, reads a pipe
/// whose write end only the test process holds (close-on-exec: no child inherits it). However
/// the process ends, the kernel closes that end and the watchdog reads the end of input; it then
/// sends SIGTERM to each child on its list that is still the process that was started (its
/// start time in /proc the same), and SIGKILL to those left 5 s later. While the process lives
/// the watchdog only waits. (PR_SET_PDEATHSIG would not do: it follows the thread that spawned
/// the child, and the cooperative pool's threads come and go.)
public final class Lifeline: Sendable {
    /// The test process's lifeline; nil (said on stderr) when the watchdog cannot start.
    public static let shared: Lifeline? = {
        do {
            return try Lifeline()
        } catch {
            FileHandle.standardError.write(
                Data("lifeline: \(error); children of this test process are not stopped if it is killed\n".utf8))
            return nil
        }
    }()

    /// The children to stop: one line each, the pid and its start time (field 22 of /proc/PID/stat).
    let list: String
    /// The pipe's write end; -1 once cut (closing a descriptor twice could close another's).
    private let writeEnd: Locked<Int32>
    /// The watchdog's pid.
    public let watchdog: pid_t

    /// The watchdog: it waits for the end of its input, then stops the children on the list.
    static let script = #"""
        read -r _
        stopped=""
        while read -r pid start; do
          now=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20)
          if [ -n "$now" ] && [ "$now" = "$start" ] && kill -TERM "$pid" 2>/dev/null; then stopped="$stopped $pid"; fi
        done < "$1"
        i=0
        while [ -n "$stopped" ] && [ $i -lt 50 ]; do
          left=""
          for pid in $stopped; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
          stopped=$left
          [ -n "$stopped" ] && sleep 0.1
          i=$((i + 1))
        done
        for pid in $stopped; do kill -KILL "$pid" 2>/dev/null; done
        rm -f "$1"
        """#

    public init() throws {
        list =
            FileManager.default.temporaryDirectory.appendingPathComponent("navigator-children-\(UUID().uuidString)")
            .path
        guard FileManager.default.createFile(atPath: list, contents: nil) else {
            throw ChildProcessError("cannot create \(list)")
        }
        let ends = try ChildProcess.pipeEnds()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
        // It lives as long as the test process: a socket or pipe of the test process it held
        // would never look closed to its peer.
        guard ChildProcess.closeFrom(&actions, 3) == 0 else {
            close(ends.read)
            close(ends.write)
            throw ChildProcessError("posix_spawn: cannot close from 3")
        }
        let argv = ChildProcess.cStrings(["/bin/bash", "-c", Self.script, "lifeline", list])
        let envp = ChildProcess.cStrings(ChildProcess.environmentStrings)
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, envp)
        close(ends.read)
        guard result == 0 else {
            close(ends.write)
            throw ChildProcessError("posix_spawn /bin/bash: \(String(cString: strerror(result)))")
        }
        writeEnd = Locked(ends.write)
        watchdog = pid
    }

    /// Puts `pid` on the list, with its start time (a pid the system gave to another process
    /// since is left alone).
    func watch(_ pid: pid_t) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let paren = stat.lastIndex(of: ")")
        else { return }  // already gone
        let fields = stat[stat.index(after: paren)...].split(separator: " ")
        guard fields.count > 19 else { return }
        let line = "\(pid) \(fields[19])\n"
        Self.appending.withLock { _ in
            guard let handle = FileHandle(forWritingAtPath: list) else { return }
            handle.seekToEndOfFile()
            handle.write(Data(line.utf8))
            handle.closeFile()
        }
    }

    private static let appending = Locked<Void>(())

    /// Ends the lifeline as the end of the process would: the watchdog stops the children
    /// listed. Further calls do nothing.
    public func cut() {
        writeEnd.withLock { end in
            guard end >= 0 else { return }
            close(end)
            end = -1
        }
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

/// Runs the built executable `name` (navctl, navload) with `arguments` and returns its exit status
/// and output (stdout and stderr together); `until`: stops it once its output satisfies that.
/// Bounded: 20 s, then it is stopped and the call throws with what it printed.
public func runBuilt(_ name: String, _ arguments: [String], until: ((String) -> Bool)? = nil) async throws -> (
    status: Int32, output: String
) {
    let binary = BuiltProducts.executable(name)
    guard FileManager.default.isExecutableFile(atPath: binary.path) else {
        throw ClientError(.socket, "\(name) is not built at \(binary.path); run swift build first (./dev test does)")
    }
    let process = ChildProcess()
    process.executableURL = binary
    process.arguments = arguments
    let pipe = try ChildProcess.pipe()
    process.standardOutput = pipe.write
    process.standardError = pipe.write
    let output = ChildOutput(reading: pipe.read)
    do {
        defer { close(pipe.write) }
        try process.run()
    }
    let end = ContinuousClock.now + .seconds(20)
    while process.isRunning {
        if let until, until(output.text) { process.terminate() }
        guard ContinuousClock.now < end else {
            process.terminate()
            await process.exited()
            await output.waitForEnd()
            throw ClientError(.timeout, "\(name) \(arguments) did not finish within 20 s; it printed:\n\(output.text)")
        }
        do {
            try await Task.sleep(for: .milliseconds(10))
        } catch {
            process.terminate()
            await process.exited()
            await output.waitForEnd()
            throw error
        }
    }
    await process.exited()
    await output.waitForEnd()  // the last output
    return (process.terminationStatus, output.text)
}
