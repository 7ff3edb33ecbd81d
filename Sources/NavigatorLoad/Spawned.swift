import Foundation
import NavigatorClient
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with `posix_spawn`, its standard input and output on pipes: navload's
/// relay. Not Foundation's `Process`: on Linux its `run()` reads past a `dirent` while listing
/// /proc/self/fd (`findMaximumOpenFromProcSelfFD`, swift-corelibs-foundation#5472, fixed after
/// this toolchain) and now and then crashes the process that starts the child with SIGSEGV —
/// the test process too, where tests measure the floor.
final class Spawned {
    let pid: pid_t
    /// The child's standard output.
    let output: FileHandle
    /// The write end of the child's standard input; -1 once closed.
    private var input: Int32

    init(executable: String, arguments: [String]) throws {
        let (inRead, inWrite) = try Self.pipe()
        let (outRead, outWrite) = try Self.pipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inRead, 0)
        posix_spawn_file_actions_adddup2(&actions, outWrite, 1)
        // Only its standard streams, nothing else the parent has open without close-on-exec
        // (another child's pipe, say: that child's end of input would not come while the relay
        // held it).
        Spawning.closeDescriptors(from: 3, in: &actions)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        close(inRead)
        close(outWrite)
        guard result == 0 else {
            close(inWrite)
            close(outRead)
            throw ClientError(.socket, "starting \(executable) failed: \(String(cString: strerror(result)))")
        }
        self.pid = pid
        input = inWrite
        output = FileHandle(fileDescriptor: outRead, closeOnDealloc: true)
    }

    /// Closes its input, sends SIGTERM (the end of input is not enough when another process
    /// started meanwhile inherited the pipe's write end: the relay never saw it, and the wait
    /// went on for ever, seen once under the full suite) and waits for it to end.
    func stop() {
        if input >= 0 {
            close(input)
            input = -1
        }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
    }

    /// A pipe, close-on-exec (pipe2 is not in Swift's Glibc module: a child spawned by another
    /// thread between the two calls may inherit both ends, which `stop()` allows for).
    private static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else {
            throw ClientError(.socket, "pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }
}
