import NavigatorCore

extension Navigator_V1_StoredSession {
    /// The `navigator.v1.StoredSession` bytes of a session without its parked intents (those are
    /// appended as ``encodedParkedField(_:)``), written by hand in one pass: the flush writes
    /// every changed session, and building the SwiftProtobuf message and sizing it twice cost
    /// more than the database write. The bytes are those SwiftProtobuf writes with deterministic
    /// ordering (`StoredSessionEncoderTests` checks this over random sessions).
    public static func encodedWithoutParked(_ state: SessionState, seq: UInt64) -> [UInt8] {
        let ids = state.recentIntentIDs.entries
        var writer = ProtoWriter(capacity: 256 + ids.count * 8)
        writer.uint64(1, seq)
        writer.message(2) { $0.tree(state.tree) }
        writer.conditions(3, state.conditions)
        writer.uint64(6, state.lastServiceSeq)
        writer.bool(7, state.shellReady)
        // Read as views of their packed buffer: no strings made.
        state.recentlyExpired.forEachEntry { expired in
            writer.message(8) {
                $0.string(1, utf8: expired.intentID)
                $0.string(2, utf8: expired.source)
                $0.int64(5, expired.expiredAt)
                switch expired.reason {
                case .guardUnmet(let condition, let redirect):
                    $0.message(6) {
                        $0.string(1, utf8: condition)
                        $0.string(2, utf8: redirect)
                    }
                case .blocked(let id, let screen):
                    $0.message(7) {
                        $0.uint64(1, id.rawValue)
                        $0.string(2, utf8: screen)
                    }
                case .notReady:
                    $0.message(8) { _ in }
                }
                // proto3 `optional`: written even when 0.
                $0.tag(9, 0)
                $0.varint(expired.waited)
            }
        }
        writer.packedFixed64(9, ids)
        writer.int64(10, state.recentIntentIDs.base)
        if let version = state.appVersion { writer.string(11, version.text) }
        return writer.bytes
    }
}

extension ProtoWriter {
    mutating func tree(_ tree: ScreenTree) {
        message(1) { $0.root(tree.root) }
        modals(2, tree.modals)
        uint64(3, tree.version)
        uint64(4, tree.lastServiceID)
    }

    /// An int64 field (negative values take ten bytes, as protobuf says), left out when 0.
    mutating func int64(_ field: Int, _ value: Int64) { uint64(field, UInt64(bitPattern: value)) }

    /// A packed `repeated fixed64`, left out when empty.
    mutating func packedFixed64(_ field: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        tag(field, 2)
        varint(UInt64(values.count * 8))
        fixed64s(values)
    }

    /// A `map<string, bool>`, entries in key order.
    mutating func conditions(_ field: Int, _ map: [String: Bool]) {
        guard !map.isEmpty else { return }
        Self.inKeyOrder(map) { key, value in
            message(field) {
                $0.stringAlways(1, key)
                $0.tag(2, 0)
                $0.varint(value ? 1 : 0)
            }
        }
    }
}
