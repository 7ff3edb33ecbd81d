import CZeroMQ

/// One frame owned by libzmq (`zmq_msg_t`).
///
/// Receiving into a `Message` copies nothing: the bytes stay in libzmq's buffer and are read in
/// place with ``withUnsafeBytes(_:)``; ``bytes`` makes the one copy a Swift array needs. A message
/// can be reused for many receives, which saves an allocation per frame in a socket loop. It is
/// released in `deinit`.
///
/// The `zmq_msg_t` lives at a fixed heap address: libzmq keeps small frames inside the struct
/// itself, so it must never be copied bitwise.
public final class Message {
    @usableFromInline let raw: UnsafeMutablePointer<zmq_msg_t>

    /// An empty message, ready to receive into.
    public init() {
        raw = .allocate(capacity: 1)
        zmq_msg_init(raw)  // cannot fail
    }

    /// A message holding a copy of `bytes`, ready to send.
    public convenience init(copying bytes: some FrameBytes) throws(ZeroMQError) {
        self.init()
        try fill(copying: bytes)
    }

    /// Makes the message hold a copy of `bytes` in place of what it held. A sent message holds
    /// nothing (libzmq empties it), so a sender can fill the same message again instead of
    /// making a new one for every frame. On failure the message is left empty.
    public func refill(copying bytes: some FrameBytes) throws(ZeroMQError) {
        zmq_msg_close(raw)  // releases what it held: nothing once sent
        zmq_msg_init(raw)
        try fill(copying: bytes)
    }

    /// The generic `refill(copying:)` for an array, in code that is not generic: a sender
    /// fills frames from arrays and strings for every message, and the generic form, not
    /// specialized across modules, asked the runtime for type metadata each time.
    public func refill(copying bytes: [UInt8]) throws(ZeroMQError) {
        zmq_msg_close(raw)
        zmq_msg_init(raw)
        if let error = bytes.withUnsafeBytes({ fill(reporting: $0) }) { throw error }
    }

    /// The generic `refill(copying:)` for a string's UTF-8 bytes, in code that is not generic.
    public func refill(copying text: String) throws(ZeroMQError) {
        zmq_msg_close(raw)
        zmq_msg_init(raw)
        var text = text
        if let error = text.withUTF8({ fill(reporting: UnsafeRawBufferPointer($0)) }) { throw error }
    }

    /// Makes the message hold `other`'s content in place of what it held, without copying it
    /// (`zmq_msg_move`, which releases what this one held); `other` is left empty.
    public func refill(moving other: Message) {
        zmq_msg_move(raw, other.raw)  // fails only for invalid messages, which a Message never holds
    }

    /// Copies `bytes` into the message, which is empty (``fill(_:)``).
    private func fill(copying bytes: some FrameBytes) throws(ZeroMQError) {
        try bytes.withFrameBytes { (buffer) throws(ZeroMQError) in try fill(buffer) }
    }

    /// Copies `buffer` into the message, which is empty. A failed `zmq_msg_init_size` (ENOMEM)
    /// leaves the struct half made, which `zmq_msg_close` would read: it is made empty again.
    private func fill(_ buffer: UnsafeRawBufferPointer) throws(ZeroMQError) {
        let raw = self.raw
        do throws(ZeroMQError) {
            _ = try ZMQ.call("zmq_msg_init_size") { zmq_msg_init_size(raw, buffer.count) }
        } catch {
            zmq_msg_init(raw)
            throw error
        }
        if let base = buffer.baseAddress, buffer.count > 0 {
            zmq_msg_data(raw).copyMemory(from: base, byteCount: buffer.count)
        }
    }

    /// ``fill(_:)``'s error returned, not thrown: from inside the standard library's
    /// `withUnsafeBytes`, whose error is untyped.
    private func fill(reporting buffer: UnsafeRawBufferPointer) -> ZeroMQError? {
        do throws(ZeroMQError) {
            try fill(buffer)
            return nil
        } catch {
            return error
        }
    }

    /// Takes over `other`'s content without copying it (`zmq_msg_move`); `other` is left empty.
    public convenience init(moving other: Message) {
        self.init()
        zmq_msg_move(raw, other.raw)  // fails only for invalid messages, which a Message never holds
    }

    deinit {
        zmq_msg_close(raw)
        raw.deallocate()
    }

    /// The frame's size in bytes.
    public var count: Int { zmq_msg_size(raw) }

    /// Whether more frames of the same multipart message follow this one.
    public var hasMore: Bool { zmq_msg_more(raw) != 0 }

    /// A metadata property of a received message (`zmq_msg_gets`), such as `"Peer-Address"` (the
    /// peer's IP address on tcp) or `"User-Id"`; nil when the message has no such property.
    public func property(_ name: String) -> String? {
        guard let value = zmq_msg_gets(raw, name) else { return nil }
        return String(cString: value)
    }

    /// The file descriptor of the TCP or IPC connection the message came in on (ZMQ_SRCFD);
    /// nil for inproc peers and for messages libzmq made itself (such as the unsubscriptions an
    /// XPUB passes up when a peer goes away).
    public var sourceDescriptor: Int32? {
        let descriptor = zmq_msg_get(raw, ZMQ_SRCFD)
        return descriptor >= 0 ? descriptor : nil
    }

    /// Reads the bytes in place, without copying. The buffer is valid only inside `body`.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let count = zmq_msg_size(raw)
        guard count > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: zmq_msg_data(raw), count: count))
    }

    /// A copy of the bytes.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// The bytes decoded as UTF-8 (invalid sequences are replaced).
    public var string: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    /// Whether the frame holds exactly these bytes (no copy).
    public func hasContents(_ other: some FrameBytes) -> Bool {
        withUnsafeBytes { mine in other.withFrameBytes { theirs in mine.elementsEqual(theirs) } }
    }
}

/// Anything whose bytes can be handed to libzmq as one frame.
public protocol FrameBytes {
    /// Calls `body` with the frame's bytes, valid only during the call.
    func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R
}

extension Array: FrameBytes where Element == UInt8 {
    @inlinable
    public func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { buffer in
            do throws(E) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension ArraySlice: FrameBytes where Element == UInt8 {
    @inlinable
    public func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { buffer in
            do throws(E) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension String: FrameBytes {
    /// The UTF-8 bytes, without a terminating NUL.
    @inlinable
    public func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var copy = self
        let result: Result<R, E> = copy.withUTF8 { utf8 in
            do throws(E) { return .success(try body(UnsafeRawBufferPointer(utf8))) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension UnsafeRawBufferPointer: FrameBytes {
    @inlinable
    public func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(self)
    }
}

extension Message: FrameBytes {
    @inlinable
    public func withFrameBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes(body)
    }
}

/// Messages a sender has sent, kept to be filled again (libzmq empties a message it sends): a
/// sender that takes every frame from here makes no new message once it has as many as it
/// sends at a time. One sender's, like its socket.
public struct SpareMessages {
    private var spare: [Message] = []

    public init() {}

    /// A message holding a copy of `bytes`: a spare one refilled, or a new one.
    public mutating func message(copying bytes: some FrameBytes) throws(ZeroMQError) -> Message {
        guard let message = spare.popLast() else { return try Message(copying: bytes) }
        try message.refill(copying: bytes)
        return message
    }

    /// The generic `message(copying:)` for an array, in code that is not generic (see
    /// `Message.refill(copying:)`).
    public mutating func message(copying bytes: [UInt8]) throws(ZeroMQError) -> Message {
        let message = spare.popLast() ?? Message()
        try message.refill(copying: bytes)
        return message
    }

    /// The generic `message(copying:)` for a string, in code that is not generic.
    public mutating func message(copying text: String) throws(ZeroMQError) -> Message {
        let message = spare.popLast() ?? Message()
        try message.refill(copying: text)
        return message
    }

    /// A message holding `other`'s content (`other` left empty): a spare one, or a new one.
    public mutating func message(moving other: Message) -> Message {
        guard let message = spare.popLast() else { return Message(moving: other) }
        message.refill(moving: other)
        return message
    }

    /// Takes back messages given to a send: sent, they are empty; one a failed send kept still
    /// holds its content until it is refilled.
    public mutating func keep(_ messages: [Message]) { spare.append(contentsOf: messages) }
}
