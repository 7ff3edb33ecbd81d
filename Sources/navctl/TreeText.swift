import NavigatorCore
import NavigatorWire

/// Text for people: trees, commands, replies. Used by navctl; plain strings, no terminal codes
/// unless `highlight` supplies them.
public enum TreeText {
    /// The tree, one stack a line: tabs (the selected one marked `▸`), then modals with their
    /// styles; the top screen is wrapped by `highlight`.
    public static func lines(_ tree: ScreenTree, highlight: (String) -> String = { "[\($0)]" }) -> [String] {
        let top = tree.top.id
        func stack(_ screens: [Screen]) -> String {
            screens.map { $0.id == top ? highlight($0.description) : $0.description }.joined(separator: " › ")
        }
        var lines: [String] = []
        switch tree.root {
        case .tabs(let bar):
            let width = bar.tabs.map(\.name.count).max() ?? 0
            lines.append("tabs")
            for tab in bar.tabs {
                let mark = tab.name == bar.selected ? "▸ " : "  "
                lines.append("  \(mark)\(tab.name.padding(width))  \(stack(tab.stack))")
            }
        case .stack(let screens):
            lines.append("root stack")
            lines.append("    \(stack(screens))")
        }
        if !tree.modals.isEmpty {
            lines.append("modals (last is frontmost)")
            for modal in tree.modals {
                lines.append("    modal \(modal.id) (\(modal.style.rawValue))  \(stack(modal.stack))")
            }
        }
        return lines
    }

    /// What the marks of ``lines(_:highlight:)`` mean.
    public static let legend =
        "name#N: a screen and its id · modal #N: a modal and its id · ▸ selected tab · highlighted: the top screen"

    /// One line per command of a batch.
    public static func commands(_ batch: Navigator_V1_CommandBatch) -> [String] {
        (try? batch.coreCommands().map(\.description)) ?? ["(commands that do not decode)"]
    }

    /// What an intent's reply says, as lines.
    public static func reply(_ reply: Navigator_V1_Reply) -> [String] {
        var lines: [String] = []
        switch reply.kind {
        case .resolved(let resolved):
            lines.append("\(resolved.outcome.label): batch seq \(resolved.batch.seq)")
            lines += commands(resolved.batch).map { "  \($0)" }
        case .ignored(let ignored):
            lines.append("ignored: \(ignored.reason)")
        case .parked(let parked):
            lines.append("parked: \(parked.reason)")
            if !parked.redirect.commands.isEmpty {
                lines.append("  redirect batch seq \(parked.redirect.seq):")
                lines += commands(parked.redirect).map { "    \($0)" }
            }
        case .rejected(let rejected):
            lines.append("rejected (\(rejected.code.label)): \(rejected.message)")
        case .explanation(let explanation):
            lines.append(
                "would be \(explanation.outcome.label)\(explanation.reason.isEmpty ? "" : ": \(explanation.reason)")")
            if explanation.hasRejection {
                lines.append("  \(explanation.rejection.code.label): \(explanation.rejection.message)")
            }
            lines += commands(explanation.batch).filter { _ in !explanation.batch.commands.isEmpty }.map { "  \($0)" }
        case .eventApplied(let applied):
            lines.append(
                "applied: seq \(applied.seq)\(applied.releasedIntentIds.isEmpty ? "" : ", released \(applied.releasedIntentIds.joined(separator: ", "))")"
            )
        default:
            lines.append("\(reply)")
        }
        if !reply.explanationSteps.isEmpty {
            lines.append("why:")
            lines += reply.explanationSteps.map { "  \($0.decisive ? "*" : "-") \($0.step): \($0.detail)" }
        }
        return lines
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
