import Foundation

/// A route map rollout as the store keeps it — one row, shared by every instance of a deployment
/// (PostgreSQL) or kept across restarts (the state file): which candidate, for what share, and
/// how it stands. Each change raises its revision; instances follow the row.
public struct StoredRollout: Codable, Hashable, Sendable {
    public enum Phase: String, Codable, Sendable {
        /// `share` basis points of the sessions resolve with the candidate.
        case rolling
        /// Every session does: the candidate is the map in use, until a reload (SIGHUP).
        case promoted
        /// None does any more (by request, or automatically).
        case rolledBack = "rolled back"
        /// A reload replaced the maps.
        case ended
    }

    /// Set by the store: 1 for the first rollout, then one more for every change.
    public var revision: Int64 = 0
    public var phase: Phase
    /// The candidate map's text, its name and its version.
    public var yaml: String
    public var source: String
    public var version: String
    /// The version of the map in use when the rollout started (the file's, on the instance that
    /// started it).
    public var baseVersion: String
    public var baseSource: String
    /// Basis points of the sessions (1 to 10,000).
    public var share: Int
    /// Automatic rollback: the margin of rejection rates in basis points (0: off), and the
    /// candidate's intents it waits for.
    public var rollbackMargin: Int
    public var rollbackAfter: Int
    /// Unix nanoseconds.
    public var startedAt: Int64
    public var changedAt: Int64
    /// Why the phase is what it is.
    public var note: String

    public init(
        phase: Phase, yaml: String, source: String, version: String, baseVersion: String, baseSource: String,
        share: Int, rollbackMargin: Int, rollbackAfter: Int, startedAt: Int64, changedAt: Int64, note: String
    ) {
        self.phase = phase
        self.yaml = yaml
        self.source = source
        self.version = version
        self.baseVersion = baseVersion
        self.baseSource = baseSource
        self.share = share
        self.rollbackMargin = rollbackMargin
        self.rollbackAfter = rollbackAfter
        self.startedAt = startedAt
        self.changedAt = changedAt
        self.note = note
    }

    /// A value no request could have set, or nil.
    var problem: String? {
        if !(1...10_000).contains(share) { return "share \(share); expected 1 to 10,000 basis points" }
        if !(0...10_000).contains(rollbackMargin) {
            return "rollbackMargin \(rollbackMargin); expected 0 to 10,000 basis points"
        }
        if !(1...Int(Int32.max)).contains(rollbackAfter) {
            return "rollbackAfter \(rollbackAfter); expected a positive number of intents"
        }
        return nil
    }

    /// As stored: JSON (readable with SQL, and the row never needs a migration of its own).
    func encoded() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    static func decoded(_ text: String, revision: Int64, location: String) throws -> StoredRollout {
        var rollout: StoredRollout
        do {
            rollout = try JSONDecoder().decode(StoredRollout.self, from: Data(text.utf8))
        } catch {
            throw StoreError(
                .unreadable, "\(location): the route map rollout's row (revision \(revision)) does not decode: \(error)"
            )
        }
        // What the request that starts a rollout allows (the keeper's arithmetic relies on it):
        // a row written otherwise is not taken up.
        if let problem = rollout.problem {
            throw StoreError(
                .unreadable, "\(location): the route map rollout's row (revision \(revision)) has \(problem)")
        }
        rollout.revision = revision
        return rollout
    }
}
