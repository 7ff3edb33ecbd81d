import Foundation

/// Runs `body` on a thread of its own, as part of the calling task, and returns what it returns
/// (or throws what it throws).
///
/// Swift Testing runs a test function on Swift concurrency's cooperative pool, which has one
/// thread per core: two here. A test that computes for seconds there (a property test over
/// thousands of random trees, in a debug build) holds a pool thread as long, and two of them
/// hold up every other test's awaits: a deadline, a service's graceful shutdown (which then
/// runs past its bound, and the next run starts a new epoch). Those tests do their work here
/// instead. The work stays in the test's task (a task executor preference, not a detached
/// thread), so an `#expect` in it is attributed to the test as usual.
public func offPool<T: Sendable>(name: String = "test-off-pool", _ body: () throws -> T) async throws -> T {
    let executor = ThreadExecutor(name: name)
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try body() }
}

/// A task executor with one thread that runs the jobs enqueued on it, in order, until stopped.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // `jobs` and `stopping` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.stackSize = 8 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// The thread ends once the jobs enqueued so far have run.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
