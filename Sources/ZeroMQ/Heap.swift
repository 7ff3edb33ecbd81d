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
