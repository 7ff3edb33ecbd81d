/// Text for people — an explanation step, a plan's detail — kept as its parts and written out
/// only when someone reads it.
///
/// Resolving an intent explains every step it takes, but the text is wanted only now and then: a
/// dry run, an acknowledged reply, the audit stream, the decisive step's summary of a published
/// batch. Written with string interpolation (`"\(screen) is already in \(ref)"`), a `Detail`
/// keeps the screens, stacks and ids themselves (a reference count each, no formatting); the
/// text is made by ``description``.
public struct Detail: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByStringInterpolation {
    enum Part: Sendable {
        case text(String)
        case context(ScreenContext)
        case screen(Screen)
        case stack(StackRef)
        case id(NodeID)
        case number(Int)
        case contexts([ScreenContext], separator: String)
        case reason(ParkReason)
        /// `step 2 of 3, chat(conversationId=42): `
        case pathStep(Int, of: Int, ScreenContext)
        /// `path home > chat(conversationId=42) is valid`: the first step of every resolution, one
        /// part so that it needs no array.
        case validPath([ScreenContext])
        /// A whole sentence the resolver says often, in one part (no array).
        case sentence(Sentence)
    }

    /// The sentences of the common plans and steps, each one part of a detail: a detail that is
    /// one of them needs no array. ``Detail/write(to:)`` shows their words (DetailTests pins them:
    /// they are what users and the audit stream read).
    enum Sentence: Sendable {
        /// Where a push puts its target.
        enum Place: Sendable {
            case topModal(NodeID)
            case homeTab(String)
            case current(StackRef)
        }

        /// `chat(conversationId=42)#7 is already on top`
        case alreadyOnTop(Screen)
        /// `pushing chat(conversationId=42) onto its home tab chats`, and `, with chatList,
        /// chat(conversationId=42) beneath` when parents are built beneath it.
        case pushing(ScreenContext, onto: Place, beneath: [ScreenContext])
        /// `chat(conversationId=42) is already on top with the same info; nothing to do`
        case nothingToDo(ScreenContext)
        /// `2 contexts resolved into one batch of 3 commands`
        case pathResolved(contexts: Int, commands: Int)
        /// `chat(conversationId=42) is in tab chats; popping to it`
        case poppingTo(ScreenContext, in: StackRef)
        /// `presenting mediaViewer(mediaId=m1) as a overCurrent modal`
        case presenting(ScreenContext, PresentationStyle)
        /// `built chatList, chat(conversationId=42) beneath`
        case built([ScreenContext])
        /// `that would dismiss or cover the blocking incomingCall(…)#9; the intent waits until it is gone`
        case wouldCover(Screen)
        /// `parked 120 ms ago (waiting for authenticated (showing login)); trying again`: how
        /// long it waited, in nanoseconds.
        case retrying(parkedFor: Int64, ParkReason)
        /// `existing screen: chat(conversationId=42)#7 is already in tab chats; bringing it to
        /// the top`: ``ExistingScreenSwitcher``'s plan, its name included.
        case alreadyIn(Screen, StackRef)
        /// `tab root: chatList is the root of tab chats; selecting it and popping to its root`,
        /// or `…; restoring the tab bar`: ``TabRootSwitcher``'s plan, its name included.
        case tabRoot(screen: String, tab: String, restoringTabBar: Bool)
        /// `welcome becomes the root`, and `; modals are dismissed` when there were modals: a
        /// set-root screen's plan.
        case becomesRoot(ScreenContext, dismissingModals: Bool)
    }

    /// Whether the detail is one sentence that names the switcher that planned it (the built-in
    /// switchers' plans): the resolver puts no name in front of it.
    var namesItsSwitcher: Bool {
        guard second == nil, case .sentence(let sentence)? = head else { return false }
        switch sentence {
        case .alreadyIn, .tabRoot: return true
        default: return false
        }
    }

    /// A detail that is one sentence.
    static func sentence(_ sentence: Sentence) -> Detail { Detail(head: .sentence(sentence)) }

    /// `path home > chat(conversationId=42) is valid`.
    static func validPath(_ path: [ScreenContext]) -> Detail { Detail(head: .validPath(path)) }

    /// The label of one context's steps in a longer path: `step 2 of 3, chat(conversationId=42): `.
    static func pathStep(_ number: Int, of count: Int, _ context: ScreenContext) -> Detail {
        Detail(head: .pathStep(number, of: count, context))
    }

    /// The first two parts, held in the value: a detail of one part (a message, a literal, a
    /// sentence) allocates nothing, nor does one with a path step's label in front. The others
    /// follow in `rest`, one array: a detail stays small, so copies of steps and plans stay
    /// cheap (BENCHMARKS.md, "Resolver alone"). `second` is set only after `head`, and `rest`
    /// only after `second`.
    var head: Part?
    var second: Part?
    var rest: [Part] = []

    init(head: Part?) { self.head = head }

    public init(_ text: String) { if !text.isEmpty { head = .text(text) } }

    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: StringInterpolation) {
        head = stringInterpolation.head
        second = stringInterpolation.second
        rest = stringInterpolation.rest
    }

    public var isEmpty: Bool { head == nil }

    /// `text` put before the parts: a switcher's name before its plan (the built-in switchers'
    /// sentences name them already: ``namesItsSwitcher``). In place when the interpolation that
    /// made the detail left room (it leaves three parts: two for this, one for a path step's
    /// label).
    mutating func prefix(_ text: String, _ separator: String) {
        guard head != nil else {
            self = "\(text)\(separator)"
            return
        }
        insertFirst(.text(separator))
        insertFirst(.text(text))
    }

    /// `label` put before the parts (a path step's `step 2 of 3, …: `): in place when the label
    /// is one part and this detail is one part (no array), or its interpolation left room.
    mutating func prefix(_ label: Detail) {
        guard let part = label.head else { return }
        guard label.second == nil, head != nil else {
            self = label + self
            return
        }
        insertFirst(part)
    }

    /// A part put before the others (the detail has one at least).
    private mutating func insertFirst(_ part: Part) {
        if let second {
            if rest.isEmpty { rest.reserveCapacity(3) }
            rest.insert(second, at: 0)
        }
        second = head
        head = part
    }

    /// One more part at the end.
    mutating func append(_ part: Part) {
        if head == nil {
            head = part
        } else if second == nil {
            second = part
        } else {
            // Room for the few parts that follow one another (a push's ", with", its parents,
            // " beneath"): an array grown one part at a time is made three times.
            if rest.isEmpty { rest.reserveCapacity(3) }
            rest.append(part)
        }
    }

    /// The parts in order.
    func forEachPart(_ body: (Part) -> Void) {
        guard let head else { return }
        body(head)
        guard let second else { return }
        body(second)
        for part in rest { body(part) }
    }

    public var description: String {
        var text = ""
        write(to: &text)
        return text
    }

    func write(to text: inout some TextSink) {
        forEachPart { part in
            switch part {
            case .text(let string): text.append(string)
            case .context(let context): context.write(to: &text)
            case .screen(let screen): screen.write(to: &text)
            case .stack(let ref): text.append(ref.description)
            case .id(let id): text.append(id.description)
            case .number(let number): text.append(String(number))
            case .contexts(let contexts, let separator):
                Self.write(contexts, separator: separator, to: &text)
            case .reason(let reason): text.append(reason.description)
            case .pathStep(let number, let count, let context):
                text.append("step ")
                text.append(String(number))
                text.append(" of ")
                text.append(String(count))
                text.append(", ")
                context.write(to: &text)
                text.append(": ")
            case .validPath(let path):
                text.append("path ")
                Self.write(path, separator: " > ", to: &text)
                text.append(" is valid")
            case .sentence(let sentence):
                Self.write(sentence, to: &text)
            }
        }
    }

    private static func write(_ contexts: [ScreenContext], separator: String, to text: inout some TextSink) {
        for (index, context) in contexts.enumerated() {
            if index > 0 { text.append(separator) }
            context.write(to: &text)
        }
    }

    private static func write(_ sentence: Sentence, to text: inout some TextSink) {
        switch sentence {
        case .alreadyOnTop(let screen):
            screen.write(to: &text)
            text.append(" is already on top")
        case .pushing(let target, let place, let beneath):
            text.append("pushing ")
            target.write(to: &text)
            switch place {
            case .topModal(let id):
                text.append(" onto the top modal ")
                text.append(id.description)
            case .homeTab(let home):
                text.append(" onto its home tab ")
                text.append(home)
            case .current(let ref):
                text.append(" onto the current ")
                text.append(ref.description)
            }
            if !beneath.isEmpty {
                text.append(", with ")
                write(beneath, separator: ", ", to: &text)
                text.append(" beneath")
            }
        case .nothingToDo(let target):
            target.write(to: &text)
            text.append(" is already on top with the same info; nothing to do")
        case .pathResolved(let contexts, let commands):
            text.append(String(contexts))
            text.append(" contexts resolved into one batch of ")
            text.append(String(commands))
            text.append(" commands")
        case .poppingTo(let target, let ref):
            target.write(to: &text)
            text.append(" is in ")
            text.append(ref.description)
            text.append("; popping to it")
        case .presenting(let target, let style):
            text.append("presenting ")
            target.write(to: &text)
            text.append(" as a ")
            text.append(style.rawValue)
            text.append(" modal")
        case .built(let contexts):
            text.append("built ")
            write(contexts, separator: ", ", to: &text)
            text.append(" beneath")
        case .wouldCover(let screen):
            text.append("that would dismiss or cover the blocking ")
            screen.write(to: &text)
            text.append("; the intent waits until it is gone")
        case .alreadyIn(let screen, let ref):
            text.append(ExistingScreenSwitcher.builtInName)
            text.append(": ")
            screen.write(to: &text)
            text.append(" is already in ")
            text.append(ref.description)
            text.append("; bringing it to the top")
        case .tabRoot(let screen, let tab, let restoring):
            text.append(TabRootSwitcher.builtInName)
            text.append(": ")
            text.append(screen)
            text.append(" is the root of tab ")
            text.append(tab)
            text.append(restoring ? "; restoring the tab bar" : "; selecting it and popping to its root")
        case .becomesRoot(let target, let dismissingModals):
            target.write(to: &text)
            text.append(" becomes the root")
            if dismissingModals { text.append("; modals are dismissed") }
        case .retrying(let waited, let reason):
            text.append("parked ")
            text.append(Resolver.ago(waited))
            text.append(" (")
            text.append(reason.description)
            text.append("); trying again")
        }
    }

    public static func + (lhs: Detail, rhs: Detail) -> Detail {
        if lhs.isEmpty { return rhs }
        if rhs.isEmpty { return lhs }
        var joined = lhs
        joined += rhs
        return joined
    }

    public static func += (lhs: inout Detail, rhs: Detail) {
        guard lhs.head != nil else {
            lhs = rhs
            return
        }
        rhs.forEachPart { lhs.append($0) }
    }

    /// Equal when the texts are.
    public static func == (lhs: Detail, rhs: Detail) -> Bool { lhs.description == rhs.description }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }

    /// Coded as its text.
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var head: Part?
        var second: Part?
        var rest: [Part] = []
        /// Parts the array is made for: those beyond the first two, and three for prefixes (a
        /// switcher's name, a path step's label: ``Detail/prefix(_:_:)``, ``Detail/prefix(_:)``).
        let capacity: Int

        public init(literalCapacity: Int, interpolationCount: Int) {
            capacity = interpolationCount * 2 + 2
        }

        mutating func append(_ part: Part) {
            if head == nil {
                head = part
            } else if second == nil {
                second = part
            } else {
                if rest.isEmpty { rest.reserveCapacity(capacity) }
                rest.append(part)
            }
        }

        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { append(.text(literal)) }
        }

        public mutating func appendInterpolation(_ value: String) { append(.text(value)) }
        public mutating func appendInterpolation(_ value: ScreenContext) { append(.context(value)) }
        public mutating func appendInterpolation(_ value: Screen) { append(.screen(value)) }
        public mutating func appendInterpolation(_ value: StackRef) { append(.stack(value)) }
        public mutating func appendInterpolation(_ value: NodeID) { append(.id(value)) }
        public mutating func appendInterpolation(_ value: Int) { append(.number(value)) }
        public mutating func appendInterpolation(_ value: ParkReason) { append(.reason(value)) }
        /// Another detail's parts, in place.
        public mutating func appendInterpolation(_ value: Detail) { value.forEachPart { append($0) } }
        /// Contexts separated by `separator`.
        public mutating func appendInterpolation(list value: [ScreenContext], separator: String = ", ") {
            append(.contexts(value, separator: separator))
        }
        /// Anything else, written out at once.
        public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            append(.text(value.description))
        }
    }
}

/// Where rendered text goes: a string, or UTF-8 bytes (a batch's summary written straight into
/// its encoding, with no string made for it).
protocol TextSink {
    mutating func append(_ text: String)
}

extension String: TextSink {}

/// UTF-8 bytes as a ``TextSink``.
struct UTF8Sink: TextSink {
    var bytes: [UInt8]

    mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
}

extension ScreenContext {
    /// ``description`` appended to `text`, without intermediate strings.
    func write(to text: inout some TextSink) {
        text.append(screen)
        guard !info.isEmpty else { return }
        text.append("(")
        if info.count == 1, let (key, value) = info.first {
            text.append(key)
            text.append("=")
            text.append(value)
        } else {
            for (index, key) in info.keys.sorted().enumerated() {
                if index > 0 { text.append(", ") }
                text.append(key)
                text.append("=")
                text.append(info[key]!)
            }
        }
        text.append(")")
    }
}

extension Screen {
    func write(to text: inout some TextSink) {
        context.write(to: &text)
        text.append(id.description)
    }
}
