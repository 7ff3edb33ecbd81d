/// Swift's dictionaries and sets keep their room when entries go: one that held every session
/// once (a restart's expiry pass, a burst of parked intents) would hold that room for good, tens
/// of bytes a session at rest. The service's per-session tables give it back once most of it is
/// spare.
extension Dictionary {
    /// Copies the entries into a table sized for them when fewer than a quarter of the room is
    /// used and the room is worth freeing (over `threshold` entries). O(count), and only after
    /// three quarters of the entries went, so it costs no more than the removals did.
    mutating func releaseSpareRoom(threshold: Int = 1024) {
        guard capacity > threshold, count * 4 < capacity else { return }
        var smaller = Self(minimumCapacity: count)
        for (key, value) in self { smaller[key] = value }
        self = smaller
    }
}

extension Set {
    /// As ``Swift/Dictionary/releaseSpareRoom(threshold:)``.
    mutating func releaseSpareRoom(threshold: Int = 1024) {
        guard capacity > threshold, count * 4 < capacity else { return }
        var smaller = Self(minimumCapacity: count)
        for element in self { smaller.insert(element) }
        self = smaller
    }
}

extension Array {
    /// Drops the first `count` elements into an array sized for the rest (`removeFirst` keeps
    /// the room of all of them).
    mutating func removeFirstReleasingRoom(_ count: Int) {
        self = Array(self[count...])
    }
}
