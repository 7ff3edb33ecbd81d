/// A short list whose first four elements are kept in the value itself: a list of four or fewer
/// makes no array (no allocation); a fifth and later go to one array.
///
/// For a short list of small elements: a URL's segments while one intent is resolved, the changes
/// of a batch applied in place (``ScreenTree``'s undo log), and the few spare arrays a worker
/// keeps (``SpareArrays``, a stack of array references). Not for what a
/// resolution returns (its commands, its explanation): copying four commands or four steps in
/// the value, with every reference they hold, costs more than the array it saves, and even a
/// push's chain of parents was slower this way (BENCHMARKS.md, "Resolver alone"); measure before
/// using it elsewhere. Only what those uses need: `append`, `removeLast`, and reading by `Int`
/// from 0 as a random-access collection.
struct InlineList<Element> {
    private var e0: Element?
    private var e1: Element?
    private var e2: Element?
    private var e3: Element?
    /// The fifth element and those after it.
    private var more: [Element] = []
    private(set) var count = 0

    init() {}

    mutating func append(_ element: Element) {
        switch count {
        case 0: e0 = element
        case 1: e1 = element
        case 2: e2 = element
        case 3: e3 = element
        default: more.append(element)
        }
        count += 1
    }

    /// Takes the last element out (moved, not copied: the list no longer holds it).
    mutating func removeLast() -> Element {
        precondition(count > 0, "removeLast from an empty InlineList")
        count -= 1
        switch count {
        case 0: return e0.take().unsafelyUnwrapped
        case 1: return e1.take().unsafelyUnwrapped
        case 2: return e2.take().unsafelyUnwrapped
        case 3: return e3.take().unsafelyUnwrapped
        default: return more.removeLast()
        }
    }
}

extension InlineList: RandomAccessCollection {
    typealias Index = Int
    typealias Indices = Range<Int>

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "InlineList index \(position) out of range")
        switch position {
        case 0: return e0.unsafelyUnwrapped
        case 1: return e1.unsafelyUnwrapped
        case 2: return e2.unsafelyUnwrapped
        case 3: return e3.unsafelyUnwrapped
        default: return more[position - 4]
        }
    }
}

extension InlineList: Sendable where Element: Sendable {}
