/// A hash of text that is the same in every run, process and instance — what sessions are
/// sharded to workers and partitioned among instances by. Swift's `Hasher` is seeded per process,
/// so it cannot serve.
public enum StableHash {
    /// FNV-1a (64 bits) over the UTF-8 bytes: cheap, and spreads short ids well.
    public static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// The bucket of `text` among `count`.
    public static func bucket(of text: String, count: Int) -> Int { Int(fnv1a(text) % UInt64(count)) }
}
