import Locking
import Metrics
import NavigatorCore
import Prometheus
import Synchronization

/// Intents by route and by source, their time to publish and to land, and each route's landing
/// ratio: whether users got where intents sent them (issue 32). Workers report here; /metrics
/// and `navctl stats --routes` read it.
///
/// Labels are bounded: a route is the intent's target screen when the route map has it, else
/// `other`; a source is the intent's `source` among the first ``maxSources`` distinct ones seen
/// of at most ``maxSourceBytes``, else `other`, and `url` or `path` (the target's kind) when the
/// intent names none. So the series number at most (screens + 1) per route family and
/// ``maxSources`` + 3 per source family, whatever producers send.
final class RouteMetrics: Sendable {
    /// What became of an intent, as the route and source families count it.
    enum Outcome: String, CaseIterable, Sendable {
        /// As the intent came (each intent once).
        case resolved, refreshed, ignored, parked, rejected
        /// What became of parked intents later: shown, expired, or refused when released.
        case released, expired, refused

        /// ``allCases``, made once (each read of `allCases` makes the array again).
        static let ordered = allCases

        /// Its place in ``allCases`` (and in ``OutcomeCounts``).
        var index: Int {
            switch self {
            case .resolved: 0
            case .refreshed: 1
            case .ignored: 2
            case .parked: 3
            case .rejected: 4
            case .released: 5
            case .expired: 6
            case .refused: 7
            }
        }
    }

    /// How many intents had each outcome: a count per ``Outcome``, in place (a worker adds one for
    /// every intent; a dictionary of outcomes hashed each). Iterates the outcomes counted at
    /// least once.
    struct OutcomeCounts: Hashable, Sendable, Sequence {
        private var counts = [UInt64](repeating: 0, count: Outcome.ordered.count)

        subscript(outcome: Outcome) -> UInt64 {
            get { counts[outcome.index] }
            set { counts[outcome.index] = newValue }
        }

        func makeIterator() -> Iterator { Iterator(counts: counts) }

        /// The outcomes counted at least once, in ``Outcome/allCases`` order, with their counts.
        struct Iterator: IteratorProtocol {
            let counts: [UInt64]
            var position = 0

            mutating func next() -> (Outcome, UInt64)? {
                while position < Outcome.ordered.count {
                    let outcome = Outcome.ordered[position]
                    position += 1
                    let count = counts[outcome.index]
                    if count > 0 { return (outcome, count) }
                }
                return nil
            }
        }
    }

    /// Distinct `source` values given labels of their own; later ones are counted as `other`.
    static let maxSources = 32
    /// Bytes of a source that gets a label of its own; a longer one counts as `other` (a label
    /// is kept and printed at every scrape for as long as the process runs).
    static let maxSourceBytes = 64
    static let other = "other"

    /// Bucket bounds of the time-to-publish and time-to-land histograms, in seconds.
    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    /// An intent counts as landed when a shell acknowledges its batch within this long of its
    /// sending (nanoseconds).
    let landingWindow: Int64
    private let factory: PrometheusMetricsFactory
    private let state: Locked<State>
    /// Batches dropped from a full landing book (settled as not landed early).
    private let evicted: Metrics.Counter

    /// One route's figures since the service started, for the landing ratio and `navctl stats`.
    struct Tally: Hashable, Sendable {
        var intents = OutcomeCounts()
        /// Intents whose batch a shell acknowledged within the window (or whose target was
        /// already shown), and those that did not land: rejected, expired, refused on release,
        /// or not acknowledged in time.
        var landed: UInt64 = 0
        var notLanded: UInt64 = 0
        /// Time to land of the acknowledged ones, counted in ``RouteMetrics/latencyBuckets``
        /// (the last count: beyond the last bound).
        var landingTimes = [UInt64](repeating: 0, count: RouteMetrics.latencyBuckets.count + 1)

        /// landed ÷ (landed + not landed); nil before any intent of the route was settled.
        var landingRatio: Double? {
            let settled = landed + notLanded
            return settled == 0 ? nil : Double(landed) / Double(settled)
        }
    }

    private struct State {
        var evictions: UInt64 = 0
        var sources: Set<String> = []
        /// By route: its figures and instruments, one lookup of the route for each report (a
        /// worker reports two or three times an intent).
        var routes: [String: RouteEntry] = [:]
        /// By source label: its intents counter for each outcome.
        var sourceCounters: [String: OutcomeCounters] = [:]
        /// The same by route map version (a rollout compares two): those in play (see
        /// ``retainMaps(_:)``), whatever their label.
        var maps: [String: Tally] = [:]
        /// The versions with a label of their own (at most ``maxMaps``).
        var labeledMaps: Set<String> = []
        /// The map families' counters (while a rollout splits sessions between two maps).
        var counters: [CounterKey: Metrics.Counter] = [:]
    }

    /// A counter for each ``Outcome``, each made when first counted.
    private struct OutcomeCounters {
        private var counters = [Metrics.Counter?](repeating: nil, count: Outcome.ordered.count)

        mutating func increment(
            _ outcome: Outcome, _ family: Family, _ dimension: (String, String), _ factory: PrometheusMetricsFactory
        ) {
            if let counter = counters[outcome.index] { return counter.increment() }
            let counter = Metrics.Counter(
                label: family.name, dimensions: [dimension, ("outcome", outcome.rawValue)], factory: factory)
            counters[outcome.index] = counter
            counter.increment()
        }
    }

    /// One route's figures and the instruments of its series, each made when first used.
    private struct RouteEntry {
        var tally = Tally()
        var intents = OutcomeCounters()
        var rejections: [String: Metrics.Counter] = [:]
        var landed: Metrics.Counter?
        var notLanded: Metrics.Counter?
        var ratio: Metrics.Gauge?
        var timeToPublish: Metrics.Timer?
        var timeToLand: Metrics.Timer?
    }

    /// The counter families (no raw values: a String enum hashes and compares its raw value, and
    /// a worker looks up three of these counters for every intent).
    private enum Family {
        case routeIntents, sourceIntents, routeRejections, landed, notLanded, mapIntents, mapLanded, mapNotLanded

        /// The metric's name.
        var name: String {
            switch self {
            case .routeIntents: "navigator_route_intents_total"
            case .sourceIntents: "navigator_source_intents_total"
            case .routeRejections: "navigator_route_rejections_total"
            case .landed: "navigator_route_landed_total"
            case .notLanded: "navigator_route_not_landed_total"
            case .mapIntents: "navigator_map_intents_total"
            case .mapLanded: "navigator_map_landed_total"
            case .mapNotLanded: "navigator_map_not_landed_total"
            }
        }
    }

    /// Route map versions given labels of their own (each reload or rollout may bring one);
    /// later ones are counted as `other`.
    static let maxMaps = 16

    private struct CounterKey: Hashable {
        var family: Family
        var label: String
        var detail: String
    }

    /// Figures with a registry of their own (tests).
    convenience init(landingWindow: Duration) {
        self.init(registry: PrometheusCollectorRegistry(), landingWindow: landingWindow)
    }

    init(registry: PrometheusCollectorRegistry, landingWindow: Duration) {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["navigator_time_to_publish_seconds"] = Self.latencyBuckets
        factory.durationHistogramBuckets["navigator_time_to_land_seconds"] = Self.latencyBuckets
        self.factory = factory
        evicted = Metrics.Counter(label: "navigator_landing_evicted_total", factory: factory)
        // At least a second (the loader allows 1 to 3,600 s; a value set in code is held to it).
        self.landingWindow = max(1_000_000_000, Self.nanoseconds(landingWindow))
        state = Locked(State())
    }

    // MARK: Labels

    /// The route label of a target screen: its name if the route map has it, else `other`.
    static func route(_ screen: String?, map: RouteMap) -> String {
        // Looked up, not copied out: a screen's spec is a dozen references to retain and release.
        guard let screen, map.screens.index(forKey: screen) != nil else { return other }
        return screen
    }

    /// The route label of an intent: its target screen (the last of its path).
    static func route(of intent: Intent, map: RouteMap) -> String {
        guard case .path(let path) = intent.target else { return other }
        return route(path.last?.screen, map: map)
    }

    /// The source label of an intent as the producer sent it (a deep link counts as `url`).
    func source(of intent: Intent) -> String {
        guard !intent.source.isEmpty else {
            if case .url = intent.target { return "url" }
            return "path"
        }
        guard intent.source.utf8.count <= Self.maxSourceBytes else { return Self.other }
        return state.withLock { state in
            if state.sources.contains(intent.source) { return intent.source }
            guard state.sources.count < Self.maxSources else { return Self.other }
            state.sources.insert(intent.source)
            return intent.source
        }
    }

    // MARK: Reports

    /// The label of a route map version: itself among the first ``maxMaps``, else `other`.
    private static func mapLabel(_ map: String, _ state: inout State) -> String {
        if state.labeledMaps.contains(map) { return map }
        guard state.labeledMaps.count < maxMaps else { return other }
        state.labeledMaps.insert(map)
        return map
    }

    /// Keeps the figures of these versions only (the rest were replaced: their counters stay in
    /// /metrics).
    func retainMaps(_ versions: Set<String>) {
        state.withLock { state in state.maps = state.maps.filter { versions.contains($0.key) } }
    }

    /// An intent's outcome, counted by route, by source and — while a rollout splits sessions
    /// between two maps (`map` not nil) — by the version of the route map that decided; `code`
    /// for a rejection or a refusal.
    func count(_ outcome: Outcome, route: String, map: String?, source: String, code: String? = nil) {
        let factory = factory
        state.withLock { state in
            if let map {
                state.maps[map, default: Tally()].intents[outcome] += 1
                counter(&state, .mapIntents, ("map", Self.mapLabel(map, &state)), ("outcome", outcome.rawValue))
                    .increment()
            }
            state.sourceCounters[source, default: OutcomeCounters()].increment(
                outcome, .sourceIntents, ("source", source), factory)
            // In place: the entry is not copied out of the dictionary and back.
            Self.entry(&state.routes, route) { entry in
                entry.tally.intents[outcome] += 1
                entry.intents.increment(outcome, .routeIntents, ("route", route), factory)
                guard let code else { return }
                if let counter = entry.rejections[code] { return counter.increment() }
                let counter = Metrics.Counter(
                    label: Family.routeRejections.name, dimensions: [("route", route), ("code", code)],
                    factory: factory)
                entry.rejections[code] = counter
                counter.increment()
            }
        }
    }

    /// A batch of the route's published `nanoseconds` after its intent was sent.
    func published(route: String, after nanoseconds: Int64) {
        state.withLock { state in
            Self.entry(&state.routes, route) { entry in
                timer(&entry.timeToPublish, landed: false, route).recordNanoseconds(max(0, nanoseconds))
            }
        }
    }

    /// The route's intent landed: acknowledged `nanoseconds` after it was sent (nil: its target
    /// was already shown, so there was nothing to acknowledge).
    func landed(route: String, map: String?, after nanoseconds: Int64?) {
        state.withLock { state in
            let inTime = Self.entry(&state.routes, route) { entry in
                let inTime: Bool
                if let nanoseconds {
                    let time = max(0, nanoseconds)
                    timer(&entry.timeToLand, landed: true, route).recordNanoseconds(time)
                    let bucket =
                        Self.latencyBuckets.firstIndex { Self.nanoseconds($0) >= time } ?? Self.latencyBuckets.count
                    entry.tally.landingTimes[bucket] += 1
                    inTime = time <= landingWindow
                } else {
                    inTime = true
                }
                settle(&entry, route, landed: inTime)
                return inTime
            }
            if let map { settle(&state, map: map, landed: inTime) }
        }
    }

    /// The route's intent did not land (rejected, expired, refused on release, or not
    /// acknowledged within the window); `evicted`: its batch was dropped from a full
    /// ``LandingBook`` before the window passed.
    func notLanded(route: String, map: String?, evicted: Bool = false) {
        if evicted { self.evicted.increment() }
        state.withLock { state in
            if evicted { state.evictions += 1 }
            Self.entry(&state.routes, route) { entry in settle(&entry, route, landed: false) }
            if let map { settle(&state, map: map, landed: false) }
        }
    }

    /// Batches dropped from full landing books so far.
    var evictions: UInt64 { state.withLock { $0.evictions } }

    /// Every route's figures so far, by route name.
    var tallies: [String: Tally] {
        // Not a route only timed so far (published, not yet counted): as when tallies were kept apart.
        state.withLock { $0.routes.compactMapValues { $0.tally == Tally() ? nil : $0.tally } }
    }

    /// Every route map version's figures so far (their routes together), by version.
    var mapTallies: [String: Tally] { state.withLock { $0.maps } }

    // MARK: Instruments

    /// `body` on the route's entry, made if it is the route's first report, changed in place.
    private static func entry<R>(_ routes: inout [String: RouteEntry], _ route: String, _ body: (inout RouteEntry) -> R)
        -> R
    {
        body(&routes[route, default: RouteEntry()])
    }

    /// Counts a settled intent of the route, landed or not, and records its landing ratio.
    private func settle(_ entry: inout RouteEntry, _ route: String, landed: Bool) {
        if landed {
            entry.tally.landed += 1
        } else {
            entry.tally.notLanded += 1
        }
        let family = landed ? Family.landed : Family.notLanded
        let counter =
            (landed ? entry.landed : entry.notLanded)
            ?? Metrics.Counter(label: family.name, dimensions: [("route", route)], factory: factory)
        if landed { entry.landed = counter } else { entry.notLanded = counter }
        counter.increment()
        let gauge =
            entry.ratio
            ?? Metrics.Gauge(label: "navigator_route_landing_ratio", dimensions: [("route", route)], factory: factory)
        entry.ratio = gauge
        gauge.record(entry.tally.landingRatio ?? 0)
    }

    private func settle(_ state: inout State, map: String, landed: Bool) {
        if landed {
            state.maps[map, default: Tally()].landed += 1
        } else {
            state.maps[map, default: Tally()].notLanded += 1
        }
        counter(&state, landed ? .mapLanded : .mapNotLanded, ("map", Self.mapLabel(map, &state))).increment()
    }

    private func counter(
        _ state: inout State, _ family: Family, _ first: (String, String), _ second: (String, String)? = nil
    ) -> Metrics.Counter {
        let key = CounterKey(family: family, label: first.1, detail: second?.1 ?? "")
        if let counter = state.counters[key] { return counter }
        var dimensions = [first]
        if let second { dimensions.append(second) }
        let counter = Metrics.Counter(label: family.name, dimensions: dimensions, factory: factory)
        state.counters[key] = counter
        return counter
    }

    /// The route's timer kept in `slot`, made on its first use.
    private func timer(_ slot: inout Metrics.Timer?, landed: Bool, _ route: String) -> Metrics.Timer {
        if let timer = slot { return timer }
        let timer = Metrics.Timer(
            label: landed ? "navigator_time_to_land_seconds" : "navigator_time_to_publish_seconds",
            dimensions: [("route", route)], factory: factory)
        slot = timer
        return timer
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        Int64(duration.components.seconds) * 1_000_000_000 + Int64(duration.components.attoseconds / 1_000_000_000)
    }
}
