import Foundation
import NavigatorClient
import NavigatorLoad
import NavigatorTestSupport
import Testing

/// `navload --floor --pause-service`: the service is stopped while the floor is measured and
/// continued after, also when the measuring fails.
@Suite("Pausing the service for the floor")
struct ServicePauseTests {
    /// The process's state letter from /proc (T: stopped).
    static func state(_ pid: Int32) throws -> Character {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // "pid (comm) S ...": the state follows the last ')'.
        let after = stat[stat.lastIndex(of: ")")!...].dropFirst(2)
        return after.first!
    }

    /// Whether the process is (`stopped`) or is not stopped within a deadline: a signal takes
    /// effect when the process next runs.
    static func waitForState(_ pid: Int32, stopped: Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try state(pid) == "T") == stopped { return true }
            usleep(1000)
        }
        return false
    }

    /// A process to pause: `sleep 60`, killed by ``stop(_:)``.
    static func sleeper() throws -> ChildProcess {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["60"]
        try child.run()
        return child
    }

    static func stop(_ child: ChildProcess) {
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
    }

    @Test("stopped inside, continued after; continued after a failure too")
    func pauseAndContinue() async throws {
        let child = try Self.sleeper()
        defer { Self.stop(child) }
        let pid = child.processIdentifier
        let inside = try await ServicePause.whilePaused([pid]) { try Self.waitForState(pid, stopped: true) }
        #expect(inside, "the process was not stopped while paused")
        #expect(try Self.waitForState(pid, stopped: false), "the process was not continued")

        struct Failure: Error {}
        await #expect(throws: Failure.self) {
            try await ServicePause.whilePaused([pid]) { () async throws -> Int in
                // Seen stopped first, so that "continued" below means something.
                #expect(try Self.waitForState(pid, stopped: true), "the process was not stopped while paused")
                throw Failure()
            }
        }
        #expect(try Self.waitForState(pid, stopped: false), "the process was not continued after a failure")
    }

    @Test("a process that does not exist is an error naming it, and none is stopped")
    func cannotPause() async throws {
        let child = try Self.sleeper()
        defer { Self.stop(child) }
        // A pid beyond pid_max: no such process.
        let missing: Int32 = 4_194_304 + 1
        do {
            _ = try await ServicePause.whilePaused([child.processIdentifier, missing]) { 0 }
            Issue.record("pausing a missing process did not fail")
        } catch let error as ClientError {
            #expect(error.description.contains("pid \(missing)"), "\(error)")
        }
        // Checked before any was stopped: the first process never was.
        #expect(try Self.state(child.processIdentifier) != "T", "the first process was stopped")
        await #expect(throws: ClientError.self) {
            try await ServicePause.whilePaused([missing]) { 0 }
        }
    }
}
