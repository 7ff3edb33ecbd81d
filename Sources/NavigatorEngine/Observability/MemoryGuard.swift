import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The service's resident memory against a ceiling (`maxMemoryMegabytes`), read from /proc.
///
/// Every input navigatord reads has a limit of its own, but one it cannot set: libzmq keeps
/// every frame of a message until its last frame has come (messages are delivered whole), and
/// bounds a message's frames by neither count nor bytes — its high-water marks count whole
/// messages. A peer that can connect and keeps sending frames marked "more" makes the service
/// hold them without end (about 64 bytes a frame, for 2 bytes on the wire). Nothing above
/// libzmq sees those frames, so nothing can refuse them; what the service can do is stop, with
/// the reason and its state flushed, before the machine runs out of memory. ``MemoryLoop``
/// asks ``check()`` once a second.
struct MemoryGuard: Sendable {
    /// Bytes; nil: no ceiling.
    let limit: UInt64?

    /// `megabytes`: the setting (0: no ceiling; nil: ``defaultLimit()``).
    init(megabytes: Int?) {
        if let megabytes {
            limit = megabytes > 0 ? UInt64(megabytes) << 20 : nil
        } else {
            limit = Self.defaultLimit()
        }
    }

    /// Throws when the resident memory is above the ceiling, saying both and why it may be.
    func check() throws(EngineError) {
        guard let limit, let resident = Self.residentBytes(), resident > limit else { return }
        throw EngineError(
            .memoryLimit,
            "resident memory \(resident >> 20) MiB is above maxMemoryMegabytes (\(limit >> 20)): stopping before the machine runs out (libzmq keeps every frame of a message that never ends; docs/operations.md, \"Memory ceiling\")"
        )
    }

    /// The process's resident memory (/proc/self/statm), nil where it cannot be read.
    static func residentBytes() -> UInt64? {
        guard let text = read("/proc/self/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else { return nil }
        return pages * UInt64(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// 90 % of the memory the service may have: the machine's (/proc/meminfo's MemTotal), or its
    /// cgroup's limit (/sys/fs/cgroup/memory.max: systemd's MemoryMax=, a container's) when that
    /// is lower — so the service stops, flushed, before the kernel kills it. Nil when neither can
    /// be read.
    static func defaultLimit() -> UInt64? {
        var total: UInt64? = nil
        if let meminfo = read("/proc/meminfo") {
            for line in meminfo.split(separator: "\n") where line.hasPrefix("MemTotal:") {
                let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }
                total = kilobytes.map { $0 * 1024 }
            }
        }
        // "max" when the cgroup has no limit.
        if let cgroup = read("/sys/fs/cgroup/memory.max").flatMap({ UInt64($0.split(separator: "\n").first ?? "") }) {
            total = min(total ?? cgroup, cgroup)
        }
        return total.map { $0 / 10 * 9 }
    }

    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
            guard bytes.count < 1 << 20 else { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The thread that asks ``MemoryGuard/check()`` once a second (nav-memory); above the ceiling
/// it fails, and the service stops as in a graceful stop, its state flushed.
struct MemoryLoop: SocketLoop {
    let context: Context
    let memory: MemoryGuard
    let supervisor: Supervisor

    static let control = "inproc://navigator-control-memory"

    var name: String { "nav-memory" }

    func open() throws -> Socket {
        let control = try Socket(context, type: .pull)
        try control.bind(Self.control)
        return control
    }

    func run(_ control: Socket) throws {
        defer { control.close() }
        var poller = Poller()
        poller.add(control)
        while true {
            try supervisor.checkInjected(name)
            try memory.check()
            try poller.poll(timeout: .seconds(1))
            if try control.tryReceiveMultipart() != nil { return }  // the stop marker
        }
    }
}
