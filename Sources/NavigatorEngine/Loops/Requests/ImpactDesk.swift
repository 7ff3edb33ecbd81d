import Locking
import NavigatorCore
import ZeroMQ

/// Impact reports (`routes_impact`) are made on a thread of their own, one at a time: replaying
/// thousands of intents against two maps takes a while (tens of milliseconds in release builds),
/// and the requests thread must keep answering meanwhile. The report goes back to the requests
/// thread as a worker's reply would, on the replies socket.
final class ImpactDesk: Sendable {
    private let context: Context
    /// The thread making a report, while one is.
    private let running = Locked<DedicatedThread?>(nil)
    private let busy = Locked(false)

    init(context: Context) { self.context = context }

    /// Starts `make` on its own thread and sends what it returns as the reply to `routingID`;
    /// false (nothing started) while another report is being made.
    func start(routingID: [UInt8], delimiter: [UInt8], _ make: @escaping @Sendable () -> [UInt8]) -> Bool {
        let claimed = busy.withLock { busy in
            guard !busy else { return false }
            busy = true
            return true
        }
        guard claimed else { return false }
        let context = self.context
        let thread = DedicatedThread(name: "nav-impact") { [self] in
            let reply = make()
            // The requests thread may have stopped meanwhile: then nobody reads it, and closing
            // with no linger drops it.
            if let socket = try? Socket(context, type: .push) {
                try? socket.set(.linger, .zero)
                if (try? socket.connect(Internal.replies)) != nil {
                    try? socket.send(routingID, more: true)
                    try? socket.send(delimiter, more: true)
                    try? socket.send(reply)
                }
                socket.close()
            }
            self.busy.withLock { $0 = false }
        }
        running.withLock { previous in
            previous?.join()  // ended already: it cleared `busy` as its last step
            previous = thread
        }
        return true
    }

    /// Waits for a report being made (the engine's stop, before the context ends).
    func join() {
        running.withLock { $0 }?.join()
    }
}
