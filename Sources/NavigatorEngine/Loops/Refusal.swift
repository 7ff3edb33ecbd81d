import NavigatorCore
import NavigatorWire

extension Navigator_V1_Rejected {
    /// The one way a refusal is built for a reply (a `Rejection` on `r/<session>/` is built by
    /// ``Publisher/rejection(session:intentID:source:code:message:sentAt:)``).
    static func rejection(_ code: Navigator_V1_RejectCode, _ message: String, seq: UInt64 = 0, epoch: UInt64 = 0)
        -> Self
    {
        .with {
            $0.code = code
            $0.message = message
            $0.seq = seq
            $0.epoch = epoch
        }
    }

    /// A refusal of the resolver or of the wire decoding.
    static func rejection(_ error: ResolveError) -> Self {
        .rejection(Navigator_V1_RejectCode(error.code), error.message)
    }
    static func rejection(_ error: WireError) -> Self { .rejection(Navigator_V1_RejectCode(error.code), error.message) }
}

extension EngineCounters {
    /// Counts a refusal: by its code always, and — the one rule for `intents_by_outcome` — as
    /// outcome `rejected` when what was refused is an intent: one that came on the intents socket
    /// (whatever was wrong with it, frames included) or an acknowledged `Request.intent`,
    /// refused before the resolver decided (an intent the resolver rejects is counted with its
    /// outcome, as every resolved one). Client events, explain and the other requests, and a
    /// request that cannot be read at all, count by code only. So the outcomes add up to the
    /// intents received.
    func refused(_ code: Navigator_V1_RejectCode, intent: Bool) {
        count(code)
        if intent { count(.rejected) }
    }
}
