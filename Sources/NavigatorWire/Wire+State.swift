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
        recentlyExpired = state.recentlyExpired.map { expired in
            .with {
                $0.intentID = expired.intentID
                $0.source = expired.source
                $0.expiredAtUnixNanos = expired.expiredAt
                switch expired.reason {
                case .guardUnmet(let condition, let redirect):
                    $0.guardUnmet = .with {
                        $0.condition = condition
                        $0.redirect = redirect
                    }
                case .blocked(let id, let screen):
                    $0.blocked = .with {
                        $0.modalID = id.rawValue
                        $0.screen = screen
                    }
                case .notReady:
                    $0.notReady = .init()
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
        for intent in parked {
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
        return field
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
        let state = SessionState(
            tree: try tree.core("tree"), conditions: conditions, parked: list,
            recentIntentIDs: RecentIntentIDs(base: recentIdsBaseUnixNanos, entries: recentIds),
            lastServiceSeq: lastServiceSeq, shellReady: shellReady,
            recentlyExpired: try recentlyExpired.enumerated().map { (index, expired) throws(WireError) in
                try expired.core("recently_expired[\(index)]")
            })
        return (state, seq)
    }
}

extension Navigator_V1_StoredExpiredIntent {
    /// The expired intent back. Records written before the reason was kept as data hold it as
    /// text, and the time it was parked instead of how long it waited.
    public func core(_ field: String) throws(WireError) -> ExpiredIntent {
        let reason: ParkReason
        switch why {
        case .guardUnmet(let value): reason = .guardUnmet(condition: value.condition, redirect: value.redirect)
        case .blocked(let value): reason = .blocked(by: NodeID(rawValue: value.modalID), screen: value.screen)
        case .notReady: reason = .notReady
        case nil:
            guard let parsed = ParkReason(text: self.reason) else {
                throw WireError(
                    .malformed, "\(field) has reason \"\(self.reason)\"; expected a reason as data or as its text")
            }
            reason = parsed
        }
        return ExpiredIntent(
            intentID: intentID, source: source, reason: reason,
            parkedAt: hasWaitedNanos ? expiredAtUnixNanos &- waitedNanos : parkedAtUnixNanos,
            expiredAt: expiredAtUnixNanos)
    }
}

extension Navigator_V1_StoredParkedIntent {
    public init(_ parked: ParkedIntent) {
        self.init()
        intent = .init(parked.intent)
        switch parked.reason {
        case .guardUnmet(let condition, let redirect):
            guardUnmet = .with {
                $0.condition = condition
                $0.redirect = redirect
            }
        case .notReady:
            notReady = .init()
        case .blocked(let id, let screen):
            blocked = .with {
                $0.modalID = id.rawValue
                $0.screen = screen
            }
        }
        parkedAtUnixNanos = parked.parkedAt
        expiresAtUnixNanos = parked.expiresAt
    }

    public func core(_ field: String) throws(WireError) -> ParkedIntent {
        let reason: ParkReason
        switch self.reason {
        case .guardUnmet(let value): reason = .guardUnmet(condition: value.condition, redirect: value.redirect)
        case .blocked(let value): reason = .blocked(by: NodeID(rawValue: value.modalID), screen: value.screen)
        case .notReady: reason = .notReady
        case nil: throw WireError(.malformed, "\(field) has no reason")
        }
        return ParkedIntent(
            intent: try intent.core(), reason: reason, parkedAt: parkedAtUnixNanos, expiresAt: expiresAtUnixNanos)
    }
}
