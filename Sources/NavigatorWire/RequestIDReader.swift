/// The `request_id` of `navigator.v1.Request` bytes, read without decoding the rest: for a
/// request refused before it is decoded (larger than `maxMessageBytes`), so that its reply still
/// names it — a client pipelining requests, or the instance that forwarded it, can then tell
/// which request it answers.
public enum RequestIDReader {
    /// The id (the last one, as a decoder would take it), or nil when the bytes are not a
    /// well-formed message to their end or the id is not 1 to 128 bytes of UTF-8.
    public static func requestID(in bytes: UnsafeRawBufferPointer) -> String? {
        // SwiftProtobuf's depth limit, as IntentReader's: groups skipped cannot nest deeper.
        var reader = ProtoReader(bytes, depthLeft: 99)
        var id: String?
        do {
            while let (field, wire) = try reader.tag() {
                if field == 1, wire == .lengthDelimited {
                    id = try reader.string()
                } else {
                    try reader.skip(wire, field: field)
                }
            }
        } catch {
            return nil
        }
        guard let id, !id.isEmpty, id.utf8.count <= 128 else { return nil }
        return id
    }
}
