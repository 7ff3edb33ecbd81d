import Locking
import NavigatorClient

#if canImport(Glibc)
    import Glibc
#endif

/// navigatord stopped while the relay floor is measured (`navload --floor --pause-service`).
///
/// navigatord stays up, idle, while the floor is measured right after its run; whatever its
/// threads do then (the flush, packing, expiry, a timer's wake-up) shares the cores with the
/// relay and moves the floor — by more than two builds differ, and differently for each build
/// (BENCHMARKS.md, issue 31). Stopped (SIGSTOP), it takes no CPU; it is continued (SIGCONT) when
/// the floor is measured, when the measuring fails, and when navload is interrupted, hung up or
/// terminated meanwhile.
public enum ServicePause {
    /// The navigatord processes a run measured: the one given (`--service-pid`), else the one
    /// listening on the intents endpoint here. Nil when none is found on this machine.
    public static func processes(_ plan: LoadPlan) throws -> [Int32]? {
        if let pid = plan.servicePID { return [pid] }
        return try ProcessStats.service(listeningOn: plan.endpoints.intents).map { [$0] }
    }

    /// At most this many processes are paused at once.
    static let capacity = 16
    /// The paused processes, for the signal handler (0: a free slot): fixed storage it may
    /// read. Changed under `lock` only.
    nonisolated(unsafe) static let paused: UnsafeMutablePointer<Int32> = {
        let slots = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        slots.initialize(repeating: 0, count: capacity)
        return slots
    }()
    /// The slots, how many pauses are under way, and the signal handlers they replaced.
    private static let lock = Locked(Handlers())

    /// The signals that end navload while navigatord is paused: each continues it first.
    static let endingSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    private struct Handlers {
        var active = 0
        var replaced: [Int32: sighandler_t?] = [:]
    }

    /// `body` with the processes stopped; they are continued after it, whatever happens. Every
    /// process must exist before any is stopped.
    public static func whilePaused<R: Sendable>(_ pids: [Int32], _ body: () async throws -> R) async throws -> R {
        for pid in pids where kill(pid, 0) != 0 {
            let reason = String(cString: strerror(errno))
            throw ClientError(.invalidArgument, "navigatord (pid \(pid)) cannot be paused for the floor: \(reason)")
        }
        _ = paused  // initialized before a handler can read it
        lock.withLock { handlers in
            if handlers.active == 0 {
                for signal in endingSignals {
                    let previous = Glibc.signal(signal, continueAndDie)
                    // A signal navload ignores (a background job's SIGINT) stays ignored.
                    if unsafeBitCast(previous, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) {
                        Glibc.signal(signal, SIG_IGN)
                    }
                    handlers.replaced[signal] = previous
                }
            }
            handlers.active += 1
        }
        var stopped: [Int32] = []
        defer {
            for pid in stopped { kill(pid, SIGCONT) }
            lock.withLock { handlers in
                for index in 0..<capacity where stopped.contains(paused[index]) { paused[index] = 0 }
                handlers.active -= 1
                if handlers.active == 0 {
                    for (signal, previous) in handlers.replaced { Glibc.signal(signal, previous) }
                    handlers.replaced = [:]
                }
            }
        }
        for pid in pids {
            let claimed = lock.withLock { _ -> Bool in
                guard let free = (0..<capacity).first(where: { paused[$0] == 0 }) else { return false }
                paused[free] = pid
                return true
            }
            guard claimed else {
                throw ClientError(
                    .invalidArgument,
                    "navigatord (pid \(pid)) cannot be paused: \(capacity) processes are paused already")
            }
            stopped.append(pid)  // continued and its slot freed, whatever the stop's outcome
            guard kill(pid, SIGSTOP) == 0 else {
                let reason = String(cString: strerror(errno))
                throw ClientError(.invalidArgument, "navigatord (pid \(pid)) cannot be paused for the floor: \(reason)")
            }
        }
        return try await body()
    }
}

/// SIGINT, SIGTERM, SIGHUP or SIGQUIT while navigatord is paused: it is continued, then navload
/// ends as the signal would have ended it. (A SIGKILL, or a crash, leaves it stopped: `kill -CONT`
/// it.)
private func continueAndDie(_ signal: Int32) {
    for index in 0..<ServicePause.capacity where ServicePause.paused[index] != 0 {
        kill(ServicePause.paused[index], SIGCONT)
    }
    Glibc.signal(signal, SIG_DFL)
    raise(signal)
}
