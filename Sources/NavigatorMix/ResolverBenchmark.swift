import NavigatorCore

/// Resolutions per second on one thread for a realistic mix (``IntentMix``) over many sessions:
/// the resolver alone, no sockets, no encoding.
public struct ResolverBenchmark: Sendable {
    public struct Report: Hashable, Sendable {
        public var sessions: Int
        public var operations: Int
        public var seconds: Double
        public var outcomes: [String: Int]
        public var events: Int
        public var released: Int
        /// Screens per session tree at the end, on average (how big the trees grew).
        public var meanScreens: Double
        /// Parked intents per session at the end, on average.
        public var meanParked: Double

        public var perSecond: Double { Double(operations) / seconds }
        public var nanosecondsEach: Double { seconds * 1e9 / Double(operations) }
    }

    public var map: RouteMap
    public var sessions: Int
    public var duration: Duration
    public var seed: UInt64
    /// Whether each intent's session is kept as the resolver found it while it resolves, as
    /// navigatord's flight recorder keeps it (``SessionState/recordable``): the
    /// arrays the resolution then changes are copied first, as they are in the service.
    public var keepingBefore: Bool
    /// Stop after this many operations (rounded up to a whole 1,024) rather than after
    /// `duration`: the same seed then gives the same report, whatever the machine.
    public var operationLimit: Int?

    public init(
        map: RouteMap, sessions: Int = 1000, duration: Duration = .seconds(5), seed: UInt64 = 1,
        keepingBefore: Bool = false, operationLimit: Int? = nil
    ) {
        self.map = map
        self.sessions = sessions
        self.duration = duration
        self.seed = seed
        self.keepingBefore = keepingBefore
        self.operationLimit = operationLimit
    }

    /// Runs on the calling thread until `duration` has passed, or until `operationLimit`
    /// operations are done when it is set (either checked every 1,024 operations).
    public func run() throws -> Report {
        let resolver = try Resolver(map: map)
        var mix = IntentMix(map: map, seed: seed)
        // The actions are made first, so the figure is the resolver's alone.
        let poolSize = 200_000
        var actions: [(session: Int, action: IntentMix.Action)] = []
        actions.reserveCapacity(poolSize)
        var random = SplitMix64(seed: seed &+ 1)
        for _ in 0..<poolSize {
            let session = Int(random.next() % UInt64(sessions))
            actions.append((session, mix.next(session: "s\(session)")))
        }
        // Sessions of signed-in users, as most are; the mix signs some out now and then.
        var signedIn = resolver.initialState()
        _ = resolver.apply(.conditions(["authenticated": true]), to: &signedIn, now: 0)
        var states = [SessionState](repeating: signedIn, count: sessions)
        // Counted by kind, named once at the end: a dictionary keyed by the names would hash a
        // string every operation, which is the harness's cost, not the resolver's.
        var counts = [Int](repeating: 0, count: Self.outcomeNames.count)
        // As a worker resolves: each resolution's arrays handed back for the next.
        var buffers = ResolutionBuffers()
        var operations = 0
        var events = 0
        var released = 0
        var now: Int64 = 1_700_000_000_000_000_000
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + duration
        var index = 0
        while true {
            for _ in 0..<1024 {
                let (session, action) = actions[index]
                index = index + 1 == poolSize ? 0 : index + 1
                // 5 ms of simulated time per operation: a lap of the pool spans 1,000 s, longer
                // than the dedup window, so ids repeat only where the mix meant them to.
                now += 5_000_000
                let expired = resolver.expire(&states[session], now: now)
                if !expired.isEmpty { counts[Self.expiredKind] += expired.count }
                switch action {
                case .intent(let intent):
                    let before = keepingBefore ? states[session].recordable : nil
                    var resolution = resolver.resolve(intent, into: &states[session], now: now, buffers: &buffers)
                    withExtendedLifetime(before) {}
                    counts[Self.kind(resolution.outcome)] += 1
                    released += resolution.released.count
                    buffers.recycle(&resolution)
                case .event(let event):
                    var result = resolver.apply(event, to: &states[session], now: now, buffers: &buffers)
                    events += 1
                    released += result.released.count
                    buffers.recycle(&result)
                }
                operations += 1
            }
            if let operationLimit { if operations >= operationLimit { break } } else if clock.now >= end { break }
        }
        let elapsed = clock.now - start
        var outcomes: [String: Int] = [:]
        for (kind, count) in counts.enumerated() where count > 0 { outcomes[Self.outcomeNames[kind]] = count }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let screens = states.reduce(0) { $0 + $1.tree.stacks.reduce(0) { $0 + $1.screens.count } }
        let parked = states.reduce(0) { $0 + $1.parked.count }
        return Report(
            sessions: sessions, operations: operations, seconds: seconds, outcomes: outcomes, events: events,
            released: released, meanScreens: Double(screens) / Double(sessions),
            meanParked: Double(parked) / Double(sessions))
    }

    /// The report's names of the outcomes, by ``kind(_:)``, and of the expired intents last.
    static let outcomeNames = [
        "resolved", "refreshed", "ignored", "parked (blocked)", "parked (guard)", "parked (not ready)", "rejected",
        "expired",
    ]
    static let expiredKind = 7

    static func kind(_ outcome: Resolution.Outcome) -> Int {
        switch outcome {
        case .resolved: 0
        case .refreshed: 1
        case .ignored: 2
        case .parked(.blocked, _): 3
        case .parked(.guardUnmet, _): 4
        case .parked(.notReady, _): 5
        case .rejected: 6
        }
    }
}
