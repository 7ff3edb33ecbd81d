import NavigatorWire
import Testing

@Suite("Header frame")
struct FrameHeaderTests {
    @Test("layout is exactly as documented: 36 bytes, big-endian")
    func layout() throws {
        let header = FrameHeader(
            kind: .batch, flags: .animated, seq: 0x0102_0304_0506_0708,
            sentAt: 0x1112_1314_1516_1718, publishedAt: -2, epoch: 0x2122_2324_2526_2728)
        #expect(
            header.bytes == [
                2, 1, 0, 1,
                1, 2, 3, 4, 5, 6, 7, 8,
                0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
                0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,
            ])
        #expect(try FrameHeader(decoding: header.bytes) == header)
    }

    @Test("round trip for every kind", arguments: FrameHeader.Kind.allCases)
    func roundTrip(kind: FrameHeader.Kind) throws {
        let header = FrameHeader(
            kind: kind, seq: 42, sentAt: 1_700_000_000_000_000_000, publishedAt: 1_700_000_000_000_500_000,
            epoch: .max)
        #expect(try FrameHeader(decoding: header.bytes) == header)
    }

    @Test("unknown flag bits are ignored, as the protocol requires")
    func unknownFlags() throws {
        var bytes = FrameHeader(kind: .batch, seq: 1, sentAt: 0, publishedAt: 0, epoch: 1).bytes
        bytes[2] = 0x80
        bytes[3] = 0x01
        let header = try FrameHeader(decoding: bytes)
        #expect(header.flags.contains(.animated))
        #expect(header.seq == 1)
    }

    @Test(
        "malformed headers are refused with a message that says what was expected",
        arguments: [
            ([UInt8](repeating: 0, count: 35), "has 35 bytes; expected 36"),
            ([UInt8](repeating: 0, count: 28), "has 28 bytes; expected 36"),
            ([1, 1] + [UInt8](repeating: 0, count: 34), "version 1 is not supported; expected 2"),
            ([2, 9] + [UInt8](repeating: 0, count: 34), "kind 9 is unknown"),
        ])
    func malformed(bytes: [UInt8], expected: String) {
        #expect {
            _ = try FrameHeader(decoding: bytes)
        } throws: { error in
            guard let error = error as? WireError else { return false }
            return error.code == .badHeader && error.message.contains(expected)
        }
    }
}

@Suite("Topics and session ids")
struct TopicTests {
    @Test("topics are prefix, session, terminator")
    func topics() {
        #expect(Topic.batches("42") == "s/42/")
        #expect(Topic.rejections("42") == "r/42/")
        #expect(Topic.audit("user:7") == "a/user:7/")
        #expect(Topic.batches("421").hasPrefix(Topic.batches("42")) == false)
        #expect(Topic.batches("42").hasPrefix(Topic.allBatches))
    }

    @Test("parse inverts the topic builders")
    func parse() {
        #expect(Topic.parse("s/42/")?.session == "42")
        #expect(Topic.parse("s/42/")?.kind == .batch)
        #expect(Topic.parse("r//")?.session == "")
        #expect(Topic.parse("a/x/")?.kind == .audit)
        #expect(Topic.parse("s/42") == nil)
        #expect(Topic.parse("q/42/") == nil)
        #expect(Topic.parse("s/a/b/") == nil)
    }

    @Test(
        "session id rules",
        arguments: [
            ("s1", nil),
            ("user:42@eu-west", nil),
            ("", "is empty"),
            (String(repeating: "x", count: 129), "has 129 bytes; expected at most 128"),
            ("a/b", "contains \"/\""),
            ("tab\there", "control character"),
            ("del\u{7F}", "control character"),
            ("next-line\u{85}", "control character"),
            ("café-\u{A0}-\u{9F00}", nil),
        ] as [(String, String?)])
    func sessionRules(session: String, problem: String?) {
        let found = SessionID.problem(with: session)
        // The byte scan agrees with the Unicode general category it stands for.
        let control = session.unicodeScalars.contains { $0.properties.generalCategory == .control }
        #expect((found?.contains("control character") == true) == control)
        if let problem {
            #expect(found?.contains(problem) == true, "\(found ?? "nil")")
        } else {
            #expect(found == nil)
        }
    }

    @Test("a session frame must be UTF-8")
    func sessionFrame() throws {
        let invalid: [UInt8] = [0xFF, 0xFE]
        #expect(throws: WireError.self) { try invalid.withUnsafeBytes { try SessionID.decode($0) } }
        let valid = Array("s-1".utf8)
        #expect(try valid.withUnsafeBytes { try SessionID.decode($0) } == "s-1")
    }
}
