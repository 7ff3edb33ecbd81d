/// An intent the resolver refused, with what was wrong and what was expected.
public struct ResolveError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable, Codable, CaseIterable {
        case invalidID = "invalid_id"
        case invalidSession = "invalid_session"
        case emptyPath = "empty_path"
        case pathTooLong = "path_too_long"
        case unknownScreen = "unknown_screen"
        case missingInfo = "missing_info"
        case invalidInfo = "invalid_info"
        case unknownURL = "unknown_url"
        case invalidEvent = "invalid_event"
        case expired = "expired"
        case limitExceeded = "limit_exceeded"
        case staleEvent = "stale_event"
        /// The session is served by another instance (or its partition is changing hands).
        case moved = "moved"
        /// The session's shell runs an app version without the screen, and the route map gives
        /// no fallback for it.
        case appTooOld = "app_too_old"
        case internalError = "internal"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A tree change that did not apply: a limit is the caller's to know; anything else here is
    /// a fault of the resolver's own plan.
    init(treeError error: TreeError, _ what: String) {
        if error.code == .limitExceeded {
            self.init(.limitExceeded, error.message)
        } else {
            self.init(.internalError, "\(what): \(error.message)")
        }
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// One step of the resolver's reasoning, for people.
public struct ExplanationStep: Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Step: String, Hashable, Sendable, Codable {
        case validate, dedup, `guard`
        case alreadyShown = "already-shown"
        case switcher, blocking, transition
        case backStack = "back-stack"
        case path, release, expiry, event, ready
    }

    public var step: Step
    /// What happened, kept as data until read (``Detail``).
    public var note: Detail
    /// Whether this step decided the outcome.
    public var decisive: Bool

    public init(_ step: Step, _ note: Detail, decisive: Bool = false) {
        self.step = step
        self.note = note
        self.decisive = decisive
    }

    /// What happened, in words.
    public var detail: String { note.description }

    public var description: String { "\(decisive ? "*" : "-") \(step.rawValue): \(detail)" }

    /// `step: detail`, a resolution's one line: written into one string made large enough for
    /// most at once (not grown three or four times, nor copied from the detail's own text).
    public var summary: String {
        var text = ""
        text.reserveCapacity(Self.summaryCapacity)
        write(summaryTo: &text)
        return text
    }

    /// ``summary``'s UTF-8 bytes appended to `bytes`, with no string made for them (a batch's
    /// summary written straight into its encoding).
    public func appendSummary(to bytes: inout [UInt8]) {
        var sink = UTF8Sink(bytes: [])
        swap(&sink.bytes, &bytes)
        write(summaryTo: &sink)
        swap(&sink.bytes, &bytes)
    }

    private func write(summaryTo text: inout some TextSink) {
        text.append(step.rawValue)
        text.append(": ")
        note.write(to: &text)
    }

    /// Room for a summary: navload's mix makes 30–250 bytes, nine in ten under 200.
    static let summaryCapacity = 256
}

/// What resolving one intent did: the outcome, its commands, and why.
public struct Resolution: Hashable, Sendable {
    public enum Outcome: Hashable, Sendable {
        /// These commands take the tree to the target.
        case resolved([Command])
        /// The target was shown already; these commands refresh its info.
        case refreshed([Command])
        /// Nothing to do, and why.
        case ignored(String)
        /// The intent waits; `redirect` shows a guard's screen meanwhile (may be empty).
        case parked(ParkReason, redirect: [Command])
        /// The intent is invalid; nothing changed.
        case rejected(ResolveError)
    }

    public var intent: Intent
    public var outcome: Outcome
    public var explanation: [ExplanationStep]
    /// Parked intents this one released, in the order their batches are published.
    public var released: [Resolution]
    /// When the session's shell was too old for a screen of the path: what was shown instead, and
    /// why (also a step of the explanation).
    public var fallback: String? = nil

    /// The commands to publish for this intent itself.
    public var commands: [Command] {
        switch outcome {
        case .resolved(let commands), .refreshed(let commands), .parked(_, let commands): commands
        case .ignored, .rejected: []
        }
    }

    public init(intent: Intent, outcome: Outcome, explanation: [ExplanationStep], released: [Resolution]) {
        self.intent = intent
        self.outcome = outcome
        self.explanation = explanation
        self.released = released
    }

    /// The error, if the intent was rejected.
    public var rejection: ResolveError? {
        if case .rejected(let error) = outcome { error } else { nil }
    }

    /// The decisive step's detail, in one line (``ExplanationStep/summary``); empty without steps.
    public var summary: String { summaryStep?.summary ?? "" }

    /// The step the summary tells: the decisive one, else the last.
    public var summaryStep: ExplanationStep? { explanation.last(where: \.decisive) ?? explanation.last }
}

/// What applying a client event did.
public struct EventResolution: Hashable, Sendable {
    /// The commands that mirror the event, for the other shells of the session.
    public var echo: [Command]
    /// Parked intents the event released.
    public var released: [Resolution]
    /// Set when the event could not be applied.
    public var error: ResolveError?

    public init(echo: [Command], released: [Resolution], error: ResolveError? = nil) {
        self.echo = echo
        self.released = released
        self.error = error
    }
}
