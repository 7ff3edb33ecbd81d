import NavigatorWire
import Testing

@testable import NavigatorHTTP

@Suite("A streamed session's history")
struct StreamHistoryTests {
    static func batch(_ epoch: UInt64, _ seq: UInt64) -> StreamFrame {
        StreamFrame(.batch, position: StreamPosition(epoch: epoch, seq: seq), json: [])
    }

    @Test("resuming: recovered and what was missed while every batch after the position is kept, else nothing")
    func resume() {
        var history = StreamHistory(size: 3, seconds: 120)
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 0)) == nil)  // nothing followed yet
        history.startOver(at: StreamPosition(epoch: 7, seq: 10))
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 10))?.map(\.kind) == [.recovered])
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 9)) == nil)  // seq 10 is not kept
        for seq in 11...14 {
            history.append(Self.batch(7, UInt64(seq)), at: StreamPosition(epoch: 7, seq: UInt64(seq)))
        }
        // Three kept: 12, 13, 14.
        #expect(history.frames.compactMap(\.position?.seq) == [12, 13, 14])
        let resumed = history.resume(from: StreamPosition(epoch: 7, seq: 11))
        #expect(resumed?.map(\.kind) == [.recovered, .batch, .batch, .batch])
        #expect(resumed?.dropFirst().compactMap(\.position?.seq) == [12, 13, 14])
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 10)) == nil)  // 11 is gone
        #expect(history.resume(from: StreamPosition(epoch: 6, seq: 14)) == nil)  // another epoch
        #expect(history.resume(from: StreamPosition(epoch: 7, seq: 15)) == nil)  // ahead of it
        history.startOver(at: StreamPosition(epoch: 8, seq: 0))
        #expect(history.frames.isEmpty)
    }
}
