import CZeroMQ

/// The socket types of libzmq's stable API.
public enum SocketType: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case pair, pub, sub, xpub, xsub, push, pull, router, dealer, req, rep

    @usableFromInline var rawValue: Int32 {
        switch self {
        case .pair: ZMQ_PAIR
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .xpub: ZMQ_XPUB
        case .xsub: ZMQ_XSUB
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .router: ZMQ_ROUTER
        case .dealer: ZMQ_DEALER
        case .req: ZMQ_REQ
        case .rep: ZMQ_REP
        }
    }

    public var description: String {
        switch self {
        case .pair: "PAIR"
        case .pub: "PUB"
        case .sub: "SUB"
        case .xpub: "XPUB"
        case .xsub: "XSUB"
        case .push: "PUSH"
        case .pull: "PULL"
        case .router: "ROUTER"
        case .dealer: "DEALER"
        case .req: "REQ"
        case .rep: "REP"
        }
    }
}
