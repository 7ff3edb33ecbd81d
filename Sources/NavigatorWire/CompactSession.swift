import NavigatorCore

/// The route map's names (screens, tabs, info keys, guard conditions) numbered from 1, for
/// ``CompactSession``: a tree at rest is mostly these names, over and over, and a number takes
/// one byte where the name took its length.
///
/// Only names an operator wrote in a route map are numbered — never a producer's info values
/// or a shell's own names, which a client could make up without end. A table only grows
/// (``adding(_:)``): bytes encoded with it decode with any later one.
public struct NameIndex: Sendable {
    /// The names, number 1 first.
    public private(set) var names: [String] = []
    private var numbers: [String: UInt64] = [:]
    /// The most names a table keeps; later ones are written out in full.
    public static let limit = 16_384

    /// An empty table: every name written out in full.
    public init() {}

    /// The table with `map`'s names added (those not in it yet, in a stable order).
    public func adding(_ map: RouteMap) -> NameIndex {
        var table = self
        var found: [String] = map.tabs.map(\.name)
        for name in map.screens.keys.sorted() {
            let spec = map.screens[name]!
            found.append(name)
            found += spec.info.keys.sorted()
            if let guardSpec = spec.guardCondition { found.append(guardSpec.condition) }
        }
        for name in found where table.numbers[name] == nil && table.names.count < Self.limit {
            table.names.append(name)
            table.numbers[name] = UInt64(table.names.count)
        }
        return table
    }

    /// The name's number (from 1), or nil if the table does not hold it.
    func number(of name: String) -> UInt64? { numbers[name] }
}

/// A session at rest, packed in memory in fewer bytes than its `StoredSession`: route-map
/// names as numbers of a ``NameIndex``, ids and counts as varints, no field tags. Only for a
/// state that holds nothing but its tree, conditions and seqs (no parked intents, remembered
/// ids or expired intents) — what a session keeps once unchanged for the dedup window. Never
/// written to a file or sent: the state file keeps `StoredSession` bytes, which a first byte
/// of 0 (never the start of a protobuf message, as field 0 does not exist) tells apart.
public enum CompactSession {
    /// The first byte of compact bytes.
    public static let marker: UInt8 = 0

    /// Whether `bytes` are compact bytes (else `StoredSession` bytes).
    public static func isCompact(_ bytes: some Collection<UInt8>) -> Bool { bytes.first == marker }

    /// The compact bytes of `state` at `seq`, or nil when it holds more than a session at rest.
    public static func encode(_ state: SessionState, seq: UInt64, names: NameIndex) -> [UInt8]? {
        guard state.parked.isEmpty, state.recentIntentIDs.isEmpty, state.recentlyExpired.isEmpty else { return nil }
        var writer = CompactWriter(names: names)
        writer.byte(marker)
        writer.varint(seq)
        writer.varint(state.lastServiceSeq)
        let tree = state.tree
        var flags: UInt64 = state.shellReady ? 1 : 0
        if case .tabs = tree.root { flags |= 2 }
        if state.appVersion != nil { flags |= 4 }
        writer.varint(flags)
        if let version = state.appVersion { writer.name(version.text) }
        writer.varint(UInt64(state.conditions.count))
        // In the dictionaries' own order: decoding makes dictionaries again, nothing compares
        // the bytes.
        for (name, value) in state.conditions {
            writer.name(name)
            writer.varint(value ? 1 : 0)
        }
        writer.varint(tree.version)
        writer.varint(tree.lastServiceID)
        switch tree.root {
        case .tabs(let bar):
            writer.varint(UInt64(bar.tabs.count))
            writer.varint(UInt64(bar.tabs.firstIndex { $0.name == bar.selected } ?? 0))
            for tab in bar.tabs {
                writer.name(tab.name)
                writer.stack(tab.stack)
            }
        case .stack(let screens):
            writer.stack(screens)
        }
        writer.varint(UInt64(tree.modals.count))
        for modal in tree.modals {
            writer.id(modal.id)
            writer.varint(UInt64(PresentationStyle.allCases.firstIndex(of: modal.style)!))
            writer.stack(modal.stack)
        }
        return writer.bytes
    }

    /// The state and seq back from ``encode(_:seq:names:)``'s bytes, with the table they were
    /// encoded with or a later one.
    public static func decode(_ bytes: UnsafeRawBufferPointer, names: NameIndex) throws(WireError) -> (
        state: SessionState, seq: UInt64
    ) {
        var reader = CompactReader(bytes: bytes, names: names.names)
        guard try reader.byte() == marker else { throw reader.failure("does not start with the compact marker") }
        let seq = try reader.varint()
        let lastServiceSeq = try reader.varint()
        let flags = try reader.varint()
        var appVersion: AppVersion? = nil
        if flags & 4 != 0 {
            let text = try reader.name()
            guard let version = AppVersion(text) else { throw reader.failure("holds app version \(text)") }
            appVersion = version
        }
        var conditions: [String: Bool] = [:]
        for _ in 0..<(try reader.count()) {
            let name = try reader.name()
            conditions[name] = try reader.varint() != 0
        }
        let version = try reader.varint()
        let lastServiceID = try reader.varint()
        let root: Root
        if flags & 2 != 0 {
            let count = try reader.count()
            let selected = try reader.varint()
            var tabs: [Tab] = []
            tabs.reserveCapacity(count)
            for _ in 0..<count { tabs.append(Tab(name: try reader.name(), stack: try reader.stack())) }
            guard selected < UInt64(tabs.count) else {
                throw reader.failure("selects tab \(selected) of \(tabs.count)")
            }
            root = .tabs(TabBar(tabs: tabs, selected: tabs[Int(selected)].name))
        } else {
            root = .stack(try reader.stack())
        }
        var modals: [Modal] = []
        for _ in 0..<(try reader.count()) {
            let id = try reader.id()
            let style = try reader.varint()
            guard style < UInt64(PresentationStyle.allCases.count) else {
                throw reader.failure("has presentation style \(style)")
            }
            modals.append(Modal(id: id, style: PresentationStyle.allCases[Int(style)], stack: try reader.stack()))
        }
        guard reader.isAtEnd else { throw reader.failure("has bytes after the tree") }
        let tree: ScreenTree
        do {
            tree = try ScreenTree(root: root, modals: modals, version: version, lastServiceID: lastServiceID)
        } catch {
            throw reader.failure("holds a tree that breaks the invariant: \(error.message)")
        }
        let state = SessionState(
            tree: tree, conditions: conditions, lastServiceSeq: lastServiceSeq, shellReady: flags & 1 != 0,
            appVersion: appVersion)
        return (state, seq)
    }
}

private struct CompactWriter {
    let names: NameIndex
    private var writer = ProtoWriter(capacity: 128)

    init(names: NameIndex) { self.names = names }

    var bytes: [UInt8] { writer.bytes }

    mutating func byte(_ value: UInt8) { writer.byte(value) }

    mutating func varint(_ value: UInt64) { writer.varint(value) }

    /// A table name as its number; another as 0, its length and its bytes.
    mutating func name(_ text: String) {
        if let number = names.number(of: text) {
            varint(number)
        } else {
            varint(0)
            literal(text)
        }
    }

    mutating func literal(_ text: String) { writer.lengthPrefixed(text) }

    /// Service ids (below 2^63) and client ids (top bit set) both in a short varint.
    mutating func id(_ id: NodeID) {
        let number = id.rawValue & ~NodeID.clientBit
        varint(number << 1 | (id.isClientAssigned ? 1 : 0))
    }

    mutating func stack(_ screens: [Screen]) {
        varint(UInt64(screens.count))
        for screen in screens {
            id(screen.id)
            name(screen.context.screen)
            varint(UInt64(screen.context.info.count))
            for (key, value) in screen.context.info {
                name(key)
                literal(value)
            }
        }
    }
}

private struct CompactReader {
    let bytes: UnsafeRawBufferPointer
    let names: [String]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    func failure(_ problem: String) -> WireError {
        WireError(.malformed, "a compact session \(problem) (at byte \(offset) of \(bytes.count))")
    }

    mutating func byte() throws(WireError) -> UInt8 {
        guard offset < bytes.count else { throw failure("ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws(WireError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte()
            guard shift < 64 else { throw failure("has a varint longer than ten bytes") }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    /// A count of things that follow, each at least a byte: never more than the bytes left.
    mutating func count() throws(WireError) -> Int {
        let count = try varint()
        guard count <= UInt64(bytes.count - offset) else { throw failure("counts \(count) items in fewer bytes") }
        return Int(count)
    }

    mutating func literal() throws(WireError) -> String {
        let length = try count()
        defer { offset += length }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]), as: UTF8.self)
    }

    mutating func name() throws(WireError) -> String {
        let number = try varint()
        guard number != 0 else { return try literal() }
        guard number <= UInt64(names.count) else { throw failure("names #\(number) of a table of \(names.count)") }
        return names[Int(number - 1)]
    }

    mutating func id() throws(WireError) -> NodeID {
        let value = try varint()
        let number = value >> 1
        return NodeID(rawValue: value & 1 == 1 ? number | NodeID.clientBit : number)
    }

    mutating func stack() throws(WireError) -> [Screen] {
        let count = try count()
        var screens: [Screen] = []
        screens.reserveCapacity(count)
        for _ in 0..<count {
            let id = try id()
            let screen = try name()
            var info: [String: String] = [:]
            let entries = try self.count()
            if entries > 0 { info.reserveCapacity(entries) }
            for _ in 0..<entries {
                let key = try name()
                info[key] = try literal()
            }
            screens.append(Screen(id: id, ScreenContext(screen, info)))
        }
        return screens
    }
}
