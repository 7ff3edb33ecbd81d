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
        // Parts put in front of and after one another, across the two held in the value and
        // the array: each order reads as the text joined.
        var parts = Detail.sentence(.alreadyOnTop(screen))
        parts.prefix(.pathStep(1, of: 2, chat(9)))
        #expect(parts.rest.isEmpty)  // a label on a one-part detail makes no array
        parts.append(.text("; "))
        parts.append(.id(NodeID(3)))
        parts.prefix("custom", ": ")
        #expect(
            parts.description
                == "custom: step 1 of 2, chat(conversationId=9): chat(conversationId=9)#4 is already on top; #3")
        var onNothing: Detail = ""
        onNothing.prefix(.pathStep(1, of: 2, chat(9)))
        #expect(onNothing.description == "step 1 of 2, chat(conversationId=9): ")
    }

    @Test("the built-in switchers' sentences name them as their names read, with no prefix put in front")
    func builtInSwitcherSentences() {
        #expect(ExistingScreenSwitcher().name == ExistingScreenSwitcher.builtInName)
        #expect(TabRootSwitcher().name == TabRootSwitcher.builtInName)
        let existing = Detail.sentence(.alreadyIn(screen, .tab("chats")))
        #expect(existing.namesItsSwitcher)
        #expect(
            existing.description
                == "existing screen: chat(conversationId=9)#4 is already in tab chats; bringing it to the top")
        let tabRoot = Detail.sentence(.tabRoot(screen: "chatList", tab: "chats", restoringTabBar: false))
        #expect(tabRoot.namesItsSwitcher)
        #expect(
            tabRoot.description == "tab root: chatList is the root of tab chats; selecting it and popping to its root")
        let restoring = Detail.sentence(.tabRoot(screen: "home", tab: "home", restoringTabBar: true))
        #expect(restoring.description == "tab root: home is the root of tab home; restoring the tab bar")
        var labelled = existing
        labelled.prefix(.pathStep(2, of: 3, chat(9)))
        #expect(!labelled.namesItsSwitcher)
        #expect(!Detail.sentence(.alreadyOnTop(screen)).namesItsSwitcher)
    }

    @Test("appending to a sentence, and joining, keep the order; equal texts are equal details")
    func appendsAndEquality() throws {
        var detail = Detail.sentence(.pushing(chat(5), onto: .current(.root), beneath: []))
        detail.append(.text(", with "))
        detail.append(.contexts([chat(1), chat(2)], separator: ", "))
        detail.append(.text(" beneath"))
        let text =
            "pushing chat(conversationId=5) onto the current root stack, with chat(conversationId=1), chat(conversationId=2) beneath"
        #expect(detail.description == text)
        // The same words from the sentence with its parents: a push's detail is one part.
        let built = Detail.sentence(.pushing(chat(5), onto: .current(.root), beneath: [chat(1), chat(2)]))
        #expect(built.description == text && built.second == nil)
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
