import NavigatorCore

/// Times for people: ISO 8601 in UTC with milliseconds (`2026-11-23T04:12:03.123Z`), and
/// durations in seconds with one decimal (`in 3.2 s`, `300.0 s`).
enum TimeText {
    /// `unixNanoseconds` as ISO 8601, UTC.
    static func iso8601(_ unixNanoseconds: Int64) -> String {
        let milliseconds = unixNanoseconds / 1_000_000
        var seconds = milliseconds / 1000
        let millis = Int(milliseconds - seconds * 1000)
        var days = seconds / 86_400
        seconds -= days * 86_400
        if seconds < 0 {
            seconds += 86_400
            days -= 1
        }
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return
            "\(year)-\(two(month))-\(two(day))T\(two(seconds / 3600)):\(two(seconds % 3600 / 60)):\(two(seconds % 60)).\(millisText)Z"
    }

    /// A duration in seconds with one decimal: `3.2 s`.
    static func seconds(_ nanoseconds: Int64) -> String {
        let tenths = nanoseconds / 100_000_000
        return "\(tenths / 10).\(abs(tenths % 10)) s"
    }
}

extension ExpiredIntent {
    /// The message of the EXPIRED rejection published for it (and shown in snapshots).
    var rejectionMessage: String {
        "intent waited \(TimeText.seconds(expiredAt &- parkedAt)) (\(reason)), longer than its time to live, and expired at \(TimeText.iso8601(expiredAt)); expected that to change within the intent's ttl_ms (or parkedTTLSeconds)"
    }
}
