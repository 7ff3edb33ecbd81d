/// Secure mode: whether the connection a subscription came from is still there, so that egress
/// never applies a subscription to a peer that is gone.
///
/// Why: with XPUB_MANUAL, libzmq 4.3.4 queues each subscription with a raw pointer to its
/// peer's pipe and applies `ZMQ_SUBSCRIBE` to the pipe of the last message received. A peer
/// that goes away before egress reads its subscription has its pipe freed; applying the
/// subscription then puts the freed pipe into the subscription trie, and the next matching
/// publish writes into freed memory (fixed in libzmq 4.3.5, 2df7ab6a; Debian ships 4.3.4). A
/// subscription's descriptor alone cannot tell: the next connection gets the same number.
///
/// What it knows, from libzmq's source:
/// - Every connection on a descriptor has one *accepted* event, then (when it ends) one
///   *disconnected* event, queued on the monitor before its pipe is let go; connections on one
///   descriptor follow each other, so its events alternate, and a connection's index on the
///   descriptor (1, 2, …) is its place among the accepted events.
/// - A connection's messages reach the XPUB's queue before any of a later connection on the same
///   descriptor (the socket's mailbox is first-in first-out, and the later connection is
///   accepted only after the earlier one closed its descriptor), so the connections seen on a
///   descriptor come in index order.
/// - Once the XPUB's queue has been read empty (``drained()``), every message of the connections
///   that came before the last accepted one on a descriptor has been read.
/// - The ZAP handler numbers each connection it admits (``Security/connectionProperty``), and
///   every message on a connection carries its number: messages of two connections on one
///   descriptor are told apart.
///
/// Two conditions these rest on, both true of navigatord: the service's context has one I/O
/// thread (an accepted event could otherwise come after its connection's disconnected event),
/// and the commands socket is never unbound while it runs (an unbind ends connections without
/// events).
///
/// A connection not seen before on a descriptor is one of the connections accepted since the
/// last one seen (and since the last time the queue was read empty). When that is exactly one,
/// its index is known; when it could be several, the ledger cannot tell a live connection from
/// a gone one: ``Verdict/unsure``, and egress drops the descriptor's current connection (which
/// reconnects and subscribes again) rather than risk either a freed pipe or a live subscriber
/// that silently receives nothing.
struct ConnectionLedger {
    enum Verdict: Equatable {
        /// The connection is there: its subscription may be applied.
        case open
        /// The connection has ended (or is being dropped): nothing of it is applied.
        case gone
        /// Could be the descriptor's live connection or an earlier one that has ended: drop the
        /// live one (``dropped(_:)``) and apply nothing.
        case unsure
    }

    private struct Descriptor {
        var accepts = 0
        var disconnects = 0
        /// Connections up to this index were dropped by egress: gone, or about to be.
        var droppedThrough = 0
        /// The lowest index a connection not yet seen can have.
        var floor = 1
        /// The ledger's drain count when `floor` was last brought up to date.
        var drainMark = 0
        /// The latest connection seen, and its index (the lowest it can have when not `exact`).
        var last: (connection: UInt64, index: Int, exact: Bool)?

        /// Every connection up to this index has ended or is being dropped.
        var goneThrough: Int { max(disconnects, droppedThrough) }
    }

    private var descriptors: [Int32: Descriptor] = [:]
    private var drains = 0

    /// A message that libzmq 4.3.4 queues without its pipe (anything but a subscription or an
    /// unsubscription: empty, another first byte) was read since the queue was last read empty.
    /// Each receive then takes the pipe of a later message, so no subscription may be applied
    /// until the next ``drained()``, which clears this.
    var misaligned = false

    /// The monitor reported a connection accepted on `descriptor`.
    mutating func accepted(_ descriptor: Int32) {
        update(descriptor) { $0.accepts += 1 }
    }

    /// The monitor reported the connection on `descriptor` ended.
    mutating func disconnected(_ descriptor: Int32) {
        update(descriptor) { $0.disconnects += 1 }
    }

    /// The XPUB's queue was read until empty, after the events so far were entered.
    mutating func drained() {
        drains += 1
        misaligned = false
    }

    /// Egress dropped the descriptor's current connection.
    mutating func dropped(_ descriptor: Int32) {
        update(descriptor) { $0.droppedThrough = $0.accepts }
    }

    /// Whether the connection numbered `connection`, whose message came in on `descriptor`,
    /// is still there. Enter the monitor's events first: all of them, up to after the message
    /// was received.
    mutating func verdict(descriptor: Int32, connection: UInt64) -> Verdict {
        var verdict = Verdict.gone
        update(descriptor) { entry in
            if let last = entry.last, last.connection == connection {
                verdict = last.exact && last.index > entry.goneThrough ? .open : .gone
                return
            }
            let lowest = max(entry.floor, (entry.last?.index ?? 0) + 1)
            let highest = entry.accepts
            guard lowest <= highest else {
                // No accepted event for it: cannot happen if every event was entered. Nothing is
                // known, so nothing is applied, and the descriptor is not touched.
                entry.last = (connection, lowest, false)
                verdict = .gone
                return
            }
            entry.last = (connection, lowest, lowest == highest)
            if highest <= entry.goneThrough {
                verdict = .gone
            } else {
                verdict = lowest == highest ? .open : .unsure
            }
        }
        return verdict
    }

    /// Whether `descriptor` holds a live connection of the XPUB, as far as the events tell.
    func isOpen(_ descriptor: Int32) -> Bool { openConnection(descriptor) != nil }

    /// The index of the live connection on `descriptor`, if the events say there is one.
    func openConnection(_ descriptor: Int32) -> Int? {
        guard let entry = descriptors[descriptor], entry.accepts > entry.disconnects else { return nil }
        return entry.accepts
    }

    private mutating func update(_ descriptor: Int32, _ change: (inout Descriptor) -> Void) {
        var entry = descriptors[descriptor] ?? Descriptor()
        // A drain since this descriptor's last event: every connection before its last
        // accepted one has been read out of the queue.
        if entry.drainMark < drains {
            entry.floor = max(entry.floor, entry.accepts)
            entry.drainMark = drains
        }
        change(&entry)
        descriptors[descriptor] = entry
    }
}
