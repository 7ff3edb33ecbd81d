/// The secret key of a state file's dedup hashes (SipHash-2-4): made at random when the file is
/// created and kept in it, so the hashes of stored ids stay valid across restarts, and a
/// producer cannot make up an id whose hash equals another producer's.
public struct DedupKey: Hashable, Sendable {
    public var k0: UInt64
    public var k1: UInt64

    public init(k0: UInt64, k1: UInt64) {
        self.k0 = k0
        self.k1 = k1
    }

    /// A new random key.
    public static func random() -> DedupKey {
        var generator = SystemRandomNumberGenerator()
        return DedupKey(k0: generator.next(), k1: generator.next())
    }

    /// SipHash-2-4 of `bytes` under this key (Aumasson and Bernstein, 2012).
    public func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ k0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ k1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ k0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ k1
        @inline(__always) func round() {
            v0 &+= v1
            v1 = (v1 << 13 | v1 >> 51) ^ v0
            v0 = v0 << 32 | v0 >> 32
            v2 &+= v3
            v3 = (v3 << 16 | v3 >> 48) ^ v2
            v0 &+= v3
            v3 = (v3 << 21 | v3 >> 43) ^ v0
            v2 &+= v1
            v1 = (v1 << 17 | v1 >> 47) ^ v2
            v2 = v2 << 32 | v2 >> 32
        }
        var word: UInt64 = 0
        var count = 0
        for byte in bytes {
            word |= UInt64(byte) << (8 * UInt64(count & 7))
            count += 1
            if count & 7 == 0 {
                v3 ^= word
                round()
                round()
                v0 ^= word
                word = 0
            }
        }
        word |= UInt64(truncatingIfNeeded: count) << 56
        v3 ^= word
        round()
        round()
        v0 ^= word
        v2 ^= 0xFF
        round()
        round()
        round()
        round()
        return v0 ^ v1 ^ v2 ^ v3
    }

    /// The 48 bits of an intent id's hash that ``RecentIntentIDs`` keeps.
    public func intentIDHash(_ id: String) -> UInt64 { hash(id.utf8) >> 16 }
}

/// The intent ids a session saw within the dedup window, 8 bytes each: the id's keyed hash
/// (48 bits, ``DedupKey/intentIDHash(_:)``) and when it was seen, in ``tick``s (2 s) since
/// ``base``. Oldest first, at most the resolver's `dedupCapacity` of them.
///
/// False duplicates: a new id is taken for one already seen when its 48-bit hash equals that of
/// one of the n ids the session remembers, with probability n / 2^48 — at most 9.1e-13 per
/// intent with the limit of 256 ids (at 3,000 intents/s that is once in about 12,000 years). The
/// window is kept to within a tick: an id is remembered at least the window and less than a tick
/// longer (longer by the step when the clock stepped back: an id is never kept as seen before
/// the newest, so the list stays in order and the old ones go from its front). Times are held
/// for up to 65,535 ticks (36 hours) past ``base``, which moves on as older ids go; a window
/// longer than that counts as that long.
public struct RecentIntentIDs: Hashable, Sendable, Codable {
    /// The resolution of the times kept, in nanoseconds.
    public static let tick: Int64 = 2_000_000_000
    /// The longest window the times can express.
    public static let longestWindow = Int64(UInt16.max) * tick

    /// When tick 0 is (unix ns).
    public private(set) var base: Int64
    /// `hash << 16 | ticks since base`, oldest first.
    public private(set) var entries: [UInt64]

    public init() {
        base = 0
        entries = []
    }

    /// As the state file keeps them.
    public init(base: Int64, entries: [UInt64]) {
        self.base = base
        self.entries = entries
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// When `hash` was seen within `window` before `now` (unix ns, to the tick), or nil.
    public func seen(_ hash: UInt64, within window: Int64, now: Int64) -> Int64? {
        let window = min(window, Self.longestWindow)
        // Newest first: a repeated id is usually a recent one. Read through the buffer with a
        // plain countdown: every intent scans the whole list (a new id matches nothing), and
        // `reversed()`'s indices cost more than the comparison they walk to.
        return entries.withUnsafeBufferPointer { entries in
            var index = entries.count
            while index > 0 {
                index -= 1
                let entry = entries[index]
                guard entry >> 16 == hash else { continue }
                let at = base + Int64(entry & 0xFFFF) * Self.tick
                if now - at < window { return at }
            }
            return nil
        }
    }

    /// Remembers `hash` as seen at `now`, first forgetting the ids older than `window` and, at
    /// `capacity`, the oldest.
    public mutating func insert(_ hash: UInt64, now: Int64, window: Int64, capacity: Int) {
        let window = min(window, Self.longestWindow)
        if entries.isEmpty { base = now }
        prune(now: now, window: window)
        if entries.count >= capacity { entries.removeFirst(entries.count - max(capacity - 1, 0)) }
        guard capacity > 0 else { return }
        // Rounded up: a kept time is never earlier than the real one, so an id is remembered
        // at least the window (and less than a tick longer).
        var ticks = (now - base + Self.tick - 1) / Self.tick
        if ticks > Int64(UInt16.max) {
            rebase(to: now - window)
            ticks = (now - base + Self.tick - 1) / Self.tick
        }
        // Never before the newest kept (a clock stepped back): the list stays oldest first, and
        // the id is remembered a little longer, never less than the window.
        let newest = entries.last.map { Int64($0 & 0xFFFF) } ?? 0
        entries.append(hash << 16 | UInt64(max(newest, min(ticks, Int64(UInt16.max)))))
    }

    /// Forgets the ids seen `window` or longer before `now`: those at the front of the list (an
    /// id kept behind a newer one, in a list stored before the list was kept in order, goes once
    /// it reaches the front; ``seen(_:within:now:)`` answers by its time all the same).
    public mutating func prune(now: Int64, window: Int64) {
        let window = min(window, Self.longestWindow)
        let cutoff = now - window  // seen at or before: forgotten
        guard let first = entries.first, base + Int64(first & 0xFFFF) * Self.tick <= cutoff else { return }
        // Oldest first (``insert(_:now:window:capacity:)`` keeps them so), so what goes is a
        // run at the front: counted, then dropped in one move.
        let base = self.base
        let run = entries.withUnsafeBufferPointer { entries in
            var count = 0
            while count < entries.count, base + Int64(entries[count] & 0xFFFF) * Self.tick <= cutoff { count += 1 }
            return count
        }
        entries.removeFirst(run)
        if entries.isEmpty { self.base = now }
    }

    /// Moves ``base`` forward to `newBase` (never past a kept id), re-expressing every time.
    private mutating func rebase(to newBase: Int64) {
        let base = self.base
        let oldest = entries.map { base + Int64($0 & 0xFFFF) * Self.tick }.min() ?? newBase
        let target = min(newBase, oldest)
        let shift = (target - base) / Self.tick  // whole ticks, so times stay exact
        guard shift > 0 else { return }
        entries = entries.map { ($0 & ~0xFFFF) | (($0 & 0xFFFF) - UInt64(shift)) }
        self.base += shift * Self.tick
    }
}
