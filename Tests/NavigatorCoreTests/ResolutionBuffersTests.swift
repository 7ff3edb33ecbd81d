import Testing

@testable import NavigatorCore

/// A resolution built in arrays handed back from an earlier one (``ResolutionBuffers``) is the
/// resolution made without them, and reuses their room.
@Suite("Resolution buffers")
struct ResolutionBuffersTests {
    @Test(
        "resolving with handed-back arrays gives what resolving without them gives", arguments: [1, 2, 3] as [UInt64])
    func sameResolutions(seed: UInt64) {
        let resolver = try! Resolver(map: .demo)
        var generator = Generator(random: SeededRandom(seed: seed))
        var plain = resolver.initialState()
        var recycled = plain
        var buffers = ResolutionBuffers()
        var now: Int64 = 1_700_000_000_000_000_000
        var resolved = 0
        var released = 0
        var echoes = 0  // syncs that changed the tree
        for step in 0..<3_000 {
            now += 1_000_000
            if step % 4 == 3 {
                // The generator's events, and now and then a shell's own modal, a sync of a tree
                // whose modals went (echoed as a batch of commands) and a shell not ready.
                let event: ClientEvent
                switch step % 40 {
                case 7:
                    let number = UInt64(step) * 2
                    event = .presented(
                        Modal(
                            id: .client(number), style: .sheet,
                            stack: [Screen(id: .client(number + 1), ScreenContext("settings"))]))
                case 11: event = .sync((try? plain.tree.applying([.dismissTo(nil)])) ?? plain.tree)
                case 15: event = .suspended
                default: event = generator.event(for: plain.tree)
                }
                let expected = resolver.apply(event, to: &plain, now: now)
                var result = resolver.apply(event, to: &recycled, now: now, buffers: &buffers)
                #expect(result == expected, "seed \(seed), step \(step): \(event)")
                #expect(recycled == plain, "seed \(seed), step \(step)")
                released += result.released.count
                if case .sync = event, !result.echo.isEmpty { echoes += 1 }
                buffers.recycle(&result)
                #expect(result.echo.isEmpty && result.released.isEmpty)
                continue
            }
            var intent = generator.intent()
            intent.waitForReady = step % 9 == 0  // parked until a `ready`, then released
            let expected = resolver.resolve(intent, into: &plain, now: now)
            var resolution = resolver.resolve(intent, into: &recycled, now: now, buffers: &buffers)
            #expect(resolution == expected, "seed \(seed), step \(step): \(intent.target)")
            #expect(recycled == plain, "seed \(seed), step \(step)")
            if !resolution.commands.isEmpty { resolved += 1 }
            released += resolution.released.count
            buffers.recycle(&resolution)
            #expect(resolution.commands.isEmpty && resolution.explanation.isEmpty && resolution.released.isEmpty)
        }
        #expect(resolved > 500, "the mix resolved \(resolved) intents with commands; expected many")
        #expect(released > 20, "the mix released \(released) parked intents; expected some")
        #expect(echoes > 5, "the mix echoed \(echoes) syncs as commands; expected some")
    }

    @Test("the next resolution is written into the room of the one handed back")
    func reusesRoom() {
        let resolver = try! Resolver(map: .demo)
        var state = resolver.initialState()
        _ = resolver.apply(.conditions(["authenticated": true]), to: &state, now: 1)
        var buffers = ResolutionBuffers()
        func show(_ id: String, _ context: ScreenContext) -> Resolution {
            resolver.resolve(.show(context, id: id), into: &state, now: 2, buffers: &buffers)
        }
        var first = show("a", ScreenContext("chat", ["conversationId": "1"]))
        #expect(!first.commands.isEmpty)
        let commands = first.commands.withUnsafeBufferPointer { $0.baseAddress }
        let steps = first.explanation.withUnsafeBufferPointer { $0.baseAddress }
        buffers.recycle(&first)
        let second = show("b", ScreenContext("chat", ["conversationId": "2"]))
        #expect(!second.commands.isEmpty)
        #expect(second.commands.withUnsafeBufferPointer { $0.baseAddress } == commands)
        #expect(second.explanation.withUnsafeBufferPointer { $0.baseAddress } == steps)

        // An array the caller still holds is not emptied or written into: it stays as it was
        // (compared with a copy in an array of its own).
        var third = second
        let expected = second.commands.map { $0 }
        buffers.recycle(&third)
        let fourth = show("c", ScreenContext("settings"))
        #expect(!fourth.commands.isEmpty)
        #expect(second.commands == expected)
    }

    @Test("what is kept is bounded: arrays grown beyond the kept size go, and so do those beyond the kept number")
    func bounded() {
        var spares = SpareArrays<Int>()
        var large = Array(repeating: 7, count: ResolutionBuffers.largestKept + 1)
        spares.keep(&large)
        var none: [Int] = []
        spares.keep(&none)
        var small = [1, 2]  // room for two: a taker would have to grow it
        spares.keep(&small)
        #expect(spares.count == 0 && large.isEmpty && small.isEmpty)
        var addresses: [UnsafePointer<Int>?] = []
        for value in 0..<(ResolutionBuffers.keptPerKind + 2) {
            var array = [value, value, value, value]
            addresses.append(array.withUnsafeBufferPointer { $0.baseAddress })
            spares.keep(&array)
            #expect(array.isEmpty)
        }
        #expect(spares.count == ResolutionBuffers.keptPerKind)
        // Taken back last kept first, empty, with their room; then new ones.
        for index in (0..<ResolutionBuffers.keptPerKind).reversed() {
            let taken = spares.take()
            #expect(taken.isEmpty && taken.capacity >= 4)
            #expect(taken.withUnsafeBufferPointer { $0.baseAddress } == addresses[index])
        }
        let fresh = spares.take()
        #expect(fresh.isEmpty && fresh.capacity >= 4 && spares.count == 0)
    }
}
