/// The route map's screen names, interned when the map loads: each name's place in the map's
/// sorted names. Looking a name up hashes its bytes (FNV-1a) into a table of places, with no
/// `Hasher` and no dictionary on the way to a name the map has as it is spelled.
///
/// Names are equal as Swift strings are, as in the dictionaries this table replaced: by canonical
/// equivalence, so a decomposed é is the composed one and the Kelvin sign is K. The hash is of the
/// bytes, so a name not found byte for byte is looked up again in a dictionary, unless it and
/// every name of the map are ASCII (an ASCII string equals only itself among ASCII strings).
///
/// The hash has no seed, and that is safe here: the table is built once from the route map and
/// nothing a producer sends is ever inserted, so a lookup probes at most the longest run of
/// taken slots, which the map's own names decide (the table is at most half full).
struct NameTable: Sendable {
    /// The names, sorted, no two equal: a name's place here is its index.
    let names: [String]
    /// Index into ``names`` per slot, -1 where empty; a power of two long.
    private let slots: [Int32]
    /// Whether every name is ASCII.
    private let allASCII: Bool
    /// Each name's place, for a name the table does not find byte for byte.
    private let places: [String: Int]

    init(_ sortedNames: [String]) {
        names = sortedNames
        var size = 8
        while size < sortedNames.count * 2 { size *= 2 }
        var slots = [Int32](repeating: -1, count: size)
        for (index, name) in sortedNames.enumerated() {
            var slot = Int(truncatingIfNeeded: Self.hash(name)) & (size - 1)
            while slots[slot] >= 0 { slot = (slot + 1) & (size - 1) }
            slots[slot] = Int32(index)
        }
        self.slots = slots
        allASCII = sortedNames.allSatisfy(Self.isASCII)
        places = Dictionary(sortedNames.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    var count: Int { names.count }

    /// The place of `name`, or nil if the map has no such name.
    func index(of name: String) -> Int? {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: Self.hash(name)) & mask
        while true {
            let index = Int(slots[slot])
            if index < 0 { break }
            if names[index] == name { return index }
            slot = (slot + 1) & mask
        }
        // Not where its bytes lead: another spelling of a name may still equal it.
        if allASCII && Self.isASCII(name) { return nil }
        return places[name]
    }

    static func isASCII(_ name: String) -> Bool { name.utf8.allSatisfy { $0 < 0x80 } }

    /// FNV-1a (64 bits) of the name's UTF-8 bytes.
    static func hash(_ name: String) -> UInt64 {
        @inline(__always) func fnv(_ bytes: some Sequence<UInt8>) -> UInt64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return hash
        }
        // Native and small strings (every name a map or a producer gives) are contiguous.
        return name.utf8.withContiguousStorageIfAvailable { fnv($0) } ?? fnv(name.utf8)
    }
}

/// Facts about the route map that resolution asks for again and again, computed once and kept
/// by each screen's interned place (``NameTable``). A class, so handing it around costs one
/// reference count, not a copy of every spec's fields.
final class RouteIndex: Sendable {
    /// One screen's spec and what is derived from it, behind a reference: reading one field of
    /// it retains one field, where `map.screens[name]?.field` copies the whole spec (a dozen
    /// reference counts) first.
    final class Entry: Sendable {
        let spec: ScreenSpec
        /// The declared info keys, sorted, with their specs: a screen declares a few, so looking
        /// one up compares them in turn rather than hashing the key.
        let info: [DeclaredInfo]
        /// The required info keys, sorted (``ScreenSpec/requiredInfo``).
        let requiredInfo: [String]
        /// The declared info keys, for errors: `one of a, b` or `no info`.
        let declaredKeys: String
        /// Whether a modal showing this screen must not be dismissed or covered.
        let blocking: Bool
        /// The tab whose root this screen is, if any (the first such tab).
        let tabRoot: String?

        init(_ spec: ScreenSpec, tabRoot: String?) {
            self.spec = spec
            info = spec.info.keys.sorted().map { DeclaredInfo(key: $0, spec: spec.info[$0]!) }
            requiredInfo = spec.requiredInfo
            declaredKeys = info.isEmpty ? "no info" : "one of \(info.map(\.key).joined(separator: ", "))"
            blocking = spec.blocking
            self.tabRoot = tabRoot
        }

        /// The declaration of an info key, or nil if the screen does not declare it.
        func declared(_ key: String) -> InfoSpec? {
            for entry in info where entry.key == key { return entry.spec }
            return nil
        }
    }

    struct DeclaredInfo: Sendable {
        let key: String
        let spec: InfoSpec
    }

    let names: NameTable
    /// By the screen's place in ``names``.
    let entries: [Entry]
    /// Every screen's name, sorted, for errors.
    let screenNames: String
    /// Whether any screen is blocking (when none is, no modal is looked at).
    let hasBlocking: Bool
    /// The map's tab names, in order (asked for every resolution: reading them through
    /// `map.tabs` would copy the map's fields first).
    let tabNames: [String]

    init(_ map: RouteMap) {
        names = NameTable(map.screens.keys.sorted())
        var tabRoots: [String: String] = [:]
        for tab in map.tabs where tabRoots[tab.root] == nil { tabRoots[tab.root] = tab.name }
        entries = names.names.map { Entry(map.screens[$0]!, tabRoot: tabRoots[$0]) }
        screenNames = names.names.joined(separator: ", ")
        hasBlocking = entries.contains { $0.blocking }
        tabNames = map.tabs.map(\.name)
    }

    /// The entry of the screen named `name`, or nil if the map has no such screen.
    func entry(_ name: String) -> Entry? { names.index(of: name).map { entries[$0] } }
}
