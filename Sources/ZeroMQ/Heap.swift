import CZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process heap, for long-lived services that free much at once.
public enum Heap {
    /// Returns whole free pages of malloc's heap to the system (glibc's `malloc_trim`), so that
    /// memory freed in bulk shows in RSS. It walks the heap: call it after freeing much, not on
    /// every free. Whether anything was returned.
    @discardableResult
    public static func returnFreePages() -> Bool { czmq_trim_heap() != 0 }

    /// What ``holdThresholds(environment:)`` fixes malloc's trim and mmap thresholds at: glibc's
    /// own starting values.
    public static let heldThreshold = 128 << 10

    /// Keeps malloc's trim and mmap thresholds at ``heldThreshold`` for the life of the process,
    /// unless `environment` sets either (`MALLOC_TRIM_THRESHOLD_`, `MALLOC_MMAP_THRESHOLD_`, or
    /// `GLIBC_TUNABLES` naming `glibc.malloc.trim_threshold` or `glibc.malloc.mmap_threshold`):
    /// then glibc has them as the operator wants. Whether they were fixed here.
    ///
    /// Left to glibc, both rise each time the process frees a large block that had its own
    /// mapping (the trim threshold to twice that block, up to 64 MiB). A thread's malloc arena
    /// keeps the free space at its end, up to that threshold, resident for good: `malloc_trim`
    /// gives back free pages inside arenas but not that space. In a long-lived service one large
    /// free early on (a table that grew, a restore's buffers) left megabytes resident per arena.
    @discardableResult
    public static func holdThresholds(environment: [String: String]) -> Bool {
        guard !environmentSetsThresholds(environment) else { return false }
        return czmq_fix_heap_thresholds(Int32(heldThreshold), Int32(heldThreshold)) != 0
    }

    /// Whether `environment` sets malloc's trim or mmap threshold for glibc.
    public static func environmentSetsThresholds(_ environment: [String: String]) -> Bool {
        if environment["MALLOC_TRIM_THRESHOLD_"] != nil || environment["MALLOC_MMAP_THRESHOLD_"] != nil { return true }
        guard let tunables = environment["GLIBC_TUNABLES"] else { return false }
        // name=value pairs separated by colons; glibc passes over a name without a value.
        return tunables.split(separator: ":").contains { pair in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { return false }
            return parts[0] == "glibc.malloc.trim_threshold" || parts[0] == "glibc.malloc.mmap_threshold"
        }
    }

    /// `bytes` (a multiple of the page size) of zeroed memory mapped for the caller alone,
    /// outside malloc's heap: long-lived blocks there do not pin malloc's pages, and unmapped
    /// they go back to the system whole. Nil when the system refuses (then use malloc).
    public static func mapPages(_ bytes: Int) -> UnsafeMutableRawPointer? {
        let address = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let address, address != MAP_FAILED else { return nil }
        return address
    }

    /// Gives back what ``mapPages(_:)`` mapped.
    public static func unmapPages(_ address: UnsafeMutableRawPointer, _ bytes: Int) {
        let result = munmap(address, bytes)
        precondition(result == 0, "munmap of a block mapPages returned failed: errno \(errno)")
    }

    /// The system's page size.
    public static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
}
