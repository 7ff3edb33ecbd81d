import NIOCore

/// Ends a connection so that its client reads what was written to it. Closing a socket whose
/// client is still sending (a request body, the rest of a request refused at its head) makes the
/// kernel answer with a reset, and a reset throws away what the client had not read yet — the
/// very answer that says why. So: what was written goes out, then the sending side is shut
/// (FIN); whatever the client still sends is read and dropped; the connection closes once the
/// client closes its side, or after ``patience`` at most.
final class LingeringClose: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    static let patience = TimeAmount.seconds(2)
    private var timer: Scheduled<Void>?

    /// Lingers `channel` once `written` (the last answer) is out; at once if nil.
    static func start(_ channel: any Channel, after written: EventLoopFuture<Void>? = nil) {
        let begin: @Sendable () -> Void = {
            guard channel.isActive else { return }
            // First in the pipeline: nothing of what the client sends reaches HTTP/1 again.
            do {
                try channel.pipeline.syncOperations.addHandler(LingeringClose(), position: .first)
                channel.close(mode: .output, promise: nil)
            } catch {
                channel.close(promise: nil)
            }
        }
        if let written { written.whenComplete { _ in begin() } } else { channel.eventLoop.execute(begin) }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: Self.patience) { channel.close(promise: nil) }
        channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}  // dropped

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if (event as? ChannelEvent) == .inputClosed { context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) { timer?.cancel() }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

/// Cuts off a stream whose client reads nothing: armed when its connection stops taking writes,
/// disarmed when it takes them again; if it stays full for the timeout, the connection closes
/// (the events waiting for it were held in bounded memory meanwhile, but the connection itself
/// is a slot another client could use).
struct StalledReader {
    private var timer: Scheduled<Void>?

    mutating func update(_ context: ChannelHandlerContext, timeout: TimeAmount) {
        if context.channel.isWritable {
            timer?.cancel()
            timer = nil
        } else if timer == nil {
            let channel = context.channel
            timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
    }

    mutating func cancel() {
        timer?.cancel()
        timer = nil
    }
}
