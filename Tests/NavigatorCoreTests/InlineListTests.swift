import Testing

@testable import NavigatorCore

/// ``InlineList`` against `Array`: the same elements in the same order, whatever was done to
/// both, across the line between the four kept in the value and those after.
@Suite("Inline lists")
struct InlineListTests {
    @Test("random appends, writes, reversals and removals leave the list equal to an array doing the same")
    func againstArray() {
        var random = SplitMix64(seed: 7)
        for round in 0..<500 {
            var list = InlineList<Int>()
            var array: [Int] = []
            for _ in 0..<Int(random.next() % 24) {
                switch random.next() % 5 {
                case 0, 1:
                    let value = Int(random.next() % 1000)
                    list.append(value)
                    array.append(value)
                case 2 where !array.isEmpty:
                    let index = Int(random.next() % UInt64(array.count))
                    let value = Int(random.next() % 1000)
                    list[index] = value
                    array[index] = value
                case 3:
                    list.reverse()
                    array.reverse()
                default:
                    let more = (0..<Int(random.next() % 6)).map { _ in Int(random.next() % 1000) }
                    list += more
                    array += more
                }
                #expect(list.count == array.count && list.isEmpty == array.isEmpty, "round \(round)")
                #expect(Array(list) == array, "round \(round)")
                #expect(list == array && list == InlineList(array), "round \(round)")
                #expect(list.last == array.last && list.first == array.first)
            }
        }
    }

    @Test("a URL's segments are split into the list as `split(separator:)` splits them")
    func urlSegments() {
        var random = SplitMix64(seed: 11)
        let pieces = ["/", "/", "a", "chat", "42", "%20", "?", "x=1", "&", "é"]
        for _ in 0..<2000 {
            let rest = (0..<Int(random.next() % 12)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
                .joined()
            let url = "app://" + rest
            let path = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let expected = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            #expect(URLPattern.Parsed(url)?.segments.map(String.init) == expected, "\(url)")
        }
    }

    @Test("equal lists hash alike; lists that differ by length or an element are not equal")
    func equality() {
        let four: InlineList = [1, 2, 3, 4]
        let five: InlineList = [1, 2, 3, 4, 5]
        #expect(four != five && five != [1, 2, 3, 4, 6] && four == InlineList([1, 2, 3, 4]))
        #expect(Set([five, InlineList([1, 2, 3, 4, 5]), four]).count == 2)
        #expect(five.description == "[1, 2, 3, 4, 5]" && InlineList<Int>().description == "[]")
        #expect(Array(five[3...]) == [4, 5] && five.indices == 0..<5)
    }
}
