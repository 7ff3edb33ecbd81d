/// The service's own inproc endpoints and message shapes between its threads.
///
/// - to a worker: `[kind][...]` — intent `[1][session][Intent]` from ingress; acknowledged
///   request `[2][routing id][delimiter][Request]` from the requests thread; `[stop]` alone.
/// - to egress: `[topic][header][payload]` as published; `[stop]` alone.
/// - to the requests thread's reply inbox: `[routing id][delimiter][Reply]`; `[stop]` alone.
/// - to the flush thread, from workers: `[routing id][delimiter][session][Reply]`, a reply to
///   send on once the session is durable (an empty session: at once); `[stop]` alone (passed on
///   to the requests thread after the replies before it).
///
/// `delimiter` is one byte: 1 if the client sent an empty delimiter frame (DEALER or REQ
/// clients), 0 if not; the reply mirrors it.
enum Internal {
    static func worker(_ index: Int) -> String { "inproc://navigator-worker-\(index)" }
    static let egress = "inproc://navigator-egress"
    static let replies = "inproc://navigator-replies"
    static let acks = "inproc://navigator-acks"
    static let ingressControl = "inproc://navigator-control-ingress"
    static let requestsControl = "inproc://navigator-control-requests"

    static let intentKind: UInt8 = 1
    static let requestKind: UInt8 = 2
    static let stop: [UInt8] = [0xFF]
}
