#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a thread doing long background work (the write-behind) lets the threads of the hot path
/// (workers, libzmq's I/O thread) run: after `interval` of work it offers its core to any thread
/// waiting for one (`sched_yield`), and goes on at once when none is.
///
/// Left alone, the kernel lets a busy thread run to the end of its time slice — on Linux with
/// 250 ticks a second, up to 4 ms — while a woken worker waits for that core; on a machine with
/// few cores those waits made the tail of the service's latency (BENCHMARKS.md, "The write-behind
/// gives way"). Each offer taken costs a switch of threads, so not more often than needed.
public struct GiveWay: Sendable {
    /// Nanoseconds of work between two offers.
    public let interval: Int64
    private var last: Int64

    public init(every interval: Int64) {
        precondition(interval > 0, "GiveWay(every:) takes a positive number of nanoseconds")
        self.interval = interval
        last = Self.clock()
    }

    /// One step of work done (a clock read); the first `interval` or more after the last offer
    /// offers the core again.
    public mutating func step() {
        let now = Self.clock()
        guard now - last >= interval else { return }
        Self.now()
        last = Self.clock()
    }

    /// Offers the core now.
    public static func now() { sched_yield() }

    /// Lowers the calling thread's scheduling priority by `steps` nice values (Linux keeps one per
    /// thread; at most to 19, the lowest), so that a woken thread of the hot path takes the core
    /// from it rather than waiting for it: the offers of ``step()`` cannot cut short a stretch of
    /// work between two of them. Only lowers (an unprivileged process could not raise it back);
    /// threads this thread starts afterwards inherit the lower priority. Returns nil when done, else
    /// what failed.
    public static func lowerPriority(ofThisThreadBy steps: Int32) -> String? {
        guard steps > 0 else { return nil }
        #if os(Linux)
            let which = __priority_which_t(PRIO_PROCESS.rawValue)  // with 0 for who: the calling thread
            errno = 0
            let current = getpriority(which, 0)
            if current == -1, errno != 0 { return "getpriority(PRIO_PROCESS, 0) failed with errno \(errno)" }
            let target = min(current + min(steps, 39), 19)
            guard target > current else { return "the thread runs at nice \(current) already, the lowest there is" }
            guard setpriority(which, 0, target) == 0 else {
                return "setpriority(PRIO_PROCESS, 0, \(target)) failed with errno \(errno)"
            }
            return nil
        #else
            return "nice values are per process on this system: lowering one thread's would lower the whole service"
        #endif
    }

    /// What the write-behind gives way after: about twenty sessions encoded or written.
    public static let halfAMillisecond: Int64 = 500_000

    private static func clock() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
