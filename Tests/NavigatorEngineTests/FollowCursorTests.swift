import NavigatorWire
import Testing

@testable import NavigatorEngine

@Suite("A follow's cursor")
struct FollowCursorTests {
    static func at(_ epoch: UInt64, _ seq: UInt64) -> StreamPosition { StreamPosition(epoch: epoch, seq: seq) }

    @Test("before its snapshot a batch is skipped (the snapshot has it); then only what continues is delivered")
    func steps() {
        var cursor = FollowCursor()
        #expect(cursor.batch(Self.at(7, 3)) == .skip)
        #expect(cursor.position == nil)
        cursor.snapshot(Self.at(7, 3))
        #expect(cursor.batch(Self.at(7, 2)) == .skip)  // in the snapshot already
        #expect(cursor.batch(Self.at(7, 3)) == .skip)
        #expect(cursor.batch(Self.at(7, 4)) == .deliver)
        #expect(cursor.position == Self.at(7, 4))
        #expect(cursor.batch(Self.at(7, 6)) == .startOver)  // seq 5 was skipped
        #expect(cursor.position == Self.at(7, 4))
        #expect(cursor.batch(Self.at(8, 1)) == .startOver)  // a new epoch
        cursor.snapshot(Self.at(8, 1))
        #expect(cursor.batch(Self.at(8, 2)) == .deliver)
    }
}
