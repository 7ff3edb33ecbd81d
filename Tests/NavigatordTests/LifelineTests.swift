import Foundation
import NavigatorTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test processes' children are stopped when the test process ends without stopping them
/// (``Lifeline``): here a lifeline of its own is cut, as the end of the process would.
@Suite("Children of a test process that ends")
struct LifelineTests {
    @Test("cutting the lifeline stops the children on it, and only those")
    func cutStopsChildren() async throws {
        let lifeline = try Lifeline()
        let kept = try Lifeline()
        let watched = try Self.child(on: lifeline)
        let other = try Self.child(on: kept)
        defer {
            watched.terminate()
            other.terminate()
            kept.cut()
        }
        #expect(watched.isRunning && other.isRunning)

        lifeline.cut()
        try await Self.until("the watched child ends") { !watched.isRunning }
        #expect(watched.terminationStatus == SIGTERM, "stopped by SIGTERM, as a user would")
        #expect(other.isRunning, "a child on another lifeline is left alone")
        try await Self.until("the watchdog ends") { Self.reaped(lifeline.watchdog) }

        other.terminate()
        kept.cut()
        try await Self.until("the other child ends") { !other.isRunning }
        try await Self.until("the other watchdog ends") { Self.reaped(kept.watchdog) }
    }

    @Test("a child is given no descriptor of the test process beyond its standard three")
    func childInheritsNothingElse() async throws {
        // A pipe that is not close-on-exec, as a library might leave one.
        var ends: [Int32] = [-1, -1]
        try #require(Glibc.pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        let output = try ChildProcess.pipe()
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = [
            "-c",
            "for fd in \(ends[0]) \(ends[1]); do [ -e /proc/self/fd/$fd ] && echo \"$fd inherited\"; done; echo done",
        ]
        child.standardOutput = output.write
        try child.run()
        close(output.write)
        let text = ChildOutput(reading: output.read)
        #expect(await text.waitForEnd(), "the child's output did not end within 10 s")
        child.waitUntilExit()
        #expect(text.text == "done\n", "the child held descriptors it was not given: \(text.text)")
    }

    /// A child that would run ten minutes: a stand-in for navigatord.
    static func child(on lifeline: Lifeline) throws -> ChildProcess {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["600"]
        child.lifeline = lifeline
        try child.run()
        return child
    }

    static func reaped(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == pid
    }

    /// Waits for `condition`, checked every 5 ms, for up to 20 s.
    static func until(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("\(what): not within 20 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
