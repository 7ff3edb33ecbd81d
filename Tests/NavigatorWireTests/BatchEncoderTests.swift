import NavigatorCore
import NavigatorWire
import SwiftProtobuf
import TestThreads
import Testing

@Suite("The hand-written batch encoder")
struct BatchEncoderTests {
    /// Random batches, seeded: the same batches every run.
    struct Random {
        var source: SplitMix64
        init(state: UInt64) { source = SplitMix64(seed: state) }
        mutating func next() -> UInt64 { source.next() }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

        /// Empty, short, multi-byte, and sometimes long enough to need a 2- or 3-byte length.
        mutating func text() -> String {
            switch below(200) {
            case 0..<20: return ""
            case 20..<30: return String(repeating: "é", count: 70 + below(300))
            case 30..<40: return "Grüße 👋 \(below(1000))"
            case 40: return String(repeating: "x", count: 9_000 + below(10_000))
            default: return "t\(below(100_000))"
            }
        }
        mutating func id() -> NodeID {
            NodeID(rawValue: chance(5) ? 0 : (chance(10) ? UInt64.max - UInt64(below(9)) : UInt64(below(100_000))))
        }
        mutating func info() -> [String: String] {
            var info: [String: String] = [:]
            for _ in 0..<below(5) { info[text()] = text() }
            return info
        }
        mutating func screen() -> Screen { Screen(id: id(), ScreenContext(text(), info())) }
        mutating func screens() -> [Screen] { (0..<below(4)).map { _ in screen() } }
        mutating func stackRef() -> StackRef {
            switch below(3) {
            case 0: .tab(text())
            case 1: .modal(id())
            default: .root
            }
        }
        mutating func modal() -> Modal {
            Modal(
                id: id(), style: PresentationStyle.allCases[below(PresentationStyle.allCases.count)], stack: screens())
        }
        mutating func root() -> Root {
            if chance(50) { return .stack(screens()) }
            return .tabs(
                TabBar(tabs: (0..<below(4)).map { _ in Tab(name: text(), stack: screens()) }, selected: text()))
        }
        mutating func command() -> Command {
            switch below(9) {
            case 0: .selectTab(text())
            case 1: .push(screen(), onto: stackRef())
            case 2: .present(modal())
            case 3: .popTo(id())
            case 4: .popToRoot(stackRef())
            case 5: .dismissTo(chance(30) ? nil : id())
            case 6: .setRoot(root())
            case 7: .replace(id(), with: screen())
            default: .refresh(id(), info: info())
            }
        }
        /// Text, or a resolution's step written straight into the bytes: short, long (a length
        /// of two or three bytes), with contexts, references and numbers.
        mutating func summary() -> Batch.Summary {
            switch below(40) {
            case 0..<13: .text(text())
            case 39: .step(ExplanationStep(.path, "\(String(repeating: "z", count: 16_300 + below(200)))"))
            case 13..<26:
                .step(
                    ExplanationStep(
                        .transition,
                        "pushing \(ScreenContext(text(), info())) onto \(stackRef()), \(below(1_000)) \(text())",
                        decisive: chance(50)))
            default: .step(ExplanationStep(.validate, "\(text())"))
            }
        }

        mutating func batch() -> Batch {
            Batch(
                session: text(), seq: chance(10) ? 0 : next() >> UInt64(below(64)), intentID: text(),
                animated: chance(50),
                commands: (0..<below(6)).map { _ in command() }, treeVersion: next() >> UInt64(below(64)),
                summary: summary(), cause: Navigator_V1_BatchCause(rawValue: below(5)) ?? .intent,
                epoch: chance(10) ? 0 : next())
        }
    }

    @Test("writes exactly SwiftProtobuf's bytes (deterministic ordering) for 3,000 random batches")
    func sameBytes() async throws {
        try await offPool {
            var random = Random(state: 16)
            var options = BinaryEncodingOptions()
            options.useDeterministicOrdering = true
            var longest = 0
            var steps = 0
            var longSteps = 0  // a length of two bytes at least
            var longestStep = 0
            var reused: [UInt8] = []
            for index in 0..<3_000 {
                let batch = random.batch()
                let expected: [UInt8] = try batch.message.serializedBytes(options: options)
                let written = batch.encoded()
                if case .step(let step) = batch.summarySource {
                    steps += 1
                    longestStep = max(longestStep, step.summary.utf8.count)
                    if step.summary.utf8.count >= 128 { longSteps += 1 }
                }
                longest = max(longest, written.count)
                if written != expected {
                    Issue.record(
                        "batch \(index) differs: \(written.count) bytes written, \(expected.count) expected: \(batch)")
                    return
                }
                // And it reads back as the same batch.
                #expect(try Navigator_V1_CommandBatch(serializedBytes: written) == batch.message)
                // Encoded into the array the last batch was (as a publisher does): nothing of
                // the longer batches before it is left.
                batch.encode(into: &reused)
                if reused != expected {
                    Issue.record("batch \(index) encoded into a used array differs: \(reused.count) bytes")
                    return
                }
            }
            #expect(longest > 16_384, "no batch needed a 3-byte length")
            #expect(steps > 1_000, "few summaries were written from their step")
            #expect(longSteps > 10 && longestStep > 16_384, "no step's summary needed a 2- and a 3-byte length")
        }
    }

    @Test("the demo's first batch, byte for byte")
    func known() {
        let batch = Batch(
            session: "s", seq: 1, intentID: "i", animated: true,
            commands: [
                .selectTab("chats"),
                .push(Screen(id: 2, ScreenContext("chat", ["conversationId": "42"])), onto: .tab("chats")),
            ],
            treeVersion: 3, summary: "", cause: .intent, epoch: 0)
        let expected: [UInt8] =
            [0x0A, 1, 0x73, 0x10, 1, 0x1A, 1, 0x69, 0x20, 1]
            + [0x2A, 9, 0x0A, 7, 0x0A, 5] + Array("chats".utf8)
            + [0x2A, 45, 0x12, 43, 0x0A, 7, 0x0A, 5] + Array("chats".utf8)
            + [0x12, 32, 0x08, 2, 0x12, 28, 0x0A, 4] + Array("chat".utf8)
            + [0x12, 20, 0x0A, 14] + Array("conversationId".utf8) + [0x12, 2] + Array("42".utf8)
            + [0x30, 3, 0x40, 1]
        #expect(batch.encoded() == expected)
    }
}
