import Foundation
import Testing

@testable import NavigatorCore

/// A detail's parts put together in place (``Detail/prefix(_:)``, ``Detail/prefix(_:_:)``,
/// ``Detail/append(_:)``) read as the same details joined with `+`, whatever their layout.
@Suite("Explanation details, put together in place")
struct DetailPartsTests {
    let screen = Screen(id: 4, chat(9))

    @Test("a prefix on an empty, a one-part and a many-part detail reads as the joined text")
    func prefixes() {
        var empty: Detail = ""
        empty.prefix("existing screen", ": ")
        #expect(empty.description == "existing screen: ")

        var sentence = Detail.sentence(.alreadyOnTop(screen))
        sentence.prefix("existing screen", ": ")
        #expect(sentence.description == "existing screen: chat(conversationId=9)#4 is already on top")

        var interpolated: Detail = "\(screen) is already in \(StackRef.tab("chats")); bringing it to the top"
        interpolated.prefix("existing screen", ": ")
        interpolated.prefix(.pathStep(2, of: 3, chat(9)))
        #expect(
            interpolated.description
                == "step 2 of 3, chat(conversationId=9): existing screen: chat(conversationId=9)#4 is already in tab chats; bringing it to the top"
        )

        // A label of several parts, and an empty one.
        var labelled = Detail.sentence(.built([chat(1)]))
        labelled.prefix("\(NodeID(7)) and \(NodeID.client(2)): ")
        #expect(labelled.description == "#7 and #c2: built chat(conversationId=1) beneath")
        var unlabelled = Detail.sentence(.built([chat(1)]))
        unlabelled.prefix("")
        #expect(unlabelled.description == "built chat(conversationId=1) beneath")
        var onNothing: Detail = ""
        onNothing.prefix(.pathStep(1, of: 2, chat(9)))
        #expect(onNothing.description == "step 1 of 2, chat(conversationId=9): ")
    }

    @Test("appending to a sentence, and joining, keep the order; equal texts are equal details")
    func appendsAndEquality() throws {
        var detail = Detail.sentence(.pushing(chat(5), onto: .current(.root)))
        detail.append(.text(", with "))
        detail.append(.contexts([chat(1), chat(2)], separator: ", "))
        detail.append(.text(" beneath"))
        let text =
            "pushing chat(conversationId=5) onto the current root stack, with chat(conversationId=1), chat(conversationId=2) beneath"
        #expect(detail.description == text)
        #expect(detail == Detail(text) && detail.hashValue == Detail(text).hashValue)
        var joined = Detail.sentence(.presenting(chat(5), .sheet))
        joined += "; \(screen)"
        #expect(joined.description == "presenting chat(conversationId=5) as a sheet modal; chat(conversationId=9)#4")
        // Coded as its text.
        let decoded = try JSONDecoder().decode(Detail.self, from: JSONEncoder().encode(detail))
        #expect(decoded.description == text)
        let retrying = Detail.sentence(.retrying(parkedFor: 2_500_000_000, .notReady))
        #expect(retrying.description == "parked 2 s ago (waiting for the shell to be ready); trying again")
    }
}
