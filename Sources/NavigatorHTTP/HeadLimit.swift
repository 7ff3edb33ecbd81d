import NIOCore
import NIOHTTP1

/// Bounds the bytes the request decoder may hold without making anything of them: first in the
/// pipeline, it counts what arrives since the decoder last produced a part (a head, a piece of
/// body, an end) or since the connection began, and past ``maxHeadBytes`` it hands the decoder's
/// own overflow error on (answered 400 `MALFORMED` and the connection closed, as any
/// unparseable request is) and drops everything after. Taken out with the decoder when the
/// connection becomes a stream.
///
/// The decoder's limits are on the URL and on each header field's name and value; the spaces
/// between a field's colon and its value are counted by neither, and the decoder keeps every
/// byte of a field until the field ends — in a head, and in a chunked body's trailers alike: a
/// connection sending a field of endless spaces grew the service without bound.
final class HeadLimit: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The most bytes the decoder may hold before it makes a part of them: a request's head
    /// (its request line and every header field), a chunk's line, a body's trailers: 80 KiB.
    static let maxHeadBytes = 80 * 1024

    private var received = 0
    private var tripped = false

    /// The decoder produced a part: what it held is accounted for.
    func partRead() { received = 0 }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !tripped else { return }
        received += unwrapInboundIn(data).readableBytes
        guard received <= Self.maxHeadBytes else {
            tripped = true
            return context.fireErrorCaught(HTTPParserError.headerOverflow)
        }
        context.fireChannelRead(data)
    }
}
