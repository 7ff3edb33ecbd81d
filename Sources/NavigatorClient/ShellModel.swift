import NavigatorCore
import NavigatorWire

/// What a client shell does, without the terminal: keeps the mirror tree, applies the service's
/// batches (acknowledging each), and turns the user's actions into local changes plus the client
/// events that report them. The service echoes each event as a batch that the mirror, already
/// changed, applies as a no-op.
public struct ShellModel: Sendable {
    public let session: String
    public private(set) var mirror: ScreenTree?
    public private(set) var seq: UInt64 = 0
    /// The epoch of ``seq`` (0 before the first snapshot).
    public private(set) var epoch: UInt64 = 0
    public private(set) var lastBatch: [String] = []
    /// What happened last, for the status line.
    public private(set) var status = "waiting for a snapshot"
    /// Set when the mirror differs from the service's tree.
    public private(set) var warning: String?
    /// The session's conditions and parked intents (id, why it waits, the condition a guard
    /// waits for), from the latest snapshot.
    public private(set) var conditions: [String: Bool] = [:]
    public private(set) var parked: [(id: String, reason: String, guardCondition: String)] = []
    /// The session's latest rejections and audit records, newest last, each marked as such.
    public private(set) var notices: [String] = []
    static let noticesKept = 5

    public init(session: String) { self.session = session }

    /// What the shell must do after an event.
    public enum Action: Hashable, Sendable {
        /// Acknowledge this batch.
        case report(ClientEvent)
        /// The mirror cannot be trusted: take a snapshot and hand it over as `.snapshot`.
        case resync
    }

    /// Takes an event from the follower; returns what to do next, if anything.
    public mutating func handle(_ event: SessionEvent) -> Action? {
        switch event {
        case .snapshot(_, let position, let tree):
            mirror = tree
            self.seq = position.seq
            self.epoch = position.epoch
            status = "snapshot at seq \(position.seq)"
            warning = nil
            return nil
        case .batch(let batch, let header, let serviceTree):
            guard var tree = mirror else { return nil }
            guard header.epoch == epoch else {
                status = "batch of a new epoch (the service restarted or lost changes); resyncing"
                return .resync
            }
            if header.seq <= seq { return nil }
            guard header.seq == seq + 1 else {
                status = "missed batch \(seq + 1) (got \(header.seq)); resyncing"
                return .resync
            }
            do {
                try tree.apply(try batch.coreCommands())
            } catch {
                warning = "batch \(header.seq) does not apply to this shell's tree (\(error)); resyncing"
                return .resync
            }
            mirror = tree
            seq = header.seq
            lastBatch = (try? batch.coreCommands().map(\.description)) ?? []
            status =
                "applied batch \(header.seq)"
                + (batch.intentID.isEmpty ? " (echo of a client event)" : " for \(batch.intentID)")
            if tree.root != serviceTree.root || tree.modals != serviceTree.modals {
                warning = "this shell's tree differs from the service's after batch \(header.seq); press r to resync"
            }
            return .report(.ack(header.seq))
        case .gap(let expected, let received):
            status = "missed batch \(expected) (got \(received)); resyncing"
            return nil
        case .resync(let reason):
            status = "\(reason); resyncing"
            return nil
        case .rejection(let rejection, _):
            notice(
                "rejected \(rejection.intentID.isEmpty ? "an intent" : rejection.intentID) (\(rejection.code.label)): \(rejection.message)"
            )
            return nil
        case .audit(let record, _):
            let client = record.client.isEmpty ? "" : " from \(record.client)"
            notice(
                "audit: \(Self.word(record.kind)) \(record.intentID)\(client): \(record.outcome.label)\(record.summary.isEmpty ? "" : " — \(record.summary)")"
            )
            return nil
        case .published:
            return nil
        }
    }

    static func word(_ kind: Navigator_V1_AuditKind) -> String {
        switch kind {
        case .resolution: "decided"
        case .release: "released"
        case .expiry: "expired"
        default: "recorded"
        }
    }

    /// Takes the conditions and parked intents of a fresh snapshot.
    public mutating func update(from snapshot: Navigator_V1_Snapshot) {
        conditions = snapshot.conditions
        parked = snapshot.parked.map { ($0.intent.id, $0.reason, $0.guardCondition) }
    }

    /// The condition the oldest intent parked behind a guard waits for, if any.
    public var guardCondition: String? { parked.first { !$0.guardCondition.isEmpty }?.guardCondition }

    /// For testing a guard: the event that sets ``guardCondition`` true, as a logged-in app would.
    public mutating func satisfyGuard() -> ClientEvent? {
        guard let condition = guardCondition else {
            status = "no intent waits for a condition"
            return nil
        }
        status = "set \(condition)=true"
        return .conditions([condition: true])
    }

    private mutating func notice(_ line: String) {
        notices.append(line)
        if notices.count > Self.noticesKept { notices.removeFirst(notices.count - Self.noticesKept) }
    }

    /// Back: pop the top screen of the frontmost stack (a modal's stack with one screen is
    /// dismissed instead).
    public mutating func back() -> ClientEvent? {
        guard var tree = mirror else { return nil }
        let ref = tree.topStack
        guard let stack = tree.stack(ref) else { return nil }
        if stack.count > 1 {
            let target = stack[stack.count - 2].id
            return change(&tree, .popTo(target), .poppedTo(target), "went back to \(stack[stack.count - 2])")
        }
        if case .modal = ref { return dismiss() }
        status = "nothing to go back to"
        return nil
    }

    /// Dismiss the frontmost modal.
    public mutating func dismiss() -> ClientEvent? {
        guard var tree = mirror, let last = tree.modals.last else {
            status = "no modal to dismiss"
            return nil
        }
        let below = tree.modals.dropLast().last?.id
        return change(&tree, .dismissTo(below), .dismissedTo(below), "dismissed \(last.stack[0])")
    }

    /// Select the tab at `index` (0-based).
    public mutating func selectTab(_ index: Int) -> ClientEvent? {
        guard var tree = mirror else { return nil }
        let names = tree.tabNames
        guard names.indices.contains(index) else {
            status = names.isEmpty ? "no tabs in this tree" : "no tab \(index + 1); tabs are 1 to \(names.count)"
            return nil
        }
        return change(&tree, .selectTab(names[index]), .tabSelected(names[index]), "selected tab \(names[index])")
    }

    /// Compares the mirror with a fresh snapshot of the service.
    public mutating func compare(with snapshot: ScreenTree) {
        guard let mirror else { return }
        if mirror.root != snapshot.root || mirror.modals != snapshot.modals {
            warning = "this shell's tree differs from the service's snapshot; press r to resync"
        } else if warning != nil {
            warning = nil
        }
    }

    public mutating func note(_ text: String) { status = text }

    private mutating func change(_ tree: inout ScreenTree, _ command: Command, _ event: ClientEvent, _ text: String)
        -> ClientEvent?
    {
        do {
            try tree.apply(command)
        } catch {
            status = "cannot: \(error.message)"
            return nil
        }
        mirror = tree
        status = text
        return event
    }
}
