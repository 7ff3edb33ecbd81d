import ArgumentParser
import NavigatorClient
import NavigatorCore
import NavigatorWire

struct Shell: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "An interactive client shell: mirrors a session like an app would, and lets you go back, dismiss and switch tabs.",
        discussion: """
            Keys: b, Backspace or Left = back; d or Esc = dismiss the top modal; 1-9 = select a tab; \
            r = resync from a snapshot; q or Ctrl-C = quit. Each batch is applied to the shell's own \
            tree and acknowledged; each key is applied locally and reported as a client event. Every \
            few seconds the tree is compared with a fresh snapshot and a warning shows if they differ. \
            Once it shows its first tree the shell reports Ready (intents sent with --wait-for-ready \
            go then), and Suspended when it quits.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var target: SessionOption

    enum Input: Sendable {
        case key(Key)
        case event(SessionEvent)
        case tick
        case ended(String)
    }

    func run() async throws {
        let session = try target.id
        try await withConnection(connection) { client in
            let terminal = Terminal()
            defer { terminal.restore() }
            var model = ShellModel(session: session)
            var connected = "connecting"
            var behind = 0  // checks in a row that found this shell behind the service
            let (inputs, continuation) = AsyncStream<Input>.makeStream()
            KeyReader.start { continuation.yield(.key($0)) }
            let follower = Task { [session] in
                do {
                    for try await event in client.follow(.session(session)) { continuation.yield(.event(event)) }
                    continuation.yield(.ended("the connection closed"))
                } catch {
                    continuation.yield(.ended("\(error)"))
                }
            }
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(3))
                    continuation.yield(.tick)
                }
            }
            defer {
                follower.cancel()
                ticker.cancel()
            }

            func resync() async {
                do {
                    let snapshot = try await client.snapshot(session)
                    _ = model.handle(
                        .snapshot(
                            session: session, seq: snapshot.seq, epoch: snapshot.epoch, tree: try snapshot.tree.core()))
                    connected = "connected"
                } catch {
                    connected = "not responding"
                    model.note("resync failed: \(error)")
                }
            }

            func act(_ action: ShellModel.Action?) async {
                switch action {
                case .report(let event): await report(event)
                case .resync: await resync()
                case nil: break
                }
            }

            func report(_ event: ClientEvent?) async {
                guard let event else { return }
                do {
                    _ = try await client.report(event, session: session, lastSeq: model.seq, epoch: model.epoch)
                    connected = "connected"
                } catch let error as ClientError where error.rejectCode == .staleEvent {
                    // A batch changed the tree before the service saw this change: show its tree.
                    model.note("the service's tree changed before \(event) reached it; resyncing")
                    await resync()
                } catch {
                    connected = "not responding"
                    model.note("could not report \(event): \(error)")
                }
            }

            terminal.draw(screen(model, connected))
            loop: for await input in inputs {
                switch input {
                case .key(let key):
                    switch key {
                    case .character("q"), .interrupt, .endOfInput:
                        _ = try? await client.report(.suspended, session: session)
                        break loop
                    case .character("b"), .backspace, .left: await report(model.back())
                    case .character("d"), .escape: await report(model.dismiss())
                    case .character("r"): await resync()
                    case .character(let digit) where digit.isWholeNumber && digit != "0":
                        await report(model.selectTab(digit.wholeNumberValue! - 1))
                    default:
                        model.note("keys: b back, d dismiss, 1-9 tab, r resync, q quit")
                    }
                case .event(let event):
                    connected = "connected"
                    let first = model.mirror == nil
                    await act(model.handle(event))
                    if first && model.mirror != nil { await report(.ready) }
                case .tick:
                    if let snapshot = try? await client.snapshot(session), let tree = try? snapshot.tree.core() {
                        connected = "connected"
                        if snapshot.epoch != model.epoch {
                            await resync()
                        } else if snapshot.seq == model.seq {
                            model.compare(with: tree)
                            behind = 0
                        } else if snapshot.seq > model.seq {
                            // Behind twice in a row: a batch was lost and nothing after it came.
                            behind += 1
                            if behind >= 2 {
                                behind = 0
                                await resync()
                            }
                        }
                    } else {
                        connected = "not responding"
                    }
                case .ended(let reason):
                    connected = "disconnected"
                    model.note("following ended: \(reason)")
                }
                terminal.draw(screen(model, connected))
            }
        }
    }

    func screen(_ model: ShellModel, _ connected: String) -> [String] {
        var lines = ["navctl shell — session \(model.session) — \(connected) — seq \(model.seq)", ""]
        if let tree = model.mirror {
            lines += TreeText.lines(tree, highlight: { "\u{1B}[1;7m\($0)\u{1B}[0m" })
        } else {
            lines.append("(no tree yet)")
        }
        lines.append("")
        if !model.lastBatch.isEmpty { lines += ["last batch:"] + model.lastBatch.map { "  \($0)" } }
        lines.append(model.status)
        lines += model.notices
        if let warning = model.warning { lines.append("\u{1B}[1;31mwarning: \(warning)\u{1B}[0m") }
        lines.append("b back · d dismiss · 1-9 tab · r resync · q quit")
        return lines
    }
}
