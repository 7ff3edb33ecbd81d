import Locking
import NavigatorClient
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `navload --streams N`: N Server-Sent Events streams of the run's sessions
/// (`GET /v1/sessions/load-k/stream` on navigatord's HTTP endpoint), read by one thread with
/// epoll(7). Each batch event's intent id gives the intent's due time, so its delivery latency is
/// measured as the ZeroMQ subscriber's is, from the same schedule.
final class StreamFollowers: Sendable {
    private struct State {
        var latency = Latency()
        var batches: UInt64 = 0
        var measured: UInt64 = 0
        var snapshots = 0
        var failed: String?
    }

    private let state = Locked(State())
    let stop = Atomic<Bool>(false)
    let measureFrom = Atomic<Int64>(.max)
    let count: Int
    private let thread = Locked<DedicatedThread?>(nil)

    init(count: Int) { self.count = count }

    var batches: UInt64 { state.withLock { $0.batches } }
    var measured: UInt64 { state.withLock { $0.measured } }
    var latencySummary: Latency.Summary { state.withLock { $0.latency.summary } }
    var snapshots: Int { state.withLock { $0.snapshots } }
    var failed: String? { state.withLock { $0.failed } }

    /// Opens the streams (stream k follows session `load-(k % sessions)`) and starts reading;
    /// `due(id)` is the due time of the intent with that id (nil: not one of this run's).
    func start(http address: String, sessions: Int, due: @escaping @Sendable (Substring) -> Int64?) throws(ClientError)
    {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw ClientError(.invalidArgument, "--http \(address) is not host:port")
        }
        let host = String(address[..<colon])
        var descriptors: [Int32] = []
        for k in 0..<count {
            var target = sockaddr_in()
            target.sin_family = sa_family_t(AF_INET)
            target.sin_port = port.bigEndian
            inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &target.sin_addr)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            let connected = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard fd >= 0, connected == 0 else {
                let reason = String(cString: strerror(errno))
                if fd >= 0 { close(fd) }
                for open in descriptors { close(open) }
                throw ClientError(
                    .socket,
                    "cannot open stream \(k + 1) of \(count) to \(address): \(reason) (for many streams raise the open-file limit: ulimit -n)"
                )
            }
            var request = Array(
                "GET /v1/sessions/load-\(k % sessions)/stream HTTP/1.1\r\nHost: \(address)\r\n\r\n".utf8)
            _ = write(fd, &request, request.count)
            descriptors.append(fd)
        }
        let opened = descriptors
        let started = DedicatedThread(name: "navload-streams") { [self] in
            read(opened, due: due)
            for fd in opened { close(fd) }
        }
        thread.withLock { $0 = started }
    }

    func join() {
        stop.store(true, ordering: .releasing)
        thread.withLock { $0 }?.join()
    }

    private func read(_ descriptors: [Int32], due: @Sendable (Substring) -> Int64?) {
        // epoll: the cost of a wake-up is the streams that have something, not all of them.
        let poll: EventPoll
        do {
            poll = try EventPoll()
            for (index, fd) in descriptors.enumerated() { try poll.add(fd, token: UInt64(index)) }
        } catch {
            state.withLock { $0.failed = "\(error)" }
            return
        }
        var pending = Array(repeating: [UInt8](), count: descriptors.count)
        var buffer = [UInt8](repeating: 0, count: 65536)
        let batchMarker = Array("event: batch\n".utf8)
        let snapshotMarker = Array("event: snapshot\n".utf8)
        let intentMarker = Array(#""intentId":""#.utf8)
        while !stop.load(ordering: .acquiring) {
            let ready = poll.wait(milliseconds: 50)
            guard !ready.isEmpty else { continue }
            let now = wallClock()
            let from = measureFrom.load(ordering: .relaxed)
            var snapshots = 0
            var latencies: [Int64] = []
            var batches: UInt64 = 0
            for token in ready {
                let i = Int(token)
                let read = Glibc.read(descriptors[i], &buffer, buffer.count)
                guard read > 0 else {
                    if read < 0, errno == EAGAIN || errno == EINTR { continue }
                    state.withLock { $0.failed = $0.failed ?? "a stream was closed by navigatord" }
                    poll.remove(descriptors[i])
                    continue
                }
                pending[i] += buffer[0..<read]
                // Whole events only: each ends with a blank line.
                var consumed = 0
                pending[i].withUnsafeBufferPointer { bytes in
                    var start = 0
                    var index = 0
                    while index + 1 < bytes.count {
                        guard bytes[index] == 10, bytes[index + 1] == 10 else {
                            index += 1
                            continue
                        }
                        let event = UnsafeBufferPointer(rebasing: bytes[start..<index])
                        if Self.find(batchMarker, in: event) != nil {
                            batches += 1
                            if let at = Self.find(intentMarker, in: event) {
                                let idStart = at + intentMarker.count
                                var idEnd = idStart
                                while idEnd < event.count, event[idEnd] != 0x22 { idEnd += 1 }
                                let id = String(decoding: event[idStart..<idEnd], as: UTF8.self)
                                if let due = due(id[...]), due >= from { latencies.append(now - due) }
                            }
                        } else if Self.find(snapshotMarker, in: event) != nil {
                            snapshots += 1
                        }
                        index += 2
                        start = index
                    }
                    consumed = start
                }
                pending[i].removeFirst(consumed)
            }
            if batches > 0 || snapshots > 0 {
                state.withLock { state in
                    state.batches += batches
                    state.snapshots += snapshots
                    for latency in latencies {
                        state.latency.record(nanoseconds: latency)
                        state.measured += 1
                    }
                }
            }
        }
    }

    /// Where `marker` first occurs in `bytes`.
    private static func find(_ marker: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count >= marker.count, let first = marker.first else { return nil }
        var index = 0
        while index + marker.count <= bytes.count {
            if bytes[index] == first {
                var matched = true
                for k in 1..<marker.count where bytes[index + k] != marker[k] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }
}
