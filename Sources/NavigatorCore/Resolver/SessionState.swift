/// Everything the resolver knows about one session.
public struct SessionState: Hashable, Sendable, Codable {
    /// The active-screen tree; changed only through ``ScreenTree/apply(_:)-([Command])``.
    public internal(set) var tree: ScreenTree
    /// Conditions for guards, such as `authenticated`.
    public internal(set) var conditions: [String: Bool]
    /// Intents waiting for a guard to be met or a blocker to go, oldest first.
    public internal(set) var parked: [ParkedIntent]
    /// Intent ids seen within the dedup window, as keyed hashes with when they were seen.
    public internal(set) var recentIntentIDs: RecentIntentIDs
    /// The seq of the last batch published for something other than a client event (an intent,
    /// a release, a guard's redirect): a shell whose last seq is older has not seen it, so its
    /// tree events are stale (``Resolver/staleness(of:lastSeq:epoch:session:seq:currentEpoch:)``).
    public var lastServiceSeq: UInt64
    /// Whether the session's shell said it is ready (and has not started over since).
    public internal(set) var shellReady: Bool
    /// The last parked intents that expired, oldest first (at most ``ExpiredIntent/kept``, each
    /// for the dedup window after it expired): shells that were not there when they expired can
    /// see them. Packed: see ``ExpiredIntents``.
    public internal(set) var recentlyExpired: ExpiredIntents
    /// The app version the session's shell said in its last `ready` (nil: not said): screens
    /// the route map marks `since:` a later version are not shown to it (their fallback is).
    public internal(set) var appVersion: AppVersion?

    public init(
        tree: ScreenTree, conditions: [String: Bool] = [:], parked: [ParkedIntent] = [],
        recentIntentIDs: RecentIntentIDs = RecentIntentIDs(), lastServiceSeq: UInt64 = 0, shellReady: Bool = false,
        recentlyExpired: [ExpiredIntent] = [], appVersion: AppVersion? = nil
    ) {
        self.appVersion = appVersion
        self.recentlyExpired = ExpiredIntents(recentlyExpired)
        self.shellReady = shellReady
        self.tree = tree
        self.conditions = conditions
        self.parked = parked
        self.recentIntentIDs = recentIntentIDs
        self.lastServiceSeq = lastServiceSeq
    }

    public func isMet(_ condition: String) -> Bool { conditions[condition] == true }

    /// What a flight recorder keeps of the session as the resolver finds it, to resolve again
    /// later from there: its tree, conditions, parked intents, readiness and app version. Not its
    /// remembered intent ids: dedup does not depend on the route map, and sharing them would make
    /// the resolver copy them when it remembers the next.
    public var recordable: SessionState {
        SessionState(
            tree: tree, conditions: conditions, parked: parked, shellReady: shellReady, appVersion: appVersion)
    }

    /// Forgets what a session remembers only for `window` (the dedup window): the intent ids
    /// seen, and the expired intents that expired, `window` or longer before `now` (unix ns).
    /// Returns whether anything was forgotten. What a session at rest keeps is then its tree,
    /// its conditions and its parked intents.
    public mutating func forget(before now: Int64, window: Int64) -> Bool {
        let ids = recentIntentIDs.count
        recentIntentIDs.prune(now: now, window: window)
        let cutoff = now - min(window, RecentIntentIDs.longestWindow)
        let forgotExpired = recentlyExpired.forget(expiredAtOrBefore: cutoff)
        return recentIntentIDs.count != ids || forgotExpired
    }

    /// Whether anything would go by ``forget(before:window:)`` some time later.
    public var remembersForAWhile: Bool { !recentIntentIDs.isEmpty || !recentlyExpired.isEmpty }
}

/// A parked intent that expired before it could be shown.
public struct ExpiredIntent: Hashable, Sendable, Codable {
    /// How many a session keeps.
    public static let kept = 8

    public var intentID: String
    public var source: String
    /// Why it waited.
    public var reason: ParkReason
    public var parkedAt: Int64
    public var expiredAt: Int64

    public init(intentID: String, source: String, reason: ParkReason, parkedAt: Int64, expiredAt: Int64) {
        self.intentID = intentID
        self.source = source
        self.reason = reason
        self.parkedAt = parkedAt
        self.expiredAt = expiredAt
    }
}

/// An intent waiting to be shown.
public struct ParkedIntent: Hashable, Sendable, Codable {
    /// The intent, its target already turned into a validated path.
    public var intent: Intent
    public var reason: ParkReason
    public var parkedAt: Int64
    public var expiresAt: Int64

    public init(intent: Intent, reason: ParkReason, parkedAt: Int64, expiresAt: Int64) {
        self.intent = intent
        self.reason = reason
        self.parkedAt = parkedAt
        self.expiresAt = expiresAt
    }
}

extension Array where Element == ParkedIntent {
    // Read through the buffer's base address: `UnsafePointer`'s subscript lends an element in
    // place (an `unsafeAddress`), where the array's subscript, and `UnsafeBufferPointer`'s for
    // elements that can be copied, hand out a copy (a `get`), as `firstIndex(where:)`,
    // `removeAll(where:)` and `filter` do; a parked intent copied retains every string, array and
    // dictionary of its intent (BENCHMARKS.md, "Resolver alone").

    /// `body` with the parked intents in place and their count; nil when the array has no buffer
    /// (it may have one while empty: `body` then sees a count of 0).
    func inPlace<Result>(_ body: (UnsafePointer<ParkedIntent>, Int) -> Result) -> Result? {
        withUnsafeBufferPointer { parked in parked.baseAddress.map { body($0, parked.count) } }
    }

    /// Where the intent with this id waits (the one parked at `parkedAt`, if given: an id may
    /// wait twice when its time to live is longer than the dedup window).
    func index(ofIntent id: String, parkedAt: Int64? = nil) -> Int? {
        inPlace { parked, count in
            (0..<count).first { parked[$0].intent.id == id && (parkedAt == nil || parked[$0].parkedAt == parkedAt) }
        } ?? nil
    }

    /// Takes the intent with this id off the list (every entry of it, should there be more).
    mutating func remove(intent id: String) {
        while let index = index(ofIntent: id) { remove(at: index) }
    }
}

/// Why an intent waits.
public enum ParkReason: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A screen on its path needs a condition the session does not meet; `redirect` is shown.
    case guardUnmet(condition: String, redirect: String)
    /// Reaching the target would dismiss or cover a blocking modal.
    case blocked(by: NodeID, screen: String)
    /// The intent waits for the session's shell to say it is ready.
    case notReady

    public var description: String {
        switch self {
        case .notReady: "waiting for the shell to be ready"
        case .guardUnmet(let condition, let redirect): "waiting for \(condition) (showing \(redirect))"
        case .blocked(let id, let screen): "blocked by \(screen) (modal \(id))"
        }
    }

    /// The reason back from its ``description`` (state files that kept reasons as text), in
    /// either form a blocked reason has had: `blocked by payment (modal #6)` and, before that,
    /// `blocked by payment#6`; `nil` for text no reason gives.
    public init?(text: String) {
        if text == ParkReason.notReady.description {
            self = .notReady
        } else if text.hasPrefix("waiting for "), text.hasSuffix(")"), let open = text.firstRange(of: " (showing ") {
            let condition = String(text[text.index(text.startIndex, offsetBy: 12)..<open.lowerBound])
            let redirect = String(text[open.upperBound..<text.index(before: text.endIndex)])
            self = .guardUnmet(condition: condition, redirect: redirect)
        } else if text.hasPrefix("blocked by ") {
            let rest = text.dropFirst(11)
            if rest.hasSuffix(")"), let open = rest.ranges(of: " (modal #").last,
                let id = NodeID(
                    description: rest[rest.index(open.upperBound, offsetBy: -1)..<rest.index(before: rest.endIndex)])
            {
                self = .blocked(by: id, screen: String(rest[..<open.lowerBound]))
            } else if let hash = rest.lastIndex(of: "#"), let id = NodeID(description: rest[hash...]) {
                self = .blocked(by: id, screen: String(rest[..<hash]))
            } else {
                return nil
            }
        } else {
            return nil
        }
    }
}
