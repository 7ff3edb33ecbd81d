#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
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
/// asks ``check()`` four times a second.
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

    /// For the start-up line: `2048 MiB`, or `none`.
    var summary: String { limit.map { "\($0 >> 20) MiB" } ?? "none" }

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
        return pages * pageSize
    }

    /// What the service may use: the machine's memory, or its cgroup's limit when that is lower
    /// (systemd's `MemoryMax=` on the unit or a slice above it, a container's limit) — less a
    /// margin, so that the service stops, flushed, before the kernel's OOM killer kills it: a
    /// tenth, and at least 512 MiB (a peer can grow it by hundreds of MiB between two checks),
    /// but never below half. Nil when not even the machine's memory can be read.
    static func defaultLimit() -> UInt64? {
        let pages = sysconf(Int32(_SC_PHYS_PAGES))
        guard pages > 0 else { return nil }
        var total = UInt64(pages) * pageSize
        if let cgroup = cgroupLimit() { total = min(total, cgroup) }
        let margin = max(total / 10, 512 << 20)
        return max(total / 2, total > margin ? total - margin : 0)
    }

    /// The lowest memory limit of this process's cgroup and those above it: cgroup v2's
    /// `memory.max` along the path /proc/self/cgroup gives (readable where /proc/meminfo is
    /// not: systemd's `ProcSubset=pid`), or v1's `memory.limit_in_bytes`. Nil when none is set.
    static func cgroupLimit() -> UInt64? {
        guard let membership = read("/proc/self/cgroup") else { return nil }
        var lowest: UInt64? = nil
        func consider(_ file: String) {
            // "max" (v2) or a huge number (v1) when there is no limit.
            guard let text = read(file), let value = UInt64(text.split(separator: "\n").first ?? ""),
                value < 1 << 60
            else { return }
            lowest = min(lowest ?? value, value)
        }
        for line in membership.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let (controllers, path) = (fields[1], String(fields[2]))
            let v2 = fields[0] == "0" && controllers.isEmpty
            guard v2 || controllers.split(separator: ",").contains("memory") else { continue }
            var components = path.split(separator: "/").map(String.init)
            while true {
                let directory = components.isEmpty ? "" : "/" + components.joined(separator: "/")
                if v2 {
                    consider("/sys/fs/cgroup\(directory)/memory.max")
                } else {
                    consider("/sys/fs/cgroup/memory\(directory)/memory.limit_in_bytes")
                }
                guard !components.isEmpty else { break }
                components.removeLast()
            }
        }
        return lowest
    }

    private static var pageSize: UInt64 { UInt64(sysconf(Int32(_SC_PAGESIZE))) }

    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

#if canImport(Glibc)
    private let systemRead = Glibc.read
#elseif canImport(Musl)
    private let systemRead = Musl.read
#elseif canImport(Darwin)
    private let systemRead = Darwin.read
#endif
