import Logging

/// A failure that comes back each round while what a part needs is away (the database, the
/// state file's disk): the first is logged at once, then at most one line a minute, saying how
/// many rounds failed since the line before; when a round works again, one line says so, with
/// how long and how often it had failed. An outage of hours then logs tens of lines, not one a
/// second for each part that retries (what counters count, they still count every time).
///
/// A value: its owner keeps it on one thread, or under a lock of its own.
struct RepeatedFailure {
    /// The least time between two lines about one failure, in nanoseconds.
    static let interval: Int64 = 60_000_000_000

    /// When the failures began (monotonic ns); nil while rounds work.
    private var since: Int64?
    private var lastLine: Int64 = 0
    /// Failures since the last line.
    private var notLogged = 0
    /// Failures since they began.
    private var failures = 0

    /// Whether failures are going on (a round failed, and none has worked since).
    var isFailing: Bool { since != nil }

    /// A round failed: logs `message` with `metadata` if it is the first or the last line is a
    /// minute old (with how many were not logged since, and since when it fails).
    mutating func failed(
        _ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:],
        level: Logger.Level = .error, logger: Logger, now: Int64 = MonotonicClock.now()
    ) {
        failures += 1
        guard let since else {
            since = now
            lastLine = now
            logger.log(level: level, message(), metadata: metadata())
            return
        }
        guard now &- lastLine >= Self.interval else {
            notLogged += 1
            return
        }
        var lines = metadata()
        lines["failing for"] = "\(TimeText.seconds(now &- since))"
        lines["failures not logged"] = "\(notLogged)"
        logger.log(level: level, message(), metadata: lines)
        notLogged = 0
        lastLine = now
    }

    /// A round worked: if failures were going on, logs `message` (a notice) with how long and
    /// how many rounds failed, and forgets them.
    mutating func worked(
        _ message: @autoclosure () -> Logger.Message, logger: Logger, now: Int64 = MonotonicClock.now()
    ) {
        guard let since else { return }
        logger.notice(
            message(),
            metadata: ["failed for": "\(TimeText.seconds(now &- since))", "failures": "\(failures)"])
        self = RepeatedFailure()
    }
}
