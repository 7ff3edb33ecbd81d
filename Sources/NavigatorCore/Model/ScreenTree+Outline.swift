extension ScreenTree {
    /// The tree as text, one stack a line, bottom of the tree first; `*` marks the selected
    /// tab, `>` separates screens bottom to top:
    ///
    ///     tab home: home#1
    ///     *tab chats: chatList#3 > chat(conversationId=42)#5
    ///     modal #6 sheet: editProfile#7
    public var outline: String {
        var lines: [String] = []
        switch root {
        case .tabs(let bar):
            for tab in bar.tabs {
                lines.append("\(tab.name == bar.selected ? "*" : "")tab \(tab.name): \(Self.line(tab.stack))")
            }
        case .stack(let screens):
            lines.append("root: \(Self.line(screens))")
        }
        for modal in modals {
            lines.append("modal \(modal.id) \(modal.style.rawValue): \(Self.line(modal.stack))")
        }
        return lines.joined(separator: "\n")
    }

    private static func line(_ screens: [Screen]) -> String {
        screens.map(\.description).joined(separator: " > ")
    }
}
