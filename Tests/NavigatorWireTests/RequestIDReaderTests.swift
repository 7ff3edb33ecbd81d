import NavigatorWire
import SwiftProtobuf
import Testing

@Suite("A request's id read without decoding the rest")
struct RequestIDReaderTests {
    static func id(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBytes { RequestIDReader.requestID(in: $0) } }

    @Test(
        "as a decoder reads it: the last id, fields of any kind around it; nil for what is not a message or not an id")
    func reads() throws {
        let request =
            try Navigator_V1_Request.with {
                $0.requestID = "r-1"
                $0.stats = .init()
            }.serializedBytes() as [UInt8]
        #expect(Self.id(request) == "r-1")
        // An unknown varint field (99) and a fixed32 (98) before it; a second id after it wins.
        let unknown: [UInt8] = [0x98, 0x06, 0x2A, 0x95, 0x06, 1, 2, 3, 4]
        let again = try Navigator_V1_Request.with { $0.requestID = "r-2" }.serializedBytes() as [UInt8]
        #expect(Self.id(unknown + request + again) == "r-2")
        let decoded = try Navigator_V1_Request(serializedBytes: unknown + request + again)
        #expect(decoded.requestID == "r-2")
        // Not ids: empty, over 128 bytes, not UTF-8; not messages: cut short, zeros, a bad tag.
        let noID = try Navigator_V1_Request.with { $0.stats = .init() }.serializedBytes() as [UInt8]
        #expect(Self.id(noID) == nil)
        let long =
            try Navigator_V1_Request.with { $0.requestID = String(repeating: "x", count: 129) }.serializedBytes()
            as [UInt8]
        #expect(Self.id(long) == nil)
        #expect(Self.id([0x0A, 2, 0xFF, 0xFE]) == nil)
        #expect(Self.id(Array(request.dropLast())) == nil)
        #expect(Self.id([UInt8](repeating: 0, count: 100)) == nil)
        #expect(Self.id([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) == nil)
        #expect(Self.id([]) == nil)
    }
}
