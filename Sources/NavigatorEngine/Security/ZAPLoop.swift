import Logging
import NavigatorPort
import ZeroMQ

/// The ZAP handler (ZeroMQ RFC 27) of a secure navigatord: a REP socket on
/// `inproc://zeromq.zap.01` in the service's context, asked by libzmq for every CURVE handshake
/// on the service's sockets. It admits the public keys of the access file and names each
/// connection after its client (the User-Id every message on it then carries); anything else —
/// an unknown key, another mechanism or domain — is refused, and the handshake fails.
///
/// libzmq 4.3 admits *any* client key when no handler answers, so this part is started first,
/// proven to answer (``probe(_:)``) before another socket binds, and stopped last; if it fails,
/// the service stops.
struct ZAPLoop: SocketLoop {
    static let endpoint = "inproc://zeromq.zap.01"
    static let control = "inproc://navigator-control-zap"

    let context: Context
    let security: Security
    let counters: EngineCounters
    let supervisor: Supervisor
    let logger: Logger

    var name: String { "nav-zap" }

    struct Sockets {
        let handler: Socket
        let control: Socket
        let limiter: LogLimiter
    }

    func open() throws -> Sockets {
        let handler = try Socket(context, type: .rep)
        try handler.bind(Self.endpoint)
        let control = try Socket(context, type: .pull)
        try control.bind(Self.control)
        return Sockets(handler: handler, control: control, limiter: LogLimiter(logger: logger))
    }

    func run(_ sockets: Sockets) throws {
        var poller = Poller()
        poller.add(sockets.handler)
        poller.add(sockets.control)
        var frames: [Message] = []
        var admitted: UInt64 = 0
        do {
            while true {
                try poller.poll(timeout: nil)
                try supervisor.checkInjected(name)
                if poller.events(at: 1).contains(.readable) { break }
                // A REP socket hands over one request at a time, and takes the reply before the next.
                guard let count = try sockets.handler.receiveMultipart(into: &frames, wait: false, maxFrames: 8)
                else { continue }
                let reply = answer(Array(frames.prefix(count)), sockets, connection: admitted + 1)
                if reply[2] == Array("200".utf8) { admitted += 1 }
                try sockets.handler.send(multipart: reply)
            }
            logger.debug("ZAP handler stopped")
        } catch let error as ZeroMQError where error.code == .terminated {
            logger.debug("ZAP handler ended by context shutdown")
        }
    }

    /// `[version][request id][domain][address][routing id][mechanism][credentials...]` ->
    /// `[version][request id][status][status text][user id][metadata]`. An admitted connection
    /// is named after its client (User-Id) and numbered `connection` (the metadata property
    /// ``Security/connectionProperty``, which egress's ``ConnectionLedger`` reads).
    func answer(_ frames: [Message], _ sockets: Sockets, connection: UInt64) -> [[UInt8]] {
        guard frames.count >= 6, frames[0].string == "1.0" else {
            counters.authRefused.add()
            logger.warning("ZAP request of an unknown shape refused", metadata: ["frames": "\(frames.count)"])
            let id = frames.count > 1 ? frames[1].bytes : []
            return [Array("1.0".utf8), id, Array("500".utf8), Array("malformed ZAP request".utf8), [], []]
        }
        let requestID = frames[1].bytes
        let address = frames[3].string
        guard frames[2].string == Security.domain else {
            return refuse(
                requestID, address, sockets, "ZAP domain \(LogText(frames[2].string)); expected \(Security.domain)")
        }
        guard frames[5].string == "CURVE", frames.count == 7, frames[6].count == 32 else {
            return refuse(
                requestID, address, sockets, "mechanism \(LogText(frames[5].string)); expected CURVE with a client key")
        }
        let key = CurveKeyPair.z85(frames[6].bytes)
        guard let client = security.client(key: key) else {
            return refuse(requestID, address, sockets, "client key \(key) is not in the access file")
        }
        counters.authAdmitted.add()
        logger.debug(
            "connection admitted",
            metadata: ["peer": "\(LogText(address))", "client": "\(client.name)", "role": "\(client.role.rawValue)"])
        return [
            Array("1.0".utf8), requestID, Array("200".utf8), Array("OK".utf8), Array(client.name.utf8),
            Self.metadata([(Security.connectionProperty, String(connection))]),
        ]
    }

    /// ZMTP metadata: per property a one-byte name length, the name, a four-byte big-endian
    /// value length, the value. libzmq gives the ZAP handler's properties precedence over those a
    /// peer sends itself.
    static func metadata(_ properties: [(String, String)]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (name, value) in properties {
            let name = Array(name.utf8)
            let value = Array(value.utf8)
            bytes.append(UInt8(name.count))
            bytes += name
            withUnsafeBytes(of: UInt32(value.count).bigEndian) { bytes += $0 }
            bytes += value
        }
        return bytes
    }

    private func refuse(_ requestID: [UInt8], _ address: String, _ sockets: Sockets, _ why: String) -> [[UInt8]] {
        counters.authRefused.add()
        if sockets.limiter.allow("zap:\(address)") {
            logger.notice("connection refused", metadata: ["peer": "\(LogText(address))", "reason": "\(why)"])
        }
        return [Array("1.0".utf8), requestID, Array("400".utf8), Array(why.utf8), [], []]
    }

    /// Whether a ZAP handler answers in `context`: a request for a key nobody holds must be
    /// refused within `timeout`. Without an answer libzmq would admit every key, so a secure
    /// service that cannot prove its handler does not start.
    static func probe(_ context: Context, timeout: Duration = .seconds(5)) throws {
        let request = try Socket(context, type: .req)
        try request.set(.linger, .zero)
        try request.set(.receiveTimeout, timeout)
        try request.connect(endpoint)
        let unknown = try CurveKeyPair.z85Bytes(CurveKeyPair.generate().publicKey)
        try request.send(multipart: [
            Array("1.0".utf8), Array("probe".utf8), Array(Security.domain.utf8), Array("127.0.0.1".utf8), [],
            Array("CURVE".utf8), unknown,
        ])
        var reply: [Message] = []
        do {
            reply = try request.receiveMultipart()
        } catch {
            guard error.code == .wouldBlock else { throw error }
        }
        guard reply.count >= 3, reply[1].string == "probe", reply[2].string == "400" else {
            throw EngineError(
                .securityUnavailable,
                "the ZAP handler did not answer within \(timeout); secure mode cannot start (libzmq would admit any client key)"
            )
        }
    }
}
