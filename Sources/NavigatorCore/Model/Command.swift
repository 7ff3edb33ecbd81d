/// One navigation command: the vocabulary shared by the service and client shells.
///
/// Every command names its target by id, and a command whose effect is already there does
/// nothing, so applying a batch twice, or the echo of a change the shell made itself, changes
/// nothing the second time.
public enum Command: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Select a tab of the tab-bar root.
    case selectTab(String)
    /// Push a screen onto a stack (nothing if its id is already in the tree).
    case push(Screen, onto: StackRef)
    /// Present a modal above everything (nothing if a modal with its id is presented).
    case present(Modal)
    /// Pop the stack holding the screen until it is on top.
    case popTo(NodeID)
    /// Pop a stack to its bottom screen.
    case popToRoot(StackRef)
    /// Dismiss every modal above this one; `nil` dismisses them all.
    case dismissTo(NodeID?)
    /// Replace the root; every modal is dismissed.
    case setRoot(Root)
    /// Put a new screen where a screen is. If the new screen is in the tree already, the old
    /// one (if it lingers) is removed, so re-applying a batch never shows both.
    case replace(NodeID, with: Screen)
    /// Merge info into a screen's info.
    case refresh(NodeID, info: [String: String])

    public var description: String {
        switch self {
        case .selectTab(let name): "selectTab(\(name))"
        case .push(let screen, let stack): "push(\(screen) onto \(stack))"
        case .present(let modal):
            "present(\(modal.style) \(modal.id): \(modal.stack.map(\.description).joined(separator: ", ")))"
        case .popTo(let id): "popTo(\(id))"
        case .popToRoot(let stack): "popToRoot(\(stack))"
        case .dismissTo(let id): id.map { "dismissTo(\($0))" } ?? "dismissAll"
        case .setRoot(let root): "setRoot(\(root.summary))"
        case .replace(let id, let screen): "replace(\(id) with \(screen))"
        case .refresh(let id, let info):
            "refresh(\(id), \(info.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")))"
        }
    }
}

extension Root {
    var summary: String {
        switch self {
        case .tabs(let bar): "tabs[\(bar.tabs.map(\.name).joined(separator: ","))] selected \(bar.selected)"
        case .stack(let screens): "stack[\(screens.map(\.description).joined(separator: ", "))]"
        }
    }
}
