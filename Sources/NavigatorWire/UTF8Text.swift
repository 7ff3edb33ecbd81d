extension String {
    /// The bytes as a string if they are UTF-8, else nil — what `String(validating:as:)` says,
    /// without its cost for the common case: bytes that are all ASCII (ids, screen names, info
    /// keys) are checked eight at a time and taken as they are. The generic validation asks the
    /// runtime for type metadata on every call (BENCHMARKS.md, "A worker's own work").
    init?(wireUTF8 bytes: UnsafeRawBufferPointer) {
        if Self.isASCII(bytes) {
            self = bytes.withMemoryRebound(to: UInt8.self) { String(decoding: $0, as: UTF8.self) }
        } else {
            guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
            self = text
        }
    }

    /// Whether every byte is below 0x80.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var offset = 0
        var high: UInt64 = 0
        while offset + 8 <= count {
            high |= bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < count {
            high |= UInt64(bytes[offset])
            offset += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}
