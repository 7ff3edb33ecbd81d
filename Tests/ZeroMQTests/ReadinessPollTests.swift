import Synchronization
import Testing
import ZeroMQ

/// ``ReadinessPoll`` sleeps on the sockets' descriptors alone, so what it must get right is when
/// it may sleep: a socket read until it had nothing signals the next message; one read only in
/// part may hold messages without a signal. A wrong answer shows here as a wait that returns with
/// nothing fired while a message waits (or sleeps out its limit instead of returning).
@Suite("Waiting on sockets' descriptors")
struct ReadinessPollTests {
    /// Two PULLs, each fed by its own PUSH over `transport`.
    private func pair(_ context: Context, _ transport: Transport) throws -> (
        pulls: [Socket], pushes: [Socket], places: [BindPoint]
    ) {
        var pulls: [Socket] = []
        var pushes: [Socket] = []
        var places: [BindPoint] = []
        for _ in 0..<2 {
            let place = try BindPoint(transport)
            let pull = try Socket(context, type: .pull).bounded()
            try pull.bind(place.endpoint)
            let push = try Socket(context, type: .push).bounded()
            try push.connect(try pull.lastEndpoint)
            pulls.append(pull)
            pushes.append(push)
            places.append(place)
        }
        return (pulls, pushes, places)
    }

    /// Reads `socket` until a receive finds nothing; returns what it read.
    private func drain(_ socket: Socket) throws -> [String] {
        var read: [String] = []
        while let frames = try socket.tryReceiveMultipart() { read.append(frames[0].string) }
        return read
    }

    /// Reads whatever fires until `count` messages came from socket `index`, at most `deadline`;
    /// nothing may come from the others (they may fire: a connection's own commands signal too).
    private func collect(
        _ count: Int, from index: Int, _ ready: inout ReadinessPoll, _ pulls: [Socket]
    ) throws -> [String] {
        var got: [String] = []
        let end = ContinuousClock.now + deadline
        while got.count < count, ContinuousClock.now < end {
            try ready.wait(milliseconds: 100)
            for other in pulls.indices where ready.fired(other) {
                let read = try drain(pulls[other])
                ready.read(other, drained: true)
                if other == index { got += read } else { #expect(read.isEmpty, "socket \(other) got \(read)") }
            }
        }
        return got
    }

    @Test(
        "a drained socket fires when its next message comes; one read in part counts as fired",
        arguments: Transport.allCases)
    func firesWhenDrained(transport: Transport) async throws {
        try await onThread {
            let context = try Context()
            let (pulls, pushes, places) = try pair(context, transport)
            defer { for place in places { place.remove() } }
            let long = Int32(deadline.components.seconds * 1000)
            var ready = try ReadinessPoll(pulls)

            // Neither was read yet: the wait only looks (a sleep would run out with nothing fired).
            try ready.wait(milliseconds: long)
            #expect(ready.fired(0) && ready.fired(1))
            for index in 0..<2 {
                #expect(try drain(pulls[index]) == [])
                ready.read(index, drained: true)
            }

            // Both drained: a message to the second wakes the wait.
            try pushes[1].send("b1")
            #expect(try collect(1, from: 1, &ready, pulls) == ["b1"])

            // Three to the first, one read: the rest may sit in the pipe with no new signal, so
            // the wait must not sleep on them.
            for text in ["a1", "a2", "a3"] { try pushes[0].send(text) }
            var first: String?
            let end = ContinuousClock.now + deadline
            while first == nil, ContinuousClock.now < end {
                try ready.wait(milliseconds: 100)
                guard ready.fired(0) else { continue }
                first = try pulls[0].tryReceiveMultipart()?[0].string
                ready.read(0, drained: first == nil)
                if ready.fired(1) { ready.read(1, drained: try drain(pulls[1]).isEmpty) }
            }
            #expect(first == "a1")
            ready.read(0, drained: false)
            try ready.wait(milliseconds: long)
            #expect(ready.fired(0), "a socket read in part was slept on")
            var rest = try drain(pulls[0])
            ready.read(0, drained: true)
            if rest.count < 2 { rest += try collect(2 - rest.count, from: 0, &ready, pulls) }
            #expect(rest == ["a2", "a3"])
            for socket in pulls + pushes { socket.close() }
        }
    }

    /// A worker sleeping with no limit must still end when the service stops: the context's
    /// shutdown reaches every socket's mailbox, so the wait returns and the read throws ETERM.
    @Test("the context's shutdown wakes a wait with no limit")
    func shutdownWakes() async throws {
        let context = try Context()
        let waiting = Waiting()
        let waiter = Task.detached {
            try await onThread("readiness-waiter") { () throws -> ZeroMQError.Code? in
                let (pulls, pushes, places) = try pair(context, .inproc)
                defer {
                    for socket in pulls + pushes { socket.close() }
                    for place in places { place.remove() }
                }
                var ready = try ReadinessPoll(pulls)
                for (index, pull) in pulls.enumerated() {
                    _ = try drain(pull)
                    ready.read(index, drained: true)
                }
                waiting.state.withLock { $0 = true }
                try ready.wait(milliseconds: -1)
                for (index, pull) in pulls.enumerated() where ready.fired(index) {
                    do {
                        _ = try pull.tryReceiveMultipart()
                    } catch let error as ZeroMQError {
                        return error.code
                    }
                }
                return nil
            }
        }
        // Nothing is sent: only the shutdown can end the wait, whether it began before or after.
        let end = ContinuousClock.now + deadline
        while !waiting.state.withLock({ $0 }), ContinuousClock.now < end { await Task.yield() }
        context.shutdown()
        #expect(try await waiter.value == ZeroMQError.Code.terminated)
    }
}

/// Set once the waiter's sockets are open (a shutdown before would fail their creation instead).
private final class Waiting: Sendable {
    let state = Mutex(false)
}
