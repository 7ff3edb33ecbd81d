/// A route map's version, and which sessions a staged rollout gives a candidate map.
///
/// A version names a map by its text: the same file has the same version on every instance and
/// after every restart, so that figures, audit records and the rollout's split can say which map
/// decided.
public enum RouteMapVersion {
    /// The embedded demo map's version.
    public static let embedded = "embedded"

    /// The first 12 hex digits of FNV-1a over the map's text (12 characters: Swift keeps them
    /// inline, so passing a version around allocates nothing).
    public static func of(text: String) -> String {
        let hex = String(StableHash.fnv1a(text) >> 16, radix: 16)
        return String(repeating: "0", count: 12 - hex.count) + hex
    }

    /// A rollout's share is counted in basis points: 10,000 is every session.
    public static let allSessions = 10_000

    /// The bucket of `session` (0 to 9,999) in a rollout salted with `salt` (the candidate's
    /// version): the session resolves with the candidate when its bucket is below the share in
    /// basis points. Mixed beyond FNV-1a so that the buckets do not follow the workers' shards
    /// or the instances' partitions (both FNV-1a modulo a small count), and salted so that each
    /// rollout chooses its own sessions.
    public static func bucket(of session: String, salt: String) -> Int {
        var mixer = SplitMix64(seed: StableHash.fnv1a(session) ^ StableHash.fnv1a(salt))
        return Int(mixer.next() % UInt64(allSessions))
    }
}
