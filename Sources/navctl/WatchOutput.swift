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
        case .snapshot(let session, let seq, let epoch, let tree):
            return prefix + ["session \(session) — snapshot at seq \(seq) (epoch \(epoch))"]
                + TreeText.lines(tree, highlight: bold)
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
            return [
                "audit \(record.session) \(record.intentID) \(record.outcome.label) seq \(record.seq): \(record.summary)"
            ]
        }
    }

    /// One JSON object per event, the batch in protobuf's JSON mapping.
    static func json(_ event: SessionEvent) -> String {
        func encode(_ message: some SwiftProtobuf.Message) -> String { (try? message.jsonString()) ?? "{}" }
        func jsonString(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20:
                    out +=
                        "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                        + String(scalar.value, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        switch event {
        case .snapshot(let session, let seq, let epoch, let tree):
            return
                #"{"event":"snapshot","session":"\#(session)","seq":\#(seq),"epoch":"\#(epoch)","tree":\#(encode(Navigator_V1_ScreenTree(tree)))}"#
        case .batch(let batch, let header, _):
            return #"{"event":"batch","seq":\#(header.seq),"sentAt":\#(header.sentAt),"batch":\#(encode(batch))}"#
        case .gap(let expected, let received):
            return #"{"event":"gap","expected":\#(expected),"received":\#(received)}"#
        case .resync(let reason):
            return #"{"event":"resync","reason":\#(jsonString(reason))}"#
        case .published(let batch, let header):
            return #"{"event":"batch","seq":\#(header.seq),"batch":\#(encode(batch))}"#
        case .rejection(let rejection, _):
            return #"{"event":"rejection","rejection":\#(encode(rejection))}"#
        case .audit(let record, _):
            return #"{"event":"audit","record":\#(encode(record))}"#
        }
    }
}
