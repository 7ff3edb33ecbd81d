import CZeroMQ

/// The process heap, for long-lived services that free much at once.
public enum Heap {
    /// Returns whole free pages of malloc's heap to the system (glibc's `malloc_trim`), so that
    /// memory freed in bulk shows in RSS. It walks the heap: call it after freeing much, not on
    /// every free. Whether anything was returned.
    @discardableResult
    public static func returnFreePages() -> Bool { czmq_trim_heap() != 0 }
}
