import ZeroMQ

/// The thread that asks ``MemoryGuard/check()`` four times a second (nav-memory); above the
/// ceiling it fails, and the service stops as in a graceful stop, its state flushed. A part of
/// its own, so that its failure leaves every other part to stop in order.
struct MemoryLoop: SocketLoop {
    let context: Context
    let memory: MemoryGuard
    let supervisor: Supervisor

    static let control = "inproc://navigator-control-memory"

    var name: String { "nav-memory" }

    func open() throws -> Socket {
        let control = try Socket(context, type: .pull)
        try control.bind(Self.control)
        return control
    }

    func run(_ control: Socket) throws {
        defer { control.close() }
        var poller = Poller()
        poller.add(control)
        while true {
            try supervisor.checkInjected(name)
            try memory.check()
            try poller.poll(timeout: .milliseconds(250))
            if try control.tryReceiveMultipart() != nil { return }  // the stop marker
        }
    }
}
