import NavigatorCore

extension Navigator_V1_StoredSession {
    /// A session's state and seq as the state file keeps them; without the parked intents when
    /// `parked` is false (see ``encodedParkedField(_:)``).
    public init(_ state: SessionState, seq: UInt64, parked includeParked: Bool = true) {
        self.init()
        self.seq = seq
        tree = .init(state.tree)
        conditions = state.conditions
        if includeParked { parked = state.parked.map(Navigator_V1_StoredParkedIntent.init) }
        recentIds = state.recentIntentIDs.entries
        recentIdsBaseUnixNanos = state.recentIntentIDs.base
        lastServiceSeq = state.lastServiceSeq
        shellReady = state.shellReady
        appVersion = state.appVersion?.text ?? ""
        recentlyExpired = state.recentlyExpired.map { expired in
            .with {
                $0.intentID = expired.intentID
                $0.source = expired.source
                $0.expiredAtUnixNanos = expired.expiredAt
                $0.why =
                    switch Navigator_V1_StoredParkedIntent.OneOf_Reason(expired.reason) {
                    case .guardUnmet(let value): .guardUnmet(value)
                    case .blocked(let value): .blocked(value)
                    case .notReady(let value): .notReady(value)
                    }
                $0.waitedNanos = expired.expiredAt &- expired.parkedAt
            }
        }
    }

    /// The `parked` field (4) of a `StoredSession` holding `parked`, encoded on its own: appended
    /// to a `StoredSession` encoded without parked intents, the two decode as one message with
    /// them (a repeated field may come in any place).
    public static func encodedParkedField(_ parked: [ParkedIntent]) throws -> [UInt8] {
        var field: [UInt8] = []
        for intent in parked { try appendParkedEntry(intent, to: &field) }
        return field
    }

    /// Appends one entry of the `parked` field (4) to `field`: its tag, length and
    /// `StoredParkedIntent`. A list's field is its entries' in order, so an entry's bytes can be
    /// kept and reused while that intent waits unchanged.
    public static func appendParkedEntry(_ intent: ParkedIntent, to field: inout [UInt8]) throws {
        let bytes: [UInt8] = try Navigator_V1_StoredParkedIntent(intent).serializedBytes()
        field.append(4 << 3 | 2)  // field 4, length-delimited
        var length = UInt64(bytes.count)
        while length >= 0x80 {
            field.append(UInt8(truncatingIfNeeded: length) | 0x80)
            length >>= 7
        }
        field.append(UInt8(length))
        field += bytes
    }

    /// The state back; a record that does not make a valid state says which part is wrong.
    public func core() throws(WireError) -> (state: SessionState, seq: UInt64) {
        var list: [ParkedIntent] = []
        for (index, stored) in parked.enumerated() { list.append(try stored.core("parked[\(index)]")) }
        guard recentIntentIds.isEmpty else {
            throw WireError(
                .malformed,
                "recent_intent_ids holds \(recentIntentIds.count) ids; expected none (the migration \"recent intent ids hashed\" moves them to recent_ids)"
            )
        }
        var version: AppVersion? = nil
        if !appVersion.isEmpty {
            guard let parsed = AppVersion(appVersion) else {
                throw WireError(.malformed, "app_version \(AppVersion.problem(with: appVersion)!)")
            }
            version = parsed
        }
        try plausibleTime(recentIdsBaseUnixNanos, "recent_ids_base_unix_nanos")
        let state = SessionState(
            tree: try tree.core("tree"), conditions: conditions, parked: list,
            recentIntentIDs: RecentIntentIDs(base: recentIdsBaseUnixNanos, entries: recentIds),
            lastServiceSeq: lastServiceSeq, shellReady: shellReady,
            recentlyExpired: try recentlyExpired.enumerated().map { (index, expired) throws(WireError) in
                try expired.core("recently_expired[\(index)]")
            }, appVersion: version)
        return (state, seq)
    }
}

extension Navigator_V1_StoredExpiredIntent {
    /// The expired intent back. Records written before the reason was kept as data hold it as
    /// text, and the time it was parked instead of how long it waited.
    public func core(_ field: String) throws(WireError) -> ExpiredIntent {
        let reason: ParkReason
        switch why {
        case .guardUnmet(let value): reason = ParkReason(.guardUnmet(value))
        case .blocked(let value): reason = ParkReason(.blocked(value))
        case .notReady(let value): reason = ParkReason(.notReady(value))
        case nil:
            guard let parsed = ParkReason(text: self.reason) else {
                throw WireError(
                    .malformed, "\(field) has reason \"\(self.reason)\"; expected a reason as data or as its text")
            }
            reason = parsed
        }
        let parkedAt = hasWaitedNanos ? expiredAtUnixNanos &- waitedNanos : parkedAtUnixNanos
        try plausibleTime(expiredAtUnixNanos, "\(field).expired_at_unix_nanos")
        try plausibleTime(parkedAt, "\(field)'s time parked")
        return ExpiredIntent(
            intentID: intentID, source: source, reason: reason, parkedAt: parkedAt, expiredAt: expiredAtUnixNanos)
    }
}

extension Navigator_V1_StoredParkedIntent.OneOf_Reason {
    /// A park reason as the state file holds it (the oneof of parked and expired intents).
    init(_ reason: ParkReason) {
        switch reason {
        case .guardUnmet(let condition, let redirect):
            self = .guardUnmet(
                .with {
                    $0.condition = condition
                    $0.redirect = redirect
                })
        case .blocked(let id, let screen):
            self = .blocked(
                .with {
                    $0.modalID = id.rawValue
                    $0.screen = screen
                })
        case .notReady:
            self = .notReady(.init())
        }
    }
}

extension ParkReason {
    init(_ stored: Navigator_V1_StoredParkedIntent.OneOf_Reason) {
        switch stored {
        case .guardUnmet(let value): self = .guardUnmet(condition: value.condition, redirect: value.redirect)
        case .blocked(let value): self = .blocked(by: NodeID(rawValue: value.modalID), screen: value.screen)
        case .notReady: self = .notReady
        }
    }
}

extension Navigator_V1_StoredParkedIntent {
    public init(_ parked: ParkedIntent) {
        self.init()
        intent = .init(parked.intent)
        reason = OneOf_Reason(parked.reason)
        parkedAtUnixNanos = parked.parkedAt
        expiresAtUnixNanos = parked.expiresAt
    }

    public func core(_ field: String) throws(WireError) -> ParkedIntent {
        guard let stored = self.reason else { throw WireError(.malformed, "\(field) has no reason") }
        try plausibleTime(parkedAtUnixNanos, "\(field).parked_at_unix_nanos")
        try plausibleTime(expiresAtUnixNanos, "\(field).expires_at_unix_nanos")
        let reason = ParkReason(stored)
        return ParkedIntent(
            intent: try intent.core(), reason: reason, parkedAt: parkedAtUnixNanos, expiresAt: expiresAtUnixNanos)
    }
}

/// A stored time (unix ns) within 2^62 ns (146 years) of 1970, either way: sums with a window or
/// a time to live and differences of two such times cannot overflow. The service writes only
/// such times; a record holding another was not written by it and is quarantined.
func plausibleTime(_ value: Int64, _ field: @autoclosure () -> String) throws(WireError) {
    guard value.magnitude < 1 << 62 else {
        throw WireError(
            .malformed, "\(field()) is \(value); expected unix nanoseconds within 146 years of 1970 (|t| < 2^62)")
    }
}
