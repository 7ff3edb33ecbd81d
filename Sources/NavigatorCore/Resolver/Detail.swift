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
    }

    /// The label of one context's steps in a longer path: `step 2 of 3, chat(conversationId=42): `.
    static func pathStep(_ number: Int, of count: Int, _ context: ScreenContext) -> Detail {
        var detail = Detail("")
        detail.parts.append(.pathStep(number, of: count, context))
        return detail
    }

    /// The parts, in one array. (Held inline in the value, up to six, they saved an allocation
    /// each but made every copy of a step or a plan a quarter of a kilobyte: the resolver ran
    /// 15 % slower. A nested detail or a path step's label is one part or is flattened in.)
    var parts: [Part] = []

    public init(_ text: String) { if !text.isEmpty { parts.append(.text(text)) } }

    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: StringInterpolation) { parts = stringInterpolation.parts }

    public var isEmpty: Bool { parts.isEmpty }

    public var description: String {
        var text = ""
        write(to: &text)
        return text
    }

    func write(to text: inout String) {
        for part in parts {
            switch part {
            case .text(let string): text += string
            case .context(let context): context.write(to: &text)
            case .screen(let screen): screen.write(to: &text)
            case .stack(let ref): text += ref.description
            case .id(let id): text += id.description
            case .number(let number): text += String(number)
            case .contexts(let contexts, let separator):
                for (index, context) in contexts.enumerated() {
                    if index > 0 { text += separator }
                    context.write(to: &text)
                }
            case .reason(let reason): text += reason.description
            case .pathStep(let number, let count, let context):
                text += "step \(number) of \(count), "
                context.write(to: &text)
                text += ": "
            }
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
        lhs.parts += rhs.parts
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
        var parts: [Part] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            parts.reserveCapacity(interpolationCount * 2 + 1)
        }

        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { parts.append(.text(literal)) }
        }

        public mutating func appendInterpolation(_ value: String) { parts.append(.text(value)) }
        public mutating func appendInterpolation(_ value: ScreenContext) { parts.append(.context(value)) }
        public mutating func appendInterpolation(_ value: Screen) { parts.append(.screen(value)) }
        public mutating func appendInterpolation(_ value: StackRef) { parts.append(.stack(value)) }
        public mutating func appendInterpolation(_ value: NodeID) { parts.append(.id(value)) }
        public mutating func appendInterpolation(_ value: Int) { parts.append(.number(value)) }
        public mutating func appendInterpolation(_ value: ParkReason) { parts.append(.reason(value)) }
        /// Another detail's parts, in place.
        public mutating func appendInterpolation(_ value: Detail) { parts += value.parts }
        /// Contexts separated by `separator`.
        public mutating func appendInterpolation(list value: [ScreenContext], separator: String = ", ") {
            parts.append(.contexts(value, separator: separator))
        }
        /// Anything else, written out at once.
        public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            parts.append(.text(value.description))
        }
    }
}

extension ScreenContext {
    /// ``description`` appended to `text`, without intermediate strings.
    func write(to text: inout String) {
        text += screen
        guard !info.isEmpty else { return }
        text += "("
        if info.count == 1, let (key, value) = info.first {
            text += key
            text += "="
            text += value
        } else {
            for (index, key) in info.keys.sorted().enumerated() {
                if index > 0 { text += ", " }
                text += key
                text += "="
                text += info[key]!
            }
        }
        text += ")"
    }
}

extension Screen {
    func write(to text: inout String) {
        context.write(to: &text)
        text += id.description
    }
}
