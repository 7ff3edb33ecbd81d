import CZeroMQ

extension Socket {
    /// Sends one frame, blocking while the socket is at its high-water mark (or until its send
    /// timeout, which throws ``ZeroMQError/Code/wouldBlock``). The bytes are copied once, into
    /// libzmq's message. Set `more` on every frame of a multipart message but the last.
    @inlinable
    public func send(_ frame: some FrameBytes, more: Bool = false) throws(ZeroMQError) {
        let handle = self.handle
        let flags: Int32 = more ? ZMQ_SNDMORE : 0
        try frame.withFrameBytes { (buffer) throws(ZeroMQError) in
            _ = try ZMQ.call("zmq_send") { zmq_send(handle, buffer.baseAddress, buffer.count, flags) }
        }
    }

    /// Sends one frame without blocking. Returns `false`, having sent nothing, when the socket is
    /// at its high-water mark (PUSH, DEALER) or has no peer to route to.
    @inlinable
    public func trySend(_ frame: some FrameBytes, more: Bool = false) throws(ZeroMQError) -> Bool {
        let handle = self.handle
        let flags: Int32 = ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)
        return try frame.withFrameBytes { (buffer) throws(ZeroMQError) in
            try ZMQ.callUnlessWouldBlock("zmq_send") { zmq_send(handle, buffer.baseAddress, buffer.count, flags) }
                != nil
        }
    }

    /// Sends a received (or prepared) message without copying its bytes. Afterwards `message` is
    /// empty and may be reused for receiving.
    @inlinable
    public func send(_ message: Message, more: Bool = false) throws(ZeroMQError) {
        let handle = self.handle
        let flags: Int32 = more ? ZMQ_SNDMORE : 0
        _ = try ZMQ.call("zmq_msg_send") { zmq_msg_send(message.raw, handle, flags) }
    }

    /// Sends all `frames` as one multipart message, blocking at the high-water mark.
    public func send(multipart frames: [any FrameBytes]) throws(ZeroMQError) {
        precondition(!frames.isEmpty, "a ZeroMQ message has at least one frame")
        for (index, frame) in frames.enumerated() {
            try send(frame, more: index < frames.count - 1)
        }
    }

    /// Sends all `frames` as one multipart message unless the first frame would block, in which
    /// case nothing is sent and the result is `false`. libzmq accepts the remaining frames of a
    /// message whose first frame it accepted, so a multipart message is never sent in part.
    public func trySend(multipart frames: [any FrameBytes]) throws(ZeroMQError) -> Bool {
        precondition(!frames.isEmpty, "a ZeroMQ message has at least one frame")
        guard try trySend(frames[0], more: frames.count > 1) else { return false }
        for index in frames.indices.dropFirst() {
            try send(frames[index], more: index < frames.count - 1)
        }
        return true
    }
}
