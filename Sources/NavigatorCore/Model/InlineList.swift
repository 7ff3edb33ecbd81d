/// A short list whose first four elements are kept in the value itself: a list of four or fewer
/// makes no array (no allocation); a fifth and later go to one array.
///
/// For a short list of small elements that lives only while one intent is resolved: a URL's
/// segments. Not for what a resolution returns (its commands, its explanation): copying four
/// commands or four steps in the value, with every reference they hold, costs more than the
/// array it saves, and even a push's chain of parents was slower this way (BENCHMARKS.md,
/// "Resolver alone"); measure before using it elsewhere. A collection like an array otherwise:
/// random access by `Int` from 0, `append`, equal when the elements are, written from an array
/// literal.
struct InlineList<Element> {
    var e0: Element?
    var e1: Element?
    var e2: Element?
    var e3: Element?
    /// The fifth element and those after it.
    var more: [Element]
    var storedCount: Int

    init() {
        more = []
        storedCount = 0
    }

    init(_ elements: some Sequence<Element>) {
        self.init()
        for element in elements { append(element) }
    }

    mutating func append(_ element: Element) {
        switch storedCount {
        case 0: e0 = element
        case 1: e1 = element
        case 2: e2 = element
        case 3: e3 = element
        default: more.append(element)
        }
        storedCount += 1
    }

    mutating func append(contentsOf elements: some Sequence<Element>) {
        for element in elements { append(element) }
    }

    static func += (list: inout InlineList, elements: some Sequence<Element>) {
        list.append(contentsOf: elements)
    }
}

extension InlineList: RandomAccessCollection, MutableCollection {
    typealias Index = Int
    typealias Indices = Range<Int>

    var startIndex: Int { 0 }
    var endIndex: Int { storedCount }
    var count: Int { storedCount }
    var isEmpty: Bool { storedCount == 0 }
    var indices: Range<Int> { 0..<storedCount }
    func index(after i: Int) -> Int { i + 1 }
    func index(before i: Int) -> Int { i - 1 }

    subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < storedCount, "InlineList index \(position) out of range")
            switch position {
            case 0: return e0.unsafelyUnwrapped
            case 1: return e1.unsafelyUnwrapped
            case 2: return e2.unsafelyUnwrapped
            case 3: return e3.unsafelyUnwrapped
            default: return more[position - 4]
            }
        }
        set {
            precondition(position >= 0 && position < storedCount, "InlineList index \(position) out of range")
            switch position {
            case 0: e0 = newValue
            case 1: e1 = newValue
            case 2: e2 = newValue
            case 3: e3 = newValue
            default: more[position - 4] = newValue
            }
        }
    }
}

extension InlineList: ExpressibleByArrayLiteral {
    init(arrayLiteral elements: Element...) {
        self.init()
        for element in elements { append(element) }
    }
}

extension InlineList: Equatable where Element: Equatable {
    static func == (lhs: InlineList, rhs: InlineList) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }

    /// Equal to an array with the same elements.
    static func == (lhs: InlineList, rhs: [Element]) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }
}

extension InlineList: Hashable where Element: Hashable {
    func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for element in self { hasher.combine(element) }
    }
}

extension InlineList: Sendable where Element: Sendable {}

extension InlineList: CustomStringConvertible {
    var description: String { Array(self).description }
}
