import CZeroMQ

/// What a child process started with `posix_spawn` inherits.
public enum Spawning {
    /// Adds to `actions` the closing of every descriptor from `low` up in the child, so that it
    /// inherits only its standard streams (those below `low`), not whatever the parent had open
    /// without close-on-exec. Returns 0, or the error number (ENOSYS where the C library cannot).
    @discardableResult
    public static func closeDescriptors(from low: Int32, in actions: UnsafeMutableRawPointer) -> Int32 {
        czmq_spawn_close_from(actions, low)
    }
}
