import NavigatorCore
import NavigatorWire
import SwiftProtobuf

#if canImport(Glibc)
    import Glibc
#endif

/// One libFuzzer input: decode + resolve + apply. The input is a list of requests, each as a
/// 2-byte big-endian length and a protobuf `navigator.v1.Request`; intents are resolved and
/// client events applied (stale checks included) to one session, as a worker does. After each
/// step the tree must satisfy its invariant within the limits, a mirror applying the published
/// commands must equal the session's tree, and the state must survive the state file's encoding.
/// A broken promise stops the process (libFuzzer keeps the input).
enum ProtocolFuzz {
    static let resolver: Resolver = {
        var options = Resolver.Options()
        options.maxParked = 8
        options.maxConditions = 8
        options.limits = TreeLimits(maxModals: 4, maxStackDepth: 8, maxTabs: 6, maxInfoEntries: 4, maxTextBytes: 64)
        do {
            return try Resolver(map: .demo, options: options)
        } catch {
            fatalError("the demo map does not load: \(error)")
        }
    }()

    static func run(_ input: UnsafeRawBufferPointer) {
        var state = resolver.initialState()
        var mirror = state.tree
        var seq: UInt64 = 0
        var offset = 0
        var now: Int64 = 1_800_000_000_000_000_000
        while offset + 2 <= input.count {
            let length = Int(input[offset]) << 8 | Int(input[offset + 1])
            offset += 2
            let end = min(input.count, offset + length)
            let bytes = [UInt8](input[offset..<end])
            offset = end
            now += 1_000_000
            compareIntentReader(bytes)
            guard let request = try? Navigator_V1_Request(serializedBytes: bytes) else { continue }
            var commands: [[Command]] = []
            switch request.kind {
            case .intent(let wire), .explain(let wire):
                guard var intent = try? wire.core() else { continue }
                intent.session = "fuzz"
                let resolution = resolver.resolve(intent, into: &state, now: now)
                commands = [resolution.commands] + resolution.released.map(\.commands)
            case .clientEvent(let wire):
                guard let event = try? wire.core() else { continue }
                if resolver.staleness(
                    of: event, lastSeq: wire.lastSeq, epoch: wire.epoch, session: state, seq: seq, currentEpoch: 1)
                    != nil
                {
                    continue
                }
                let result = resolver.apply(
                    event, to: &state, now: now, authoritative: wire.lastSeq == 0 && wire.epoch == 0)
                if result.error == nil { commands = [result.echo] + result.released.map(\.commands) }
            default:
                _ = resolver.expire(&state, now: now + Int64(bytes.count) * 1_000_000_000)
            }
            for batch in commands where !batch.isEmpty {
                seq += 1
                do {
                    try mirror.apply(batch)
                } catch {
                    fatalError("a published batch does not apply to the mirror: \(error)")
                }
            }
            check(state, mirror)
        }
    }

    /// The bytes read as an intent by hand (``IntentReader``, as workers read them) and by
    /// SwiftProtobuf: the same intent, or refused by both.
    static func compareIntentReader(_ bytes: [UInt8]) {
        let expected: Intent?
        if let message = try? Navigator_V1_Intent(serializedBytes: bytes) {
            expected = try? message.core(session: "fuzz")
        } else {
            expected = nil
        }
        let got = try? bytes.withUnsafeBytes { try IntentReader.read($0, session: "fuzz").intent }
        if got != expected {
            fatalError("IntentReader read \(String(describing: got)); SwiftProtobuf \(String(describing: expected))")
        }
    }

    static func check(_ state: SessionState, _ mirror: ScreenTree) {
        do {
            let size = try state.tree.checkInvariant()
            if let (_, message) = size.excess(resolver.options.limits).first {
                fatalError("the tree is beyond a limit: \(message)")
            }
        } catch {
            fatalError("the tree breaks its invariant: \(error)\n\(state.tree.outline)")
        }
        guard mirror.root == state.tree.root, mirror.modals == state.tree.modals else {
            fatalError("the mirror differs from the session:\n\(mirror.outline)\n---\n\(state.tree.outline)")
        }
        do {
            let bytes: [UInt8] = try Navigator_V1_StoredSession(state, seq: 1).serializedBytes()
            guard try Navigator_V1_StoredSession(serializedBytes: bytes).core().state == state else {
                fatalError("the state does not survive the state file's encoding")
            }
        } catch {
            fatalError("the state does not encode or decode: \(error)")
        }
    }
}

#if LIBFUZZER
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// The entry point under libFuzzer (built with -sanitize=fuzzer -parse-as-library -DLIBFUZZER;
    /// see scripts/fuzz-libfuzzer.sh). SwiftPM links an executable's `main` to `navfuzz_main`, so
    /// that is the name given here; it hands libFuzzer's command line and the input callback to
    /// libFuzzer's driver.
    @_cdecl("navfuzz_main")
    func navfuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var argc = argc
        var argv = argv
        return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            ProtocolFuzz.run(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        }
    }
#else
    /// Without libFuzzer: replays the inputs named on the command line (a crash libFuzzer saved,
    /// say), so a failure can be debugged in a normal build.
    @main
    struct Replay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == "--seeds", arguments.count == 2 {
                writeSeeds(to: arguments[1])
                return
            }
            for path in arguments {
                guard let file = fopen(path, "rb") else {
                    print("navfuzz: cannot open \(path)")
                    exit(2)
                }
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while case let count = fread(&buffer, 1, buffer.count, file), count > 0 { bytes += buffer[..<count] }
                fclose(file)
                bytes.withUnsafeBytes { ProtocolFuzz.run($0) }
                print("navfuzz: \(path): \(bytes.count) bytes, every promise kept")
            }
        }

        /// Writes starting inputs for libFuzzer's corpus: intents and client events of the demo
        /// map in a few orders.
        static func writeSeeds(to directory: String) {
            func request(_ kind: Navigator_V1_Request.OneOf_Kind) -> [UInt8] {
                let bytes: [UInt8] = (try? Navigator_V1_Request.with { $0.kind = kind }.serializedBytes()) ?? []
                return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
            }
            func intent(_ id: String, _ path: [ScreenContext], priority: Intent.Priority = .normal) -> [UInt8] {
                request(.intent(.init(Intent(id: id, session: "fuzz", target: .path(path), priority: priority))))
            }
            func event(_ event: ClientEvent, lastSeq: UInt64 = 0) -> [UInt8] {
                request(.clientEvent(.init(event, session: "fuzz", lastSeq: lastSeq)))
            }
            let chat = ScreenContext("chat", ["conversationId": "4"])
            let call = ScreenContext("incomingCall", ["callId": "00000000-0000-4000-8000-000000000001"])
            let seeds: [[UInt8]] = [
                intent("a", [chat]),
                intent(
                    "a",
                    [
                        ScreenContext("chatList"), chat,
                        ScreenContext("thread", ["conversationId": "4", "threadId": "2"]),
                    ]),
                intent("a", [call]) + intent("b", [ScreenContext("settings")]) + event(.dismissedTo(nil), lastSeq: 1),
                intent("a", [ScreenContext("editProfile")]) + event(.conditions(["authenticated": true])),
                intent("a", [chat]) + event(.poppedTo(3), lastSeq: 1) + event(.tabSelected("home"), lastSeq: 1),
                event(.pushed(Screen(id: .client(1), ScreenContext("settings")), onto: .tab("home")))
                    + event(
                        .presented(
                            Modal(
                                id: .client(2), style: .sheet, stack: [Screen(id: .client(3), ScreenContext("login"))]))
                    ),
                event(.sync(RouteMap.demo.initialTree())) + event(.ready()) + intent("w", [chat]),
                intent("a", [call]) + intent("c", [chat], priority: .critical),
            ]
            for (index, seed) in seeds.enumerated() {
                let path = "\(directory)/seed-\(index)"
                guard let file = fopen(path, "wb") else {
                    print("navfuzz: cannot write \(path)")
                    exit(2)
                }
                _ = seed.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
                fclose(file)
            }
            print("navfuzz: wrote \(seeds.count) seeds to \(directory)")
        }
    }
#endif
