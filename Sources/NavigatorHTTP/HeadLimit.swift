import NIOCore
import NIOHTTP1

/// Bounds the bytes a connection may send before a request's head is complete: first in the
/// pipeline, it counts what arrives from the end of one request (or the connection's start) to
/// the head of the next, and past ``maxHeadBytes`` it hands the request decoder's own overflow
/// error on (answered 400 `MALFORMED` and the connection closed, as any unparseable request is)
/// and drops everything after.
///
/// The decoder's limits are on the URL and on each header field's name and value; the spaces
/// between a field's colon and its value are counted by neither, and the decoder keeps every
/// byte of a field until the field ends: one connection sending a field of endless spaces grew
/// the service by a gigabyte in seconds.
final class HeadLimit: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes of a request's head (the request line and every header field): 80 KiB.
    static let maxHeadBytes = 80 * 1024

    private var counting = true
    private var received = 0
    private var tripped = false

    /// A request's head was read: its body is bounded elsewhere.
    func headRead() { counting = false }

    /// A request ended: the next head is counted from here.
    func requestEnded() {
        counting = true
        received = 0
    }

    /// The connection is no longer HTTP/1 (a stream or a WebSocket): nothing more is counted.
    func stop() { counting = false }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !tripped else { return }
        if counting {
            received += unwrapInboundIn(data).readableBytes
            if received > Self.maxHeadBytes {
                tripped = true
                return context.fireErrorCaught(HTTPParserError.headerOverflow)
            }
        }
        context.fireChannelRead(data)
    }
}
