/// How large one session's tree may grow. Checked with the rest of the tree's invariant after
/// every change (``ScreenTree/apply(_:within:)``), whoever asked for the change.
public struct TreeLimits: Hashable, Sendable {
    /// Modals presented at once.
    public var maxModals: Int
    /// Screens in one stack (a tab's, the root's or a modal's).
    public var maxStackDepth: Int
    /// Tabs of a tab-bar root.
    public var maxTabs: Int
    /// Info entries of one screen.
    public var maxInfoEntries: Int
    /// Bytes (UTF-8) of a screen name, a tab name, an info key or an info value.
    public var maxTextBytes: Int
    /// Bytes (UTF-8) of every screen name, tab name, info key and info value of the tree
    /// together: the others bound each part, this the whole (the parts' limits multiplied out
    /// allow 16 tabs and 16 modals of 64 screens, each with 32 entries of 1 KiB).
    public var maxTreeBytes: Int

    public init(
        maxModals: Int = 16, maxStackDepth: Int = 64, maxTabs: Int = 16, maxInfoEntries: Int = 32,
        maxTextBytes: Int = 1024, maxTreeBytes: Int = 65_536
    ) {
        self.maxModals = maxModals
        self.maxStackDepth = maxStackDepth
        self.maxTabs = maxTabs
        self.maxInfoEntries = maxInfoEntries
        self.maxTextBytes = maxTextBytes
        self.maxTreeBytes = maxTreeBytes
    }

    /// No size limits: only the structural invariant (what a shell mirroring a tree uses).
    public static let none = TreeLimits(
        maxModals: .max, maxStackDepth: .max, maxTabs: .max, maxInfoEntries: .max, maxTextBytes: .max,
        maxTreeBytes: .max)
}

/// The measures of a tree that ``TreeLimits`` bound.
public struct TreeSize: Hashable, Sendable {
    public var modals = 0
    public var deepestStack = 0
    public var tabs = 0
    public var mostInfoEntries = 0
    public var longestText = 0
    /// Bytes of every name, key and value of the tree.
    public var textBytes = 0

    /// The measures over their limit, each with what to tell a person.
    public func excess(_ limits: TreeLimits) -> [(KeyPath<TreeSize, Int>, String)] {
        var over: [(KeyPath<TreeSize, Int>, String)] = []
        if modals > limits.maxModals {
            over.append((\.modals, "\(modals) modals; expected at most \(limits.maxModals) (maxModals)"))
        }
        if deepestStack > limits.maxStackDepth {
            over.append(
                (
                    \.deepestStack,
                    "a stack of \(deepestStack) screens; expected at most \(limits.maxStackDepth) (maxStackDepth)"
                ))
        }
        if tabs > limits.maxTabs { over.append((\.tabs, "\(tabs) tabs; expected at most \(limits.maxTabs) (maxTabs)")) }
        if mostInfoEntries > limits.maxInfoEntries {
            over.append(
                (
                    \.mostInfoEntries,
                    "a screen with \(mostInfoEntries) info entries; expected at most \(limits.maxInfoEntries) (maxInfoEntries)"
                ))
        }
        if longestText > limits.maxTextBytes {
            over.append(
                (
                    \.longestText,
                    "a name, key or value of \(longestText) bytes; expected at most \(limits.maxTextBytes) (maxTextBytes)"
                ))
        }
        if textBytes > limits.maxTreeBytes {
            over.append(
                (
                    \.textBytes,
                    "\(textBytes) bytes of names, keys and values in the tree; expected at most \(limits.maxTreeBytes) (maxTreeBytes)"
                ))
        }
        return over
    }
}
