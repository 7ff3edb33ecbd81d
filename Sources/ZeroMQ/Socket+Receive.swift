import CZeroMQ

extension Socket {
    /// Receives the next frame into `message` (reusing it), blocking until one arrives, the
    /// receive timeout expires (throws ``ZeroMQError/Code/wouldBlock``) or the context shuts down
    /// (throws ``ZeroMQError/Code/terminated``).
    @inlinable
    public func receive(into message: Message) throws(ZeroMQError) {
        let handle = self.handle
        _ = try ZMQ.call("zmq_msg_recv") { zmq_msg_recv(message.raw, handle, 0) }
    }

    /// Receives the next frame into `message` if one is waiting; returns `false` otherwise.
    @inlinable
    public func tryReceive(into message: Message) throws(ZeroMQError) -> Bool {
        let handle = self.handle
        return try ZMQ.callUnlessWouldBlock("zmq_msg_recv") { zmq_msg_recv(message.raw, handle, ZMQ_DONTWAIT) } != nil
    }

    /// Receives the next frame.
    public func receive() throws(ZeroMQError) -> Message {
        let message = Message()
        try receive(into: message)
        return message
    }

    /// Receives every frame of the next message. libzmq delivers multipart messages atomically,
    /// so once the first frame is here the rest are too.
    public func receiveMultipart() throws(ZeroMQError) -> [Message] {
        var frames = [try receive()]
        while frames[frames.count - 1].hasMore {
            frames.append(try receive())
        }
        return frames
    }

    /// Receives every frame of the next message if one is waiting; `nil` otherwise.
    public func tryReceiveMultipart() throws(ZeroMQError) -> [Message]? {
        let first = Message()
        guard try tryReceive(into: first) else { return nil }
        var frames = [first]
        while frames[frames.count - 1].hasMore {
            frames.append(try receive())
        }
        return frames
    }

    /// Receives the next whole message into `frames`, reusing the messages already there and
    /// appending new ones as needed, and returns how many frames it has (the rest of `frames` is
    /// left as it was). With `wait: false` it returns `nil` when no message is waiting. This is
    /// the allocation-free path for socket loops.
    ///
    /// At most `maxFrames` frames are kept: the rest of a longer message is received into one
    /// spare message (`frames[maxFrames]`) and dropped, so a peer sending millions of empty frames
    /// cannot grow `frames`. The count returned is the message's real frame count; only the
    /// first `min(count, maxFrames)` frames are the message's.
    @inlinable
    public func receiveMultipart(into frames: inout [Message], wait: Bool = true, maxFrames: Int = .max)
        throws(ZeroMQError) -> Int?
    {
        if frames.isEmpty { frames.append(Message()) }
        if wait {
            try receive(into: frames[0])
        } else if try !tryReceive(into: frames[0]) {
            return nil
        }
        var count = 1
        var last = 0
        while frames[last].hasMore {
            let slot = min(count, max(maxFrames, 1))
            if slot == frames.count { frames.append(Message()) }
            try receive(into: frames[slot])
            last = slot
            count += 1
        }
        return count
    }
}
