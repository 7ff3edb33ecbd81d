import NavigatorCore
import Testing

/// The explanation's words, exactly: details are kept as parts and put together in place (a
/// path step's label, a switcher's name, a back stack), and must read as the sentences they were.
@Suite("Explanation details")
struct DetailTests {
    @Test("a path's steps, a back stack and a switcher read exactly as written")
    func sentences() {
        var session = Harness()
        let path = session.show(chat(7), thread(7, 3))
        #expect(
            path.explanation.map(\.description) == [
                "- validate: path chat(conversationId=7) > thread(conversationId=7, threadId=3) is valid",
                "- transition: step 1 of 2, chat(conversationId=7): pushing chat(conversationId=7) onto its home tab chats",
                "* transition: step 2 of 2, thread(conversationId=7, threadId=3): pushing thread(conversationId=7, threadId=3) onto its home tab chats",
                "- path: 2 contexts resolved into one batch of 3 commands",
            ])

        var fresh = Harness()
        let built = fresh.show(thread(1, 2))
        #expect(
            built.explanation.map(\.description) == [
                "- validate: path thread(conversationId=1, threadId=2) is valid",
                "* transition: pushing thread(conversationId=1, threadId=2) onto its home tab chats, with chat(conversationId=1) beneath",
                "- back-stack: built chat(conversationId=1) beneath",
            ])
        fresh.show(ScreenContext("home"))
        let again = fresh.show(chat(1), thread(1, 2))
        #expect(
            again.explanation.map(\.description).dropFirst().first
                == "- switcher: step 1 of 2, chat(conversationId=1): existing screen: chat(conversationId=1)#5 is already in tab chats; bringing it to the top",
            "\(again.explanation.map(\.description))")
        // Step 1 popped the thread off: step 2 pushes it again.
        #expect(
            again.summary
                == "transition: step 2 of 2, thread(conversationId=1, threadId=2): pushing thread(conversationId=1, threadId=2) onto its home tab chats"
        )
    }

    @Test("the sentences of the common steps read exactly as written")
    func commonSentences() {
        var session = Harness()
        var lines = session.show(ScreenContext("home")).explanation.map(\.description)
        lines += session.show(ScreenContext("mediaViewer", ["mediaId": "m1"])).explanation.map(\.description)
        lines += session.show(thread(4, 5)).explanation.map(\.description)
        session.event(.dismissedTo(nil))
        lines += session.show(incomingCall).explanation.map(\.description)
        lines += session.show(chat(3)).explanation.map(\.description)
        let released = session.event(.dismissedTo(nil)).released
        lines += released.flatMap(\.explanation).map(\.description)
        var plain = Harness(resolver: try! Resolver(map: .demo, switchers: []))
        plain.show(chat(6))
        plain.show(thread(6, 1))
        lines += plain.show(chat(6)).explanation.map(\.description)
        #expect(lines == Self.expected, "\(lines)")
    }

    /// The words users and the audit stream read: a change here is a change they see.
    static let expected: [String] = [
        "- validate: path home is valid",
        "- already-shown: home#1 is already on top",
        "* already-shown: home is already on top with the same info; nothing to do",
        "- validate: path mediaViewer(mediaId=m1) is valid",
        "* transition: presenting mediaViewer(mediaId=m1) as a overCurrent modal",
        "- validate: path thread(conversationId=4, threadId=5) is valid",
        "* transition: pushing thread(conversationId=4, threadId=5) onto the top modal #5, with chat(conversationId=4) beneath",
        "- back-stack: built chat(conversationId=4) beneath",
        "- validate: path incomingCall(callId=5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10, caller=Ada) is valid",
        "* transition: presenting incomingCall(callId=5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10, caller=Ada) as a fullScreen modal",
        "- validate: path chat(conversationId=3) is valid",
        "- transition: pushing chat(conversationId=3) onto its home tab chats",
        "* blocking: that would dismiss or cover the blocking incomingCall(callId=5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10, caller=Ada)#10; the intent waits until it is gone",
        "- release: parked 1 ms ago (blocked by incomingCall (modal #9)); trying again",
        "* transition: pushing chat(conversationId=3) onto its home tab chats",
        "- validate: path chat(conversationId=6) is valid",
        "* transition: chat(conversationId=6) is in tab chats; popping to it",
    ]

    @Test("the rarer sentences: the current stack, a refresh, a modal's parent, labels in front of sentences")
    func rarerSentences() {
        var lines: [String] = []
        var plain = Harness(resolver: try! Resolver(map: .demo, switchers: []))
        plain.show(chat(6))
        lines += plain.show(ScreenContext("home")).explanation.map(\.description)
        var session = Harness()
        session.show(chat(1))
        lines += session.show(chat(1, ["draft": "x"])).explanation.map(\.description)
        var fresh = Harness()
        lines += fresh.show(ScreenContext("reactions", ["conversationId": "2"])).explanation.map(\.description)
        var paths = Harness()
        lines += paths.show(ScreenContext("home"), thread(8, 9)).explanation.map(\.description)
        paths.show(incomingCall)
        lines += paths.show(chat(3), thread(3, 4)).explanation.map(\.description)
        var roots = Harness()
        lines += roots.show(ScreenContext("welcome")).explanation.map(\.description)
        var covered = Harness()
        covered.show(ScreenContext("mediaViewer", ["mediaId": "m2"]))
        lines += covered.show(ScreenContext("welcome")).explanation.map(\.description)
        #expect(lines == Self.rarer, "\(lines)")
    }

    static let rarer: [String] = [
        "- validate: path home is valid",
        "* transition: pushing home onto the current tab chats",
        "- validate: path chat(conversationId=1, draft=x) is valid",
        "* already-shown: chat(conversationId=1)#5 is already on top; refreshing its info",
        "- validate: path reactions(conversationId=2) is valid",
        "* transition: showing its parent chat(conversationId=2) first (pushing chat(conversationId=2) onto its home tab chats); presenting reactions(conversationId=2) as a popover modal",
        "- back-stack: built chat(conversationId=2) beneath",
        "- validate: path home > thread(conversationId=8, threadId=9) is valid",
        "- already-shown: step 1 of 2, home: home#1 is already on top",
        "* transition: step 2 of 2, thread(conversationId=8, threadId=9): pushing thread(conversationId=8, threadId=9) onto its home tab chats, with chat(conversationId=8) beneath",
        "- back-stack: step 2 of 2, thread(conversationId=8, threadId=9): built chat(conversationId=8) beneath",
        "- path: 2 contexts resolved into one batch of 3 commands",
        "- validate: path chat(conversationId=3) > thread(conversationId=3, threadId=4) is valid",
        "- transition: step 1 of 2, chat(conversationId=3): pushing chat(conversationId=3) onto its home tab chats",
        "* blocking: step 1 of 2, chat(conversationId=3): that would dismiss or cover the blocking incomingCall(callId=5f0c8a52-3c1d-4b7e-9a57-2f0e6c1d9b10, caller=Ada)#8; the intent waits until it is gone",
        "- validate: path welcome is valid",
        "* transition: welcome becomes the root",
        "- validate: path welcome is valid",
        "* transition: welcome becomes the root; modals are dismissed",
    ]

    @Test("joining details gives the joined text, whatever their parts")
    func joining() {
        let screen = Screen(id: 4, chat(9))
        var detail: Detail = "\(screen) is in \(StackRef.tab("chats"))"
        #expect(detail.description == "chat(conversationId=9)#4 is in tab chats")
        let empty: Detail = ""
        #expect((empty + detail).description == detail.description)
        #expect((detail + empty).description == detail.description)
        detail += "; then \(NodeID.client(3))"
        #expect(detail.description == "chat(conversationId=9)#4 is in tab chats; then #c3")
        let nested: Detail = "(\(detail))"
        #expect(nested.description == "(chat(conversationId=9)#4 is in tab chats; then #c3)")
        #expect(Detail("one").description == "one" && Detail("").isEmpty && !Detail("x").isEmpty)
        #expect(("a" + Detail("b") + "c").description == "abc")
    }
}
