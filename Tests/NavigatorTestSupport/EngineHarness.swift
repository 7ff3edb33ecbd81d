import Foundation
import Logging
import NavigatorCore
import NavigatorEngine
import NavigatorWire
import SwiftProtobuf
import TestThreads
import Testing
import ZeroMQ

/// Starts a service on ephemeral ports on 127.0.0.1 with state in a temporary directory, runs
/// `body`, and stops the service whatever happens.
public func withService(
    workers: Int = 2, dataDirectory: URL? = nil, _ configure: (inout EngineConfiguration) -> Void = { _ in },
    _ body: @Sendable (Engine, BoundEndpoints) async throws -> Void
) async throws {
    let directory = dataDirectory ?? temporaryDirectory("navsvc")
    defer { if dataDirectory == nil { try? FileManager.default.removeItem(at: directory) } }
    var configuration = TestService.configuration(dataDirectory: directory, workers: workers)
    configure(&configuration)
    let server = try Engine(configuration: configuration, logger: TestService.logger("navigatord-test"))
    try await server.start()
    do {
        try await body(server, server.endpoints)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

public func temporaryDirectory(_ prefix: String) -> URL { TestService.temporaryDirectory(prefix) }

/// A producer, a requests client and shells, all owned by the one thread that runs the test's
/// socket work.
public final class Client {
    public let context: Context
    let endpoints: BoundEndpoints
    private var dealer: Socket?
    private var push: Socket?
    private var counter = 0
    private let sendTimeout: Duration
    private let receiveTimeout: Duration
    private let linger: Duration
    /// Secure mode: this client's key pair and the server's public key.
    private let curve: (keys: CurveKeyPair, serverKey: String)?

    public init(
        _ endpoints: BoundEndpoints, sendTimeout: Duration = .seconds(5), receiveTimeout: Duration = .seconds(10),
        linger: Duration = .seconds(2), curve: (keys: CurveKeyPair, serverKey: String)? = nil
    ) throws {
        context = try Context()
        self.endpoints = endpoints
        self.sendTimeout = TestTiming.scaled(sendTimeout)
        self.receiveTimeout = TestTiming.scaled(receiveTimeout)
        self.linger = linger
        self.curve = curve
    }

    private func secured(_ socket: Socket) throws -> Socket {
        if let curve { try socket.makeCurveClient(curve.keys, serverKey: curve.serverKey) }
        return socket
    }

    /// Sends a request and waits (bounded) for its reply.
    public func request(_ kind: Navigator_V1_Request.OneOf_Kind) throws -> Navigator_V1_Reply {
        if dealer == nil {
            let socket = try secured(Socket(context, type: .dealer))
            try socket.set(.receiveTimeout, receiveTimeout)
            try socket.connect(endpoints.requests[0])
            dealer = socket
        }
        counter += 1
        var request = Navigator_V1_Request()
        request.requestID = "r\(counter)"
        request.kind = kind
        try dealer!.send(multipart: [[UInt8](), try request.serializedBytes() as [UInt8]])
        while true {
            let frames: [ZeroMQ.Message]
            do throws(ZeroMQError) {
                frames = try dealer!.receiveMultipart()
            } catch {
                guard error.code == .wouldBlock else { throw error }
                // Say which request went unanswered: a timeout here is the service's, not the test's.
                throw RequestTimedOut(
                    description: "request \(request.requestID) (\(kind)) got no reply within \(receiveTimeout)")
            }
            let reply = try Navigator_V1_Reply(serializedBytes: frames.last!.bytes)
            if reply.requestID == request.requestID { return reply }
        }
    }

    /// Fire and forget, as producers do.
    public func send(_ intent: Navigator_V1_Intent, session: String) throws {
        try sendRaw([Array(session.utf8), try intent.serializedBytes() as [UInt8]])
    }

    public func sendRaw(_ frames: [[UInt8]]) throws {
        if push == nil {
            let socket = try secured(Socket(context, type: .push))
            try socket.set(.linger, linger)
            // A PUSH with no peer waits for one forever; a test must fail instead.
            try socket.set(.sendTimeout, sendTimeout)
            try socket.connect(endpoints.intents[0])
            push = socket
        }
        try push!.send(multipart: frames)
    }

    /// A SUB on the commands socket, not waiting for the service to see its subscriptions.
    public func subscriber(_ topics: [String]) throws -> Socket {
        let sub = try secured(Socket(context, type: .sub))
        try sub.set(.receiveTimeout, receiveTimeout)
        for topic in topics { try sub.subscribe(topic) }
        try sub.connect(endpoints.commands[0])
        return sub
    }

    /// A SUB on the commands socket, returned once the service has seen the subscription.
    public func subscribe(_ topics: String...) throws -> Socket {
        let before = try request(.stats(.init())).stats.subscribers
        let sub = try Socket(context, type: .sub)
        try sub.set(.receiveTimeout, TestTiming.scaled(.seconds(10)))
        for topic in topics { try sub.subscribe(topic) }
        try sub.connect(endpoints.commands[0])
        let deadline = ContinuousClock.now + .seconds(10)
        while try request(.stats(.init())).stats.subscribers < before + UInt64(topics.count) {
            guard ContinuousClock.now < deadline else { throw TestFailure("the service never saw the subscription") }
        }
        return sub
    }
}

public struct Published: Sendable {
    public let topic: String
    public let header: FrameHeader
    public let payload: [UInt8]

    public var batch: Navigator_V1_CommandBatch {
        get throws { try Navigator_V1_CommandBatch(serializedBytes: payload) }
    }
    public var rejection: Navigator_V1_Rejection { get throws { try Navigator_V1_Rejection(serializedBytes: payload) } }
    public var audit: Navigator_V1_AuditRecord { get throws { try Navigator_V1_AuditRecord(serializedBytes: payload) } }
}

extension Socket {
    /// The next published message (bounded by the receive timeout).
    public func nextPublished() throws -> Published {
        let frames = try receiveMultipart()
        guard frames.count == 3 else { throw TestFailure("published message has \(frames.count) frames") }
        return Published(
            topic: frames[0].string, header: try FrameHeader(decoding: frames[1].bytes), payload: frames[2].bytes)
    }
}

/// Runs socket work (blocking libzmq calls) on a thread of its own, never on Swift concurrency's
/// pool, as part of the test's task: an `#expect` in it is attributed to the test.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await offPool(name: "svc-test", body)
}

/// A request of ``Client`` that got no reply within its receive timeout, naming it.
public struct RequestTimedOut: Error, CustomStringConvertible {
    public let description: String
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public func wireIntent(
    _ id: String, _ path: [ScreenContext] = [], url: String = "", session: String = "",
    priority: Intent.Priority = .normal,
    ttl: UInt32 = 0
) -> Navigator_V1_Intent {
    .with {
        $0.id = id
        $0.session = session
        $0.path = path.map(Navigator_V1_ScreenContext.init)
        $0.url = url
        $0.priority = .init(priority)
        $0.ttlMs = ttl
        $0.sentAtUnixNanos = 1_700_000_000_000_000_000
    }
}

/// Whether `body` timed out on a ZeroMQ receive (an absent answer: a refused CURVE handshake
/// answers nothing).
public func timesOut(_ body: () throws -> Void) -> Bool {
    do {
        try body()
        return false
    } catch let error as ZeroMQError {
        return error.code == .wouldBlock
    } catch is RequestTimedOut {
        return true
    } catch {
        return false
    }
}

extension Navigator_V1_Reply {
    public func expectResolved(sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .resolved? = kind else {
            Issue.record("expected resolved, got \(self)", sourceLocation: sourceLocation)
            return
        }
    }
}
