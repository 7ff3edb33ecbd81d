import NavigatorCore

extension Navigator_V1_Intent {
    public init(_ intent: Intent) {
        self.init()
        id = intent.id
        session = intent.session
        switch intent.target {
        case .path(let contexts): path = contexts.map(Navigator_V1_ScreenContext.init)
        case .url(let link): url = link
        }
        if !intent.animated { animated = false }
        source = intent.source
        priority = .init(intent.priority)
        ttlMs = intent.ttlMilliseconds
        sentAtUnixNanos = intent.sentAt
        setConditions = intent.setConditions
        waitForReady = intent.waitForReady
        traceparent = intent.traceparent
    }

    /// Whether the message names a traceparent the service will not carry (not of W3C's form).
    public var hasInvalidTraceparent: Bool { !traceparent.isEmpty && !TraceParent.isValid(traceparent) }

    /// The intent as NavigatorCore sees it. `session` overrides the message's session (the session
    /// frame is authoritative on the intents socket); a message session that differs is refused.
    /// (``IntentReader`` reads the same from the bytes, without this message.)
    public func core(session frame: String? = nil) throws(WireError) -> Intent {
        var fields = IntentFields()
        fields.id = id
        fields.session = session
        fields.path = path.map(\.core)
        fields.url = url
        fields.animated = hasAnimated ? animated : nil
        fields.source = source
        fields.priority = Int32(truncatingIfNeeded: priority.rawValue)
        fields.ttlMilliseconds = ttlMs
        fields.sentAt = sentAtUnixNanos
        fields.setConditions = setConditions
        fields.waitForReady = waitForReady
        fields.traceparent = traceparent
        return try fields.intent(session: frame)
    }
}

extension Navigator_V1_Priority {
    public init(_ priority: Intent.Priority) {
        switch priority {
        case .normal: self = .normal
        case .high: self = .high
        case .critical: self = .critical
        }
    }
}

extension Navigator_V1_ClientEvent {
    public init(_ event: ClientEvent, session: String, lastSeq: UInt64 = 0, epoch: UInt64 = 0) {
        self.init()
        self.session = session
        self.lastSeq = lastSeq
        self.epoch = epoch
        switch event {
        case .ready(let version): ready = .with { $0.appVersion = version?.text ?? "" }
        case .suspended: suspended = .init()
        case .poppedTo(let id): poppedTo = .with { $0.screenID = id.rawValue }
        case .dismissedTo(let id): dismissedTo = .with { $0.modalID = id?.rawValue ?? 0 }
        case .tabSelected(let name): tabSelected = .with { $0.tab = name }
        case .pushed(let screen, let ref):
            pushed = .with {
                $0.stack = .init(ref)
                $0.screen = .init(screen)
            }
        case .presented(let modal): presented = .with { $0.modal = .init(modal) }
        case .sync(let tree): sync = .with { $0.tree = .init(tree) }
        case .ack(let seq): ack = .with { $0.seq = seq }
        case .conditions(let set): conditions = .with { $0.set = set }
        }
    }

    /// The event; one whose content does not make a valid screen, modal or tree is an invalid
    /// event (the message decoded; what it says is wrong).
    public func core() throws(WireError) -> ClientEvent {
        do {
            return try decoded()
        } catch {
            throw error.code == .malformed ? WireError(.invalidEvent, error.message) : error
        }
    }

    private func decoded() throws(WireError) -> ClientEvent {
        switch kind {
        case .ready(let value):
            guard !value.appVersion.isEmpty else { return .ready() }
            guard let version = AppVersion(value.appVersion) else {
                throw WireError(.invalidEvent, "ready.app_version \(AppVersion.problem(with: value.appVersion)!)")
            }
            return .ready(appVersion: version)
        case .suspended: return .suspended
        case .poppedTo(let value): return .poppedTo(NodeID(rawValue: value.screenID))
        case .dismissedTo(let value): return .dismissedTo(value.modalID == 0 ? nil : NodeID(rawValue: value.modalID))
        case .tabSelected(let value): return .tabSelected(value.tab)
        case .pushed(let value):
            return .pushed(
                try value.screen.core("client_event.pushed.screen"),
                onto: try value.stack.core("client_event.pushed.stack"))
        case .presented(let value): return .presented(try value.modal.core("client_event.presented.modal"))
        case .sync(let value): return .sync(try value.tree.core("client_event.sync.tree"))
        case .ack(let value): return .ack(value.seq)
        case .conditions(let value): return .conditions(value.set)
        case nil:
            throw WireError(
                .malformed,
                "client event has no kind set; expected ready, suspended, popped_to, dismissed_to, tab_selected, pushed, presented, sync, ack or conditions"
            )
        }
    }
}

extension Navigator_V1_RejectCode {
    public init(_ code: ResolveError.Code) {
        switch code {
        case .invalidID: self = .invalidID
        case .invalidSession: self = .invalidSession
        case .emptyPath: self = .emptyPath
        case .pathTooLong: self = .pathTooLong
        case .unknownScreen: self = .unknownScreen
        case .missingInfo: self = .missingInfo
        case .invalidInfo: self = .invalidInfo
        case .unknownURL: self = .unknownURL
        case .invalidEvent: self = .invalidEvent
        case .expired: self = .expired
        case .limitExceeded: self = .limitExceeded
        case .staleEvent: self = .staleEvent
        case .moved: self = .moved
        case .appTooOld: self = .appTooOld
        case .internalError: self = .internal
        }
    }

    public init(_ code: WireError.Code) {
        switch code {
        case .badHeader, .malformed: self = .malformed
        case .invalidSession: self = .invalidSession
        case .badFrames: self = .badFrames
        case .sessionMismatch: self = .sessionMismatch
        case .invalidEvent: self = .invalidEvent
        }
    }

    /// The name used in counters and logs: `unknown_screen`.
    public var label: String {
        switch self {
        case .unspecified: "unspecified"
        case .malformed: "malformed"
        case .badFrames: "bad_frames"
        case .tooLarge: "too_large"
        case .invalidSession: "invalid_session"
        case .sessionMismatch: "session_mismatch"
        case .emptyPath: "empty_path"
        case .unknownScreen: "unknown_screen"
        case .missingInfo: "missing_info"
        case .invalidInfo: "invalid_info"
        case .unknownURL: "unknown_url"
        case .unknownRequest: "unknown_request"
        case .expired: "expired"
        case .invalidEvent: "invalid_event"
        case .invalidID: "invalid_id"
        case .shuttingDown: "shutting_down"
        case .internal: "internal"
        case .pathTooLong: "path_too_long"
        case .limitExceeded: "limit_exceeded"
        case .staleEvent: "stale_event"
        case .unavailable: "unavailable"
        case .overloaded: "overloaded"
        case .forbidden: "forbidden"
        case .moved: "moved"
        case .appTooOld: "app_too_old"
        case .conflict: "conflict"
        case .invalidRequest: "invalid_request"
        case .UNRECOGNIZED(let value): "unrecognized_\(value)"
        }
    }
}

extension Navigator_V1_ExplanationStep {
    public init(_ step: ExplanationStep) {
        self.init()
        self.step = step.step.rawValue
        detail = step.detail
        decisive = step.decisive
    }
}

extension Navigator_V1_Outcome {
    public init(_ outcome: Resolution.Outcome) {
        switch outcome {
        case .resolved: self = .resolved
        case .refreshed: self = .refreshed
        case .ignored: self = .ignored
        case .parked: self = .parked
        case .rejected: self = .rejected
        }
    }

    public var label: String {
        switch self {
        case .resolved: "resolved"
        case .refreshed: "refreshed"
        case .ignored: "ignored"
        case .parked: "parked"
        case .rejected: "rejected"
        default: "unspecified"
        }
    }
}

extension Navigator_V1_CommandBatch {
    /// The batch a resolution publishes; `seq` is the session's next seq.
    public init(
        session: String, seq: UInt64, intentID: String, animated: Bool, commands: [Command], treeVersion: UInt64,
        summary: String, cause: Navigator_V1_BatchCause
    ) {
        self.init()
        self.session = session
        self.seq = seq
        self.intentID = intentID
        self.animated = animated
        self.commands = commands.map(Navigator_V1_Command.init)
        self.treeVersion = treeVersion
        self.summary = summary
        self.cause = cause
    }
}
