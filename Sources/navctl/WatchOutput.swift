import NavigatorClient
import NavigatorCore
import NavigatorWire
import SwiftProtobuf

/// How `navctl watch` shows events.
enum WatchOutput {
    /// A drawing; with `clear`, the screen is cleared first so the tree redraws in place.
    static func text(_ event: SessionEvent, clear: Bool) -> [String] {
        let bold: (String) -> String = clear ? { "\u{1B}[1;7m\($0)\u{1B}[0m" } : { "[\($0)]" }
        let prefix = clear ? ["\u{1B}[2J\u{1B}[H"] : []
        switch event {
        case .snapshot(let session, let position, let tree):
            return prefix + ["session \(session) — snapshot at seq \(position.seq) (epoch \(position.epoch))"]
                + TreeText.lines(tree, highlight: bold) + [TreeText.legend.replacingHighlight(clear)]
        case .batch(let batch, let header, let tree):
            return prefix + [
                "session \(batch.session) — seq \(header.seq) — intent \(batch.intentID.isEmpty ? "(client event)" : batch.intentID) — \(batch.summary)"
            ]
                + TreeText.lines(tree, highlight: bold) + ["last batch:"] + TreeText.commands(batch).map { "  \($0)" }
        case .gap(let expected, let received):
            return ["missed batch \(expected) (got \(received)); resyncing from a snapshot"]
        case .resync(let reason):
            return ["\(reason); resyncing from a snapshot"]
        case .published(let batch, let header):
            return [
                "batch \(batch.session) seq \(header.seq) \(batch.intentID): "
                    + TreeText.commands(batch).joined(separator: "; ")
            ]
        case .rejection(let rejection, _):
            return [
                "rejected \(rejection.session.isEmpty ? "(no session)" : rejection.session) \(rejection.intentID): \(rejection.code.label): \(rejection.message)"
            ]
        case .audit(let record, _):
            let line =
                "audit \(record.session) \(record.intentID) \(record.outcome.label) seq \(record.seq): \(record.summary)"
            return record.fallback.isEmpty ? [line] : [line, "  fallback: \(record.fallback)"]
        }
    }

    /// One JSON object per event: a `navigator.v1.StreamEvent` in protobuf's canonical JSON
    /// mapping (see service.proto).
    static func json(_ event: SessionEvent) -> String {
        (try? event.streamEvent.jsonString()) ?? "{}"
    }
}

extension String {
    /// The legend says "highlighted" on a terminal, "[in brackets]" elsewhere.
    fileprivate func replacingHighlight(_ terminal: Bool) -> String {
        terminal ? self : replacing("highlighted: the top screen", with: "[in brackets]: the top screen")
    }
}
