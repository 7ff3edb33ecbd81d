/// An open-loop schedule: intent `i` is due at `start + i / rate`, whatever happened to the
/// ones before. A producer that falls behind sends at once but keeps the due time as the
/// intent's sent-at, so a slow service shows up as latency instead of hiding in a lower rate.
public struct Schedule: Hashable, Sendable {
    /// Unix nanoseconds of intent 0.
    public var start: Int64
    /// Intents per second.
    public var rate: Double

    public init(start: Int64, rate: Double) {
        precondition(rate > 0, "a schedule needs a positive rate")
        self.start = start
        self.rate = rate
    }

    /// When intent `index` is due (unix ns).
    public func due(_ index: Int) -> Int64 { start + Int64((Double(index) * 1e9 / rate).rounded()) }

    /// How many intents are due in `seconds`.
    public func count(in seconds: Double) -> Int { Int((seconds * rate).rounded(.down)) }

    /// The intents producer `producer` of `producers` sends: every `producers`-th, from its own.
    public static func indices(producer: Int, of producers: Int, total: Int) -> StrideTo<Int> {
        stride(from: producer, to: total, by: producers)
    }
}
