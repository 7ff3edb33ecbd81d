import Locking
import Logging
import NavigatorCore
import NavigatorStore
import NavigatorYAML
import Synchronization
import ZeroMQ

/// A staged rollout of a route map: a candidate for a share of the sessions (chosen by
/// ``RouteMapVersion/bucket(of:salt:)``, the same everywhere), then promoted to every session or
/// rolled back. The rollout is one row of the store (``StoredRollout``): kept across restarts,
/// and with several instances on PostgreSQL shared by all of them — each follows the row within
/// a round (``interval``), so they all apply the same split.
///
/// Its thread (`nav-rollout`) follows the row, writes what a reload ended if that could not be
/// written at once, and rolls back automatically when the candidate's rejection rate exceeds the
/// map in use's by the margin. Changes asked for (``change(_:candidate:by:)``) are made on the
/// route map desk's thread, reloads (``reload(_:note:)``) on a thread of their own: one at a time
/// on this instance (`serial`), and between instances by the row's revision.
final class RolloutKeeper: Sendable {
    let holder: ResolverHolder
    let database: any StateDatabase
    let metrics: RouteMetrics
    let instance: String
    /// Several instances: the row is read every round (others may change it).
    let shared: Bool
    let logger: Logger
    /// Counts each time the row could not be read or written
    /// (``EngineCounters/rolloutStoreFailures``).
    let failures: AtomicCounter?
    /// The end of a rollout a reload could not write to the store yet (retried each round).
    private let pendingEnd = Locked<StoredRollout?>(nil)
    private let serial = Locked(())
    /// Rounds that fail while the store is away: logged once, then a line a minute.
    private let roundFailure = Locked(RepeatedFailure())
    /// The same for telling the store that a reload ended the rollout.
    private let endFailure = Locked(RepeatedFailure())
    /// Why the stored row cannot be read, while it cannot (it does not decode, or holds what no
    /// request writes: written by a newer navigatord, or by hand): said in the status, and a
    /// rollback replaces it. Nil while the row reads, or was not read.
    private let unreadableRow = Locked<String?>(nil)
    private let stopping = Atomic<Bool>(false)
    /// Rounds made so far (tests wait for one to have judged the figures).
    let rounds = Atomic<Int>(0)
    private let thread = Locked<DedicatedThread?>(nil)

    static let interval = Duration.seconds(1)
    /// The most YAML nodes a candidate may make (aliases expanded), as for routes_check.
    static let candidateNodes = 50_000
    static let defaultRollbackAfter = 1_000
    /// The intents of the map in use an automatic rollback waits for at most.
    static let minimumBaseIntents = 100

    init(
        holder: ResolverHolder, database: any StateDatabase, metrics: RouteMetrics, instance: String, shared: Bool,
        logger: Logger, failures: AtomicCounter? = nil
    ) {
        self.holder = holder
        self.database = database
        self.metrics = metrics
        self.instance = instance
        self.shared = shared
        self.logger = logger
        self.failures = failures
    }

    // MARK: What can be asked

    enum Action {
        case start(yaml: String, source: String, share: Int, rollbackMargin: Int, rollbackAfter: Int)
        case promote
        case rollback
    }

    /// A change that cannot be made, with why (a CONFLICT, or UNAVAILABLE when the store fails).
    struct Refusal: Error {
        enum Kind { case conflict, unavailable }
        let kind: Kind
        let message: String
    }

    /// Starts, promotes or rolls back the rollout: written to the store first (refused if
    /// another change came first), then followed here at once. `by` names who asked, for the
    /// note. The candidate of a start is checked by the caller (routes_check).
    func change(_ action: Action, candidate: ResolverHolder.Loaded?, by: String) throws(Refusal) -> StoredRollout {
        try serial.withLock { _ throws(Refusal) in
            if let end = pendingEnd.withLock({ $0 }) {
                writeEnd(end)
                if pendingEnd.withLock({ $0 }) != nil {
                    throw Refusal(
                        kind: .unavailable,
                        message:
                            "a reload ended the last rollout and that could not be written to \(database.kind) yet; expected it reachable: retry shortly"
                    )
                }
            }
            let now = WallClock.now()
            let current: StoredRollout?
            do {
                current = try readRow()
            } catch let error as UnreadableRow {
                guard case .rollback = action else {
                    throw Refusal(
                        kind: .conflict,
                        message:
                            "the stored rollout cannot be read on this instance (\(error.reason)); expected it replaced first: a rollback (navctl routes rollback, routes_rollout ROLLBACK) replaces it with one every instance reads"
                    )
                }
                return try replaceUnreadable(reason: error.reason, by: by, now: now)
            } catch {
                throw unreachable(error)
            }
            var next: StoredRollout
            switch action {
            case .start(let yaml, let source, let share, let margin, let after):
                if let current, current.phase == .rolling {
                    throw Refusal(
                        kind: .conflict,
                        message:
                            "a rollout is under way already: \(current.version) (\(current.source)) for \(Self.percent(current.share)) of sessions since \(TimeText.iso8601(current.startedAt)); expected it promoted or rolled back first"
                    )
                }
                let file = holder.file
                if let current, current.phase == .promoted, current.version != file.version {
                    throw Refusal(
                        kind: .conflict,
                        message:
                            "the map in use is \(current.version) (\(current.source)), promoted by the last rollout, and the route map file still has \(file.version) (\(file.source)); expected the promoted map put into the file and a reload (SIGHUP) before the next rollout"
                    )
                }
                guard let candidate else {
                    throw Refusal(kind: .conflict, message: "a rollout needs a candidate map; expected one that loads")
                }
                if candidate.version == file.version {
                    throw Refusal(
                        kind: .conflict,
                        message:
                            "the candidate is the map in use (version \(file.version), \(file.source)); expected a map that differs from it"
                    )
                }
                next = StoredRollout(
                    phase: .rolling, yaml: yaml, source: source, version: candidate.version,
                    baseVersion: file.version, baseSource: file.source, share: share, rollbackMargin: margin,
                    rollbackAfter: after, startedAt: now, changedAt: now,
                    note: "started by \(by) on instance \(instance)")
            case .promote, .rollback:
                let promote = if case .promote = action { true } else { false }
                guard var rolling = current, rolling.phase == .rolling else {
                    throw Refusal(
                        kind: .conflict,
                        message:
                            "no rollout is under way to \(promote ? "promote" : "roll back")\(current.map { " (the last one, \($0.version), is \($0.phase.rawValue))" } ?? ""); expected one started with routes_rollout START (navctl routes rollout FILE --share N)"
                    )
                }
                rolling.phase = promote ? .promoted : .rolledBack
                rolling.changedAt = now
                rolling.note = "\(promote ? "promoted" : "rolled back") by \(by) on instance \(instance)"
                next = rolling
            }
            let stored = try write(next, expected: current?.revision ?? 0)
            take(stored, candidate: candidate)
            return stored
        }
    }

    /// Writes a rollout this instance reads over a row it cannot read, so that every instance
    /// follows a row it reads again: the rollout it follows, rolled back if it was rolling (kept
    /// if promoted: a rollback never undoes a promotion), else a rolled-back one of no candidate.
    /// Over the row's revision, read before the row is read again: if the row reads by then, or
    /// moves on before the write, another instance changed it and the request is refused
    /// CONFLICT. A revision that is not a number (a hand edit of the state file) is left to SQL.
    private func replaceUnreadable(reason: String, by: String, now: Int64) throws(Refusal) -> StoredRollout {
        let revision: Int64
        do {
            revision = try readRevision()
        } catch let error as UnreadableRow {
            throw Refusal(
                kind: .conflict,
                message:
                    "the stored rollout cannot be read (\(reason)), nor its revision (\(error.reason)); expected the row fixed or deleted with SQL"
            )
        } catch {
            throw unreachable(error)
        }
        do {
            _ = try readRow()
        } catch is UnreadableRow {
            // Still unreadable: the revision read before stands.
            return try writeReplacement(over: revision, by: by, reason: reason, now: now)
        } catch {
            throw unreachable(error)
        }
        throw Refusal(
            kind: .conflict,
            message:
                "the stored rollout reads again (another instance changed it meanwhile); expected the request made again on what it is now"
        )
    }

    private func writeReplacement(over revision: Int64, by: String, reason: String, now: Int64) throws(Refusal)
        -> StoredRollout
    {
        let replacing = "replacing a stored rollout (revision \(revision)) that could not be read"
        var replacement: StoredRollout
        if var followed = holder.rollout?.stored, followed.phase == .rolling || followed.phase == .promoted {
            let promoted = followed.phase == .promoted
            followed.phase = promoted ? .promoted : .rolledBack
            followed.note =
                promoted
                ? "kept promoted by \(by) on instance \(instance) (a rollback never undoes a promotion), \(replacing)"
                : "rolled back by \(by) on instance \(instance), \(replacing)"
            followed.changedAt = now
            replacement = followed
        } else {
            let file = holder.file
            replacement = StoredRollout(
                phase: .rolledBack, yaml: "", source: "", version: "", baseVersion: file.version,
                baseSource: file.source, share: 10_000, rollbackMargin: 0, rollbackAfter: Self.defaultRollbackAfter,
                startedAt: now, changedAt: now, note: "rolled back by \(by) on instance \(instance), \(replacing)")
        }
        let stored = try write(replacement, expected: revision)
        logger.warning(
            "a stored route map rollout that could not be read was replaced",
            metadata: [
                "by": "\(by)", "revision": "\(stored.revision)", "phase": "\(stored.phase.rawValue)",
                "was": "\(reason)",
            ])
        unreadableRow.withLock { $0 = nil }
        take(stored, candidate: nil)
        return stored
    }

    /// The rollout as this instance follows it (nil: none since it started).
    var following: ResolverHolder.Following? { holder.rollout }

    /// Why the stored row cannot be read, if the last read of it failed so (``unreadableRow``).
    var unreadable: String? { unreadableRow.withLock { $0 } }

    /// The row (or its revision) is there but cannot be read: not a store that is away.
    struct UnreadableRow: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    /// The stored row; a row the store has but cannot read is ``UnreadableRow`` (and said in the
    /// status until a read of it works), other failures are the store's.
    private func readRow() throws -> StoredRollout? {
        do {
            let row = try database.rollout()
            unreadableRow.withLock { $0 = nil }
            return row
        } catch let error as StoreError where error.code == .unreadable {
            unreadableRow.withLock { $0 = error.description }
            throw UnreadableRow(reason: error.description)
        }
    }

    /// The stored row's revision (0: none), as ``readRow()``.
    private func readRevision() throws -> Int64 {
        do {
            return try database.rolloutRevision()
        } catch let error as StoreError where error.code == .unreadable {
            unreadableRow.withLock { $0 = error.description }
            throw UnreadableRow(reason: error.description)
        }
    }

    // MARK: The thread

    /// Takes up the stored rollout (at start, before any worker runs): a restart keeps the split.
    /// A row that cannot be read is logged, and the service starts with the file's map alone
    /// (the next round tries again: with one instance only if the row was there but did not read).
    func restore() {
        do {
            guard let stored = try readRow() else { return }
            serial.withLock { _ in take(stored, candidate: nil) }
        } catch {
            failures?.add()
            let unreadable = error is UnreadableRow
            logger.error(
                unreadable
                    ? "the stored route map rollout cannot be read; every session resolves with the file's map, and a rollback (navctl routes rollback) replaces it"
                    : "the route map rollout could not be read; every session resolves with the file's map until it can",
                metadata: ["store": "\(database.location)", "error": "\(error)"])
        }
    }

    /// A reload (SIGHUP) of the file's map: a changed map ends the rollout (or a promoted map
    /// other than the file's new one) on every instance — written to the store here, or by a
    /// later round if the store cannot be reached now. Called off Swift concurrency's pool.
    func reload(_ loaded: ResolverHolder.Loaded, note: String) -> (ended: StoredRollout, was: StoredRollout.Phase)? {
        serial.withLock { _ in
            let ended = holder.reload(loaded, now: WallClock.now(), note: note)
            if let (end, _) = ended { writeEnd(end) }
            retainFigures()
            return ended
        }
    }

    func start() {
        let thread = DedicatedThread(name: "nav-rollout") { [self] in
            while !stopping.load(ordering: .acquiring) {
                let next = ContinuousClock.now + Self.interval
                round()
                while !stopping.load(ordering: .acquiring), ContinuousClock.now < next {
                    MonotonicClock.pause(min(next - ContinuousClock.now, .milliseconds(250)))
                }
            }
        }
        self.thread.withLock { $0 = thread }
    }

    func stop() {
        stopping.store(true, ordering: .releasing)
        let thread = self.thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        thread?.join()
        if let end = pendingEnd.withLock({ $0 }) {
            serial.withLock { _ in writeEnd(end) }  // a last try
            // Said whatever the last line was: nothing tries again after this.
            if pendingEnd.withLock({ $0 }) != nil {
                logger.error(
                    "the end of the route map rollout a reload made was not stored; at the next start the stored rollout is followed again",
                    metadata: ["store": "\(database.location)", "candidate": "\(end.version)"])
            }
        }
    }

    /// One round: what a reload ended is written (if it could not be at once); the row is
    /// followed (several instances: its revision read, the row itself only when it moved); the
    /// candidate is rolled back if its rejection rate says so.
    func round() {
        serial.withLock { _ in
            do {
                if let end = pendingEnd.withLock({ $0 }) { writeEnd(end) }
                // The row is read when it moved (several instances), and every round while it
                // does not read (fixed by hand, or replaced by another instance).
                let followed = holder.rollout?.stored.revision ?? 0
                var moved = unreadableRow.withLock { $0 != nil }
                if !moved, shared { moved = try readRevision() != followed }
                if moved, let stored = try readRow(), stored.revision != followed { take(stored, candidate: nil) }
                try rollBackIfWorse()
                rounds.add(1, ordering: .releasing)
                roundFailure.withLock { $0.worked("the route map rollout is read and written again", logger: logger) }
            } catch {
                failures?.add()
                let unreadable = error is UnreadableRow
                roundFailure.withLock {
                    $0.failed(
                        unreadable
                            ? "the stored route map rollout cannot be read; this instance goes on with what it followed, and a rollback (navctl routes rollback) replaces it"
                            : "the route map rollout could not be read or written; trying again",
                        metadata: ["store": "\(database.location)", "error": "\(error)"], logger: logger)
                }
            }
        }
    }

    /// Stores the end of a rollout a reload ended — only over the same rollout (another may have
    /// started since on another instance: it stays); kept for the next round when the store
    /// cannot be written.
    private func writeEnd(_ end: StoredRollout) {
        do {
            guard let current = try readRow(), current.startedAt == end.startedAt,
                current.version == end.version, current.phase == .rolling || current.phase == .promoted
            else {
                pendingEnd.withLock { $0 = nil }
                endFailure.withLock { $0.worked("the route map rollout's store answers again", logger: logger) }
                return
            }
            if let revision = try database.storeRollout(end, expected: current.revision) {
                var written = end
                written.revision = revision
                take(written, candidate: nil)
                pendingEnd.withLock { $0 = nil }
            } else {
                pendingEnd.withLock { $0 = end }  // changed meanwhile: again at the next round
            }
            endFailure.withLock { $0.worked("the route map rollout's store answers again", logger: logger) }
        } catch let error as UnreadableRow {
            // Not the rollout the reload ended (that one read): it stays, as another rollout
            // would, and a rollback replaces it.
            pendingEnd.withLock { $0 = nil }
            failures?.add()
            logger.error(
                "a reload ended the route map rollout, and the stored rollout cannot be read: it is left as it is; a rollback (navctl routes rollback) replaces it",
                metadata: ["store": "\(database.location)", "error": "\(error)"])
        } catch {
            pendingEnd.withLock { $0 = end }
            failures?.add()
            endFailure.withLock {
                $0.failed(
                    "a reload ended the route map rollout, and the store could not be told; trying again each second",
                    metadata: ["store": "\(database.location)", "error": "\(error)"], logger: logger)
            }
        }
    }

    /// Only the figures of the maps in play are kept (the file's, the candidate's).
    private func retainFigures() {
        var keep: Set<String> = [holder.file.version, holder.snapshot.version]
        if let following = holder.rollout { keep.insert(following.stored.version) }
        metrics.retainMaps(keep)
    }

    // MARK: Automatic rollback

    /// The figures of the map in use and the candidate since this instance took the rollout up.
    func figures(_ following: ResolverHolder.Following) -> (base: RouteMetrics.Tally, candidate: RouteMetrics.Tally) {
        let now = metrics.mapTallies
        func since(_ version: String) -> RouteMetrics.Tally {
            var tally = now[version] ?? RouteMetrics.Tally()
            let before = following.baseline[version] ?? RouteMetrics.Tally()
            for (outcome, count) in before.intents {
                tally.intents[outcome] -= min(count, tally.intents[outcome])
            }
            tally.landed -= min(before.landed, tally.landed)
            tally.notLanded -= min(before.notLanded, tally.notLanded)
            return tally
        }
        // The map in use here: this instance's file (another's may differ).
        return (since(holder.file.version), since(following.stored.version))
    }

    /// Intents as they came (each once: released, expired and refused are later fates).
    static func arrived(_ tally: RouteMetrics.Tally) -> UInt64 {
        [.resolved, .refreshed, .ignored, .parked, .rejected].reduce(0) { $0 + tally.intents[$1] }
    }

    static func rejectionRate(_ tally: RouteMetrics.Tally) -> Double {
        let intents = arrived(tally)
        return intents == 0 ? 0 : Double(tally.intents[.rejected]) / Double(intents)
    }

    private func rollBackIfWorse() throws {
        guard let following = holder.rollout, following.stored.phase == .rolling, following.stored.rollbackMargin > 0,
            following.candidate != nil
        else { return }
        let (base, candidate) = figures(following)
        let intents = Self.arrived(candidate)
        // Both sides need intents to compare: the candidate its setting, the map in use as many or
        // 100, whichever is fewer (a share of 100% has nothing to compare with: no rollback).
        guard intents >= UInt64(following.stored.rollbackAfter),
            Self.arrived(base) >= UInt64(min(following.stored.rollbackAfter, Self.minimumBaseIntents))
        else { return }
        let (candidateRate, baseRate) = (Self.rejectionRate(candidate), Self.rejectionRate(base))
        guard (candidateRate - baseRate) * 10_000 > Double(following.stored.rollbackMargin) else { return }
        var rolledBack = following.stored
        rolledBack.phase = .rolledBack
        rolledBack.changedAt = WallClock.now()
        rolledBack.note =
            "rolled back automatically on instance \(instance): the candidate rejected \(Self.percent(candidateRate)) of \(intents) intents, the map in use \(Self.percent(baseRate)) of \(Self.arrived(base)), more than the margin of \(Self.percent(following.stored.rollbackMargin).dropLast()) percentage points"
        guard let revision = try database.storeRollout(rolledBack, expected: following.stored.revision) else {
            return  // another change came first: the next round follows it
        }
        rolledBack.revision = revision
        take(rolledBack, candidate: nil, level: .warning)
    }

    // MARK: Following

    /// A store that failed to read the row: UNAVAILABLE.
    private func unreachable(_ error: any Error) -> Refusal {
        Refusal(
            kind: .unavailable,
            message:
                "the rollout could not be read from \(database.kind): \(error); nothing was changed: retry once it is reachable"
        )
    }

    private func write(_ rollout: StoredRollout, expected: Int64) throws(Refusal) -> StoredRollout {
        let revision: Int64?
        do {
            revision = try database.storeRollout(rollout, expected: expected)
        } catch {
            throw Refusal(
                kind: .unavailable,
                message:
                    "the rollout could not be written to \(database.kind): \(error); nothing was changed: retry once it is reachable"
            )
        }
        guard let revision else {
            throw Refusal(
                kind: .conflict,
                message:
                    "another instance changed the rollout meanwhile; expected the request made again on what it is now")
        }
        var written = rollout
        written.revision = revision
        return written
    }

    /// Follows `stored`, loading its candidate unless given (or not needed), and logs the change.
    private func take(_ stored: StoredRollout, candidate given: ResolverHolder.Loaded?, level: Logger.Level = .notice) {
        var candidate = given
        var failure: String?
        let needed = stored.phase == .rolling || stored.phase == .promoted
        if needed, candidate == nil {
            if let kept = holder.rollout?.candidate, kept.version == stored.version {
                candidate = kept
            } else {
                do {
                    candidate = try Self.load(stored.yaml, source: stored.source, options: holder.file.resolver.options)
                } catch {
                    failure = "\(error)"
                }
            }
        }
        let previous = holder.rollout?.stored
        holder.follow(stored, candidate: needed ? candidate : nil, failure: failure, baseline: metrics.mapTallies)
        retainFigures()
        guard previous?.revision != stored.revision else { return }
        if let failure {
            logger.critical(
                "the route map rollout's candidate does not load on this instance; its sessions resolve with the map in use",
                metadata: ["candidate": "\(stored.version)", "source": "\(stored.source)", "error": "\(failure)"])
        } else {
            logger.log(
                level: level, "route map rollout \(stored.phase.rawValue)",
                metadata: [
                    "candidate": "\(stored.version)", "source": "\(stored.source)",
                    "share": "\(Self.percent(stored.share))",
                    "revision": "\(stored.revision)", "note": "\(stored.note)",
                ])
        }
    }

    /// A candidate map from its text, as a reload would load it (bounded as routes_check is).
    static func load(_ yaml: String, source: String, options: Resolver.Options) throws -> ResolverHolder.Loaded {
        let map = try RouteMapYAML.load(yaml, source: source, maxNodes: candidateNodes)
        return ResolverHolder.Loaded(
            resolver: try Resolver(map: map, options: options), source: source, version: RouteMapVersion.of(text: yaml))
    }

    /// Basis points as a percentage: "10%", "2.5%".
    static func percent(_ basisPoints: Int) -> String {
        let whole = basisPoints / 100
        let hundredths = basisPoints % 100
        guard hundredths != 0 else { return "\(whole)%" }
        let decimals =
            hundredths % 10 == 0 ? "\(hundredths / 10)" : (hundredths < 10 ? "0\(hundredths)" : "\(hundredths)")
        return "\(whole).\(decimals)%"
    }

    /// A rate (0 to 1) as a percentage to one decimal: "34.0%".
    static func percent(_ rate: Double) -> String {
        let tenths = Int((rate * 1000).rounded())
        return "\(tenths / 10).\(tenths % 10)%"
    }
}
