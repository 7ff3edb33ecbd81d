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
            g = satisfy the guard a parked intent waits for (sets its condition, as a logged-in app \
            would); r = resync from a snapshot; q or Ctrl-C = quit. Each batch is applied to the shell's own \
            tree and acknowledged; each key is applied locally and reported as a client event. Every \
            few seconds the tree is compared with a fresh snapshot and a warning shows if they differ. \
            Once it shows its first tree the shell reports Ready (intents sent with --wait-for-ready \
            go then), with --app-version if given, and Suspended when it quits.
            """)

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var target: SessionOption
    @Option(
        help: ArgumentHelp(
            "The app version this shell says in its Ready (screens the route map marks since: a later one show their fallback).",
            valueName: "version"))
    var appVersion: String?

    func validate() throws {
        if let appVersion, let problem = AppVersion.problem(with: appVersion) {
            throw ValidationError("--app-version \(problem)")
        }
    }

    enum Input: Sendable {
        case key(Key)
        case event(SessionEvent)
        case tick
        /// Following the session ended; it starts again by itself.
        case ended(Link)
        case resize
    }

    /// What the header says of navigatord.
    enum Link: Sendable {
        case connecting
        case connected
        /// No answer within the timeout.
        case notResponding
        /// navigatord answered, and refused (the reason).
        case refused(String)
        /// Following the session ended (the reason); it starts again by itself.
        case disconnected(String)

        init(_ error: any Error) {
            if let error = error as? ClientError, error.code == .rejected {
                self = .refused(error.description)
            } else {
                self = .notResponding
            }
        }

        func text(_ palette: Palette) -> String {
            switch self {
            case .connecting: palette.yellow("connecting")
            case .connected: palette.green("connected")
            case .notResponding: palette.yellow("not responding")
            case .refused(let reason): palette.red("refused: \(reason)")
            case .disconnected(let reason): palette.yellow("disconnected (\(reason)); retrying")
            }
        }
    }

    func run() async throws {
        let session = try target.id
        try await withConnection(connection) { client in
            let terminal = Terminal()
            defer { terminal.restore() }
            var model = ShellModel(session: session)
            var connected = Link.connecting
            let palette = Palette()
            var behind = 0  // checks in a row that found this shell behind the service
            let (inputs, continuation) = AsyncStream<Input>.makeStream()
            KeyReader.start { continuation.yield(.key($0)) }
            ResizeWatcher.start { continuation.yield(.resize) }
            // Following ends when a snapshot cannot be had (navigatord down, say): it starts
            // again by itself, so the shell catches up once navigatord is back.
            let follower = Task { [session] in
                while !Task.isCancelled {
                    do {
                        for try await event in client.follow(.session(session)) { continuation.yield(.event(event)) }
                        continuation.yield(.ended(.disconnected("the connection closed")))
                    } catch {
                        continuation.yield(.ended(Link(error)))
                    }
                    try? await Task.sleep(for: .seconds(1))
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
                            session: session, position: StreamPosition(epoch: snapshot.epoch, seq: snapshot.seq),
                            tree: try snapshot.tree.core()))
                    connected = .connected
                } catch {
                    connected = Link(error)
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
                    connected = .connected
                } catch let error as ClientError where error.rejectCode == .staleEvent {
                    // A batch changed the tree before the service saw this change: show its tree.
                    model.note("the service's tree changed before \(event) reached it; resyncing")
                    await resync()
                } catch {
                    connected = Link(error)
                    model.note("could not report \(event): \(error)")
                }
            }

            terminal.draw(screen(model, connected, palette))
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
                    case .character("g"): await report(model.satisfyGuard())
                    case .character(let digit) where digit.isWholeNumber && digit != "0":
                        await report(model.selectTab(digit.wholeNumberValue! - 1))
                    default:
                        model.note("keys: b back, d dismiss, 1-9 tab, g satisfy a guard, r resync, q quit")
                    }
                case .event(let event):
                    connected = .connected
                    let first = model.mirror == nil
                    await act(model.handle(event))
                    if first && model.mirror != nil {
                        await report(.ready(appVersion: appVersion.flatMap(AppVersion.init)))
                    }
                    if case .batch = event, let snapshot = try? await client.snapshot(session) {
                        model.update(from: snapshot)  // conditions and parked intents
                    }
                case .tick:
                    let fresh: (snapshot: Navigator_V1_Snapshot, tree: ScreenTree)?
                    do {
                        let snapshot = try await client.snapshot(session)
                        fresh = (snapshot, try snapshot.tree.core())
                    } catch {
                        connected = Link(error)
                        fresh = nil
                    }
                    if let (snapshot, tree) = fresh {
                        connected = .connected
                        model.update(from: snapshot)
                        if model.mirror == nil || snapshot.epoch != model.epoch {
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
                    }
                case .ended(let link):
                    connected = link
                case .resize:
                    break
                }
                terminal.draw(screen(model, connected, palette))
            }
        }
    }

    func screen(_ model: ShellModel, _ connected: Link, _ palette: Palette) -> [String] {
        var lines = ["navctl shell — session \(model.session) — \(connected.text(palette)) — seq \(model.seq)", ""]
        if let tree = model.mirror {
            lines += TreeText.lines(tree, highlight: palette.top)
        } else {
            lines.append("(no tree yet: waiting for a snapshot)")
        }
        lines.append("")
        if !model.lastBatch.isEmpty { lines += ["last batch:"] + model.lastBatch.map { "  \($0)" } }
        if !model.conditions.isEmpty {
            lines.append(
                "conditions: "
                    + model.conditions.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                        separator: ", "))
        }
        for parked in model.parked { lines.append("parked \(parked.id): \(parked.reason)") }
        if let condition = model.guardCondition { lines.append(palette.yellow("press g to set \(condition)=true")) }
        lines.append(model.status)
        lines += model.notices.map { $0.hasPrefix("rejected") ? palette.red($0) : palette.dim($0) }
        if let warning = model.warning { lines.append(palette.red("warning: \(warning)")) }
        lines.append(palette.dim(TreeText.legend))
        lines.append("keys: b back · d dismiss · 1-9 tab · g satisfy a guard · r resync · q quit")
        return lines
    }
}
