import NavigatorTestSupport
import Testing

@testable import NavigatorEngine

/// The ledger that keeps secure mode from applying a subscription to a connection that is gone
/// (libzmq 4.3.4 would put its freed pipe into the subscription trie). Descriptor 7 throughout;
/// connection numbers are the ZAP handler's.
@Suite("Connection ledger: which connection a subscription came from, and whether it is there")
struct ConnectionLedgerTests {
    @Test("a descriptor's first connection is open until its disconnected event, then gone")
    func firstConnection() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .open)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .open)
        ledger.disconnected(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
    }

    @Test("a subscription read after its connection ended is gone, even with no other connection yet")
    func endedBeforeRead() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        ledger.disconnected(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
        #expect(!ledger.isOpen(7))
    }

    @Test("a descriptor reused: the old connection's late subscription is gone, the new one's open")
    func reusedAfterSeen() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .open)
        ledger.disconnected(7)
        ledger.accepted(7)
        // Connection 1's subscriptions still queued: its number tells it apart from the new one.
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
        #expect(ledger.verdict(descriptor: 7, connection: 2) == .open)
        #expect(ledger.isOpen(7))
    }

    @Test(
        "the case the descriptor alone got wrong: a connection never seen, ended, its descriptor reused — unsure, never open"
    )
    func reusedBeforeSeen() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)  // connection 1 subscribes, and ends before egress reads it
        ledger.disconnected(7)
        ledger.accepted(7)  // connection 2 on the same descriptor, open
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .unsure)
        ledger.dropped(7)  // egress drops the descriptor's connection (2); it reconnects
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
        #expect(ledger.verdict(descriptor: 7, connection: 2) == .gone)
        ledger.disconnected(7)
        ledger.accepted(7)  // the reconnection
        #expect(ledger.verdict(descriptor: 7, connection: 3) == .open)
    }

    @Test("once the queue was read empty after a reuse, the new connection's first subscription is open")
    func drainSettlesReuse() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        ledger.disconnected(7)
        ledger.accepted(7)
        ledger.drained()  // anything connection 1 sent has been read: nothing was
        #expect(ledger.verdict(descriptor: 7, connection: 2) == .open)
    }

    @Test("a connection that never sent anything (a refused handshake) between two others")
    func silentConnectionBetween() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .open)
        ledger.disconnected(7)
        ledger.accepted(7)  // refused by the ZAP handler: no number, no message
        ledger.disconnected(7)
        ledger.accepted(7)
        // Connection 2 could be the refused one or this one: without a drain, unsure.
        var undrained = ledger
        #expect(undrained.verdict(descriptor: 7, connection: 2) == .unsure)
        // After a drain that followed the last accepted event, only this one can still speak.
        ledger.drained()
        #expect(ledger.verdict(descriptor: 7, connection: 2) == .open)
    }

    @Test("a drain counts only for the events entered before it")
    func drainBeforeEvent() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        ledger.disconnected(7)
        ledger.drained()
        ledger.accepted(7)  // after the drain: connection 1's subscriptions may still be queued
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .unsure)
    }

    @Test("a drop ends what the descriptor held; later connections are judged as usual")
    func dropThenReconnect() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .open)
        ledger.dropped(7)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
        ledger.disconnected(7)
        ledger.accepted(7)
        #expect(ledger.verdict(descriptor: 7, connection: 2) == .open)
    }

    @Test("a subscription on a descriptor with no accepted event is not applied, and nothing is dropped")
    func noEvent() {
        var ledger = ConnectionLedger()
        #expect(ledger.verdict(descriptor: 9, connection: 4) == .gone)
        #expect(!ledger.isOpen(9))
    }

    @Test("descriptors are independent")
    func independent() {
        var ledger = ConnectionLedger()
        ledger.accepted(7)
        ledger.accepted(8)
        ledger.disconnected(7)
        #expect(ledger.verdict(descriptor: 8, connection: 2) == .open)
        #expect(ledger.verdict(descriptor: 7, connection: 1) == .gone)
    }

    @Test("a stray message leaves the queue misaligned until it is read empty")
    func misalignedUntilDrained() {
        var ledger = ConnectionLedger()
        #expect(!ledger.misaligned)
        ledger.misaligned = true
        ledger.accepted(7)
        #expect(ledger.misaligned)
        ledger.drained()
        #expect(!ledger.misaligned)
        #expect(ledger.openConnection(7) == 1)
    }

    @Test("the ZAP handler's metadata: name length, name, big-endian value length, value")
    func zapMetadata() {
        let bytes = ZAPLoop.metadata([("X-Connection", "42")])
        #expect(bytes == [12] + Array("X-Connection".utf8) + [0, 0, 0, 2] + Array("42".utf8))
    }
}
