/// The time-to-land histogram navigatord reports (`RouteStats.land_bucket_counts` over
/// `land_bucket_bounds_seconds`): counts by bucket, the last beyond the last bound.
public enum LandingHistogram {
    /// The `q` quantile, as the upper bound of its bucket in seconds: nil when nothing was
    /// counted, infinity when it lies beyond the last bound.
    public static func quantile(_ q: Double, counts: [UInt64], bounds: [Double]) -> Double? {
        let total = counts.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = UInt64((Double(total) * q).rounded(.up))
        var seen: UInt64 = 0
        for (index, count) in counts.enumerated() {
            seen += count
            if seen >= rank { return index < bounds.count ? bounds[index] : .infinity }
        }
        return nil
    }
}
