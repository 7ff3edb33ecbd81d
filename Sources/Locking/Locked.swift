import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if NAVIGATOR_TSAN
    /// A value behind a lock: every lock of navigatord and its tools.
    ///
    /// This build (`-Xswiftc -DNAVIGATOR_TSAN`, as `./dev tsan` builds) locks with a pthread
    /// mutex, which ThreadSanitizer intercepts: it sees each lock and unlock as the
    /// synchronization it is. The default build uses Synchronization's `Mutex`, which on Linux
    /// waits on a futex directly — invisible to ThreadSanitizer, which then reports every access
    /// made under such a lock as a race.
    public struct Locked<Value: ~Copyable>: ~Copyable {
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private let value: UnsafeMutablePointer<Value>

        public init(_ initialValue: consuming sending Value) {
            mutex = .allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
            value = .allocate(capacity: 1)
            value.initialize(to: initialValue)
        }

        deinit {
            value.deinitialize(count: 1)
            value.deallocate()
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        public borrowing func withLock<Result: ~Copyable, E: Error>(
            _ body: (inout sending Value) throws(E) -> sending Result
        ) throws(E) -> sending Result {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }

        /// `body` with the value if the lock is free now; nil, without waiting, if it is held.
        public borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
            _ body: (inout sending Value) throws(E) -> sending Result
        ) throws(E) -> sending Result? {
            guard pthread_mutex_trylock(mutex) == 0 else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    extension Locked: @unchecked Sendable where Value: ~Copyable {}
#else
    /// A value behind a lock: every lock of navigatord and its tools. Synchronization's `Mutex`
    /// (a futex on Linux); a build with `-Xswiftc -DNAVIGATOR_TSAN` (`./dev tsan`) uses a pthread
    /// mutex instead, which ThreadSanitizer can see — it cannot see a futex, and reports every
    /// access made under such a lock as a race.
    @frozen
    public struct Locked<Value: ~Copyable>: ~Copyable {
        @usableFromInline let mutex: Mutex<Value>

        @inlinable
        public init(_ initialValue: consuming sending Value) { mutex = Mutex(initialValue) }

        @inlinable
        public borrowing func withLock<Result: ~Copyable, E: Error>(
            _ body: (inout sending Value) throws(E) -> sending Result
        ) throws(E) -> sending Result {
            try mutex.withLock(body)
        }

        /// `body` with the value if the lock is free now; nil, without waiting, if it is held.
        @inlinable
        public borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
            _ body: (inout sending Value) throws(E) -> sending Result
        ) throws(E) -> sending Result? {
            try mutex.withLockIfAvailable(body)
        }
    }

    extension Locked: Sendable where Value: ~Copyable {}
#endif
