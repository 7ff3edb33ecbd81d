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

    /// Lowers the calling thread's scheduling priority to nice value `nice` (Linux keeps one per
    /// thread), so that a woken thread of the hot path takes the core from it rather than waiting
    /// for it: the offers of ``step()`` cannot cut short a stretch of work between two of them
    /// (BENCHMARKS.md, "The write-behind gives way"). Only lowers: a thread at or below `nice`
    /// already is left as it is (an unprivileged process could not raise it back). Returns nil when
    /// done or not needed, else what the kernel said.
    public static func lowerPriority(ofThisThreadTo nice: Int32) -> String? {
        #if os(Linux)
            let which = __priority_which_t(PRIO_PROCESS.rawValue)
            errno = 0
            let current = getpriority(which, 0)  // 0: the calling thread, on Linux
            if current == -1 && errno != 0 { return String(cString: strerror(errno)) }
            guard nice > current else { return nil }
            guard setpriority(which, 0, nice) == 0 else { return String(cString: strerror(errno)) }
            return nil
        #else
            return nil  // nice values are per process elsewhere: the whole service would be lowered
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
