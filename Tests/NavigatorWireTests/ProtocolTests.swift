import NavigatorWire
import SwiftProtobuf
import Testing

@Suite("Protocol messages")
struct ProtocolTests {
    @Test("an acknowledged intent request survives encoding")
    func requestRoundTrip() throws {
        var intent = Navigator_V1_Intent()
        intent.id = "push-1"
        intent.session = "s1"
        intent.path = [
            .with { $0.screen = "chatList" },
            .with {
                $0.screen = "chat"
                $0.info = ["conversationId": "42"]
            },
        ]
        intent.priority = .critical
        intent.ttlMs = 30_000
        intent.sentAtUnixNanos = 1_700_000_000_000_000_000
        #expect(!intent.hasAnimated)
        var request = Navigator_V1_Request()
        request.requestID = "r-1"
        request.intent = intent

        let bytes: [UInt8] = try request.serializedBytes()
        let decoded = try Navigator_V1_Request(serializedBytes: bytes)
        #expect(decoded == request)
        guard case .intent(let back) = decoded.kind else {
            Issue.record("kind lost: \(String(describing: decoded.kind))")
            return
        }
        #expect(back.path[1].info["conversationId"] == "42")
    }

    @Test("a command batch with every command kind survives encoding")
    func batchRoundTrip() throws {
        let screen = Navigator_V1_Screen.with {
            $0.id = 7
            $0.context = .with { $0.screen = "chat" }
        }
        let modal = Navigator_V1_Modal.with {
            $0.id = 9
            $0.style = .fullScreen
            $0.stack = [screen]
        }
        let commands: [Navigator_V1_Command] = [
            .with { $0.selectTab = .with { $0.tab = "chats" } },
            .with {
                $0.push = .with {
                    $0.stack = .with { $0.tab = "chats" }
                    $0.screen = screen
                }
            },
            .with { $0.present = .with { $0.modal = modal } },
            .with { $0.popTo = .with { $0.screenID = 7 } },
            .with { $0.popToRoot = .with { $0.stack = .with { $0.modal = 9 } } },
            .with { $0.dismissTo = .with { $0.modalID = 0 } },
            .with { $0.setRoot = .with { $0.root = .with { $0.stack = .with { $0.stack = [screen] } } } },
            .with {
                $0.replace = .with {
                    $0.screenID = 7
                    $0.screen = screen
                }
            },
            .with {
                $0.refresh = .with {
                    $0.screenID = 7
                    $0.info = ["draft": "hi"]
                }
            },
        ]
        let batch = Navigator_V1_CommandBatch.with {
            $0.session = "s1"
            $0.seq = 3
            $0.commands = commands
            $0.cause = .intent
        }
        let decoded = try Navigator_V1_CommandBatch(serializedBytes: try batch.serializedBytes() as [UInt8])
        #expect(decoded == batch)
        #expect(decoded.commands.count == 9)
    }

    @Test("garbage is refused by the decoder, not crashed on")
    func garbage() {
        let garbage: [UInt8] = [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]
        #expect(throws: (any Error).self) { try Navigator_V1_Intent(serializedBytes: garbage) }
    }
}
