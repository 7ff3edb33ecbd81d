import Testing

@testable import NavigatorCore

/// ``InlineList`` against `Array`, across the line between the four elements kept in the value
/// and those after, and through a URL's segments.
@Suite("Inline lists")
struct InlineListTests {
    @Test("a list appended to reads back as an array appended to alike, at every length up to 12")
    func againstArray() {
        var random = SplitMix64(seed: 7)
        var list = InlineList<Int>()
        var array: [Int] = []
        #expect(list.isEmpty && Array(list) == [])
        for _ in 0..<12 {
            let value = Int(random.next() % 1000)
            list.append(value)
            array.append(value)
            #expect(list.count == array.count && Array(list) == array && Array(list.reversed()) == array.reversed())
            #expect(list.last == array.last && list.first == array.first && list.indices == array.indices)
        }
        #expect(Array(list[3...6]) == Array(array[3...6]))
        // Taken out from the end, as the spare arrays are, and appended to again.
        for round in 0..<2 {
            while !array.isEmpty {
                #expect(list.removeLast() == array.removeLast(), "round \(round)")
                #expect(list.count == array.count && Array(list) == array)
            }
            for value in 0..<(round == 0 ? 6 : 3) {
                list.append(value)
                array.append(value)
            }
            #expect(Array(list) == array)
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
}
