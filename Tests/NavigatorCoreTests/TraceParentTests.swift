import NavigatorCore
import Testing

@Suite("W3C traceparent")
struct TraceParentTests {
    static let example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("version 00, lowercase hex ids not all zero, 55 characters")
    func valid() {
        #expect(TraceParent.isValid(Self.example))
        #expect(TraceParent.traceID(Self.example) == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(TraceParent.isValid("00-00000000000000000000000000000001-0000000000000001-00"))
    }

    @Test(
        "anything else is not one",
        arguments: [
            "", "00", String(Self.example.dropLast()), Self.example + "0", Self.example.uppercased(),
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // another version
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero parent id
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ])
    func invalid(_ text: String) {
        #expect(!TraceParent.isValid(text))
        #expect(TraceParent.traceID(text) == nil)
    }
}
