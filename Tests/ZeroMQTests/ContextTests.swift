import Foundation
import Locking
import Testing
import ZeroMQ

@Suite("Context")
struct ContextTests {
    /// The shutdown path every service thread relies on: a thread blocked in receive wakes with
    /// ETERM, closes its socket, and the context can then be terminated.
    @Test("shutdown wakes a thread blocked in receive with ETERM")
    func shutdownWakesReceiver() async throws {
        let context = try Context()
        let name = "blocked-\(UInt32.random(in: 0..<100_000))"
        let bound = Locked(false)
        let outcome = Locked<Result<String, ZeroMQError>?>(nil)
        let thread = DedicatedThread(name: name) {
            do {
                let pull = try Socket(context, type: .pull)
                try pull.bind("inproc://blocked")
                bound.withLock { $0 = true }
                let message = try pull.receive()  // blocks: nobody sends
                outcome.withLock { $0 = .success(message.string) }
            } catch let error as ZeroMQError {
                outcome.withLock { $0 = .failure(error) }
            } catch {
                Issue.record(error)
            }
        }
        defer { thread.join() }
        // Wait until the thread is really asleep inside libzmq, not merely about to call it.
        try await waitUntil("the receiver to block") { bound.withLock { $0 } && threadIsSleeping(named: name) }
        context.shutdown()
        try await waitUntil("the receiver to wake") { outcome.withLock { $0 != nil } }
        let result = try #require(outcome.withLock { $0 })
        #expect(throws: ZeroMQError.self) { try result.get() }
        if case .failure(let error) = result {
            #expect(error.code == .terminated)
            #expect(error.function == "zmq_msg_recv")
        }
        thread.join()  // the socket is closed by now, so terminate cannot wait on it
        try context.terminate()
    }

    @Test("sockets made after shutdown fail with ETERM; terminate is idempotent")
    func afterShutdown() throws {
        let context = try Context()
        context.shutdown()
        #expect { _ = try Socket(context, type: .push) } throws: { ($0 as? ZeroMQError)?.code == .terminated }
        try context.terminate()
        try context.terminate()
    }

    /// The crash of a `nav-signal` thread (a trap in libswiftCore): a stop marker sent from a
    /// thread of its own after the engine had terminated its context. libzmq had freed the
    /// context; zmq_socket on it answered EFAULT (or read freed memory).
    @Test("a socket asked of a terminated context fails with ETERM; libzmq is not called")
    func afterTerminate() throws {
        let context = try Context()
        try context.terminate()
        #expect { _ = try Socket(context, type: .push) } throws: { ($0 as? ZeroMQError)?.code == .terminated }
    }

    @Test("library version and capabilities")
    func version() {
        let version = zeroMQVersion
        #expect(version.major == 4 && version.minor >= 3)
        #expect(zeroMQHas("ipc"))
    }
}

/// Polls a condition, yielding between looks, until it holds or the deadline passes.
func waitUntil(_ what: String, within limit: Duration = deadline, _ condition: () -> Bool) async throws {
    let clock = ContinuousClock()
    let end = clock.now + limit
    while !condition() {
        guard clock.now < end else { throw TestFailure("timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(1))
    }
}

/// Whether this process has a thread with that name in interruptible sleep (blocked in a poll).
func threadIsSleeping(named name: String) -> Bool {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
    for task in tasks {
        let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
        guard comm.trimmingCharacters(in: .whitespacesAndNewlines) == name else { continue }
        let stat = (try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8)) ?? ""
        // Field 3, after the parenthesised name: the scheduler state.
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(close, offsetBy: 2)...].hasPrefix("S")
    }
    return false
}
