import TestThreads
import Testing

@testable import NavigatorCore

/// ``NameTable`` and ``RouteIndex`` against the route map they are built from: every name found
/// at its place, every other name not found, whatever its bytes.
@Suite("Route index")
struct RouteIndexTests {
    /// `count` different names of 0 to 40 characters, ASCII and beyond, small and large strings
    /// (`lookups` adds near-misses of them: a byte changed, cut short, one longer).
    static func names(count: Int, seed: UInt64) -> [String] {
        var random = SplitMix64(seed: seed)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789_-é☃".unicodeScalars)
        var names = Set<String>()
        while names.count < count {
            let length = Int(random.next() % 41)
            var name = ""
            for _ in 0..<length { name.unicodeScalars.append(alphabet[Int(random.next() % UInt64(alphabet.count))]) }
            names.insert(name)
        }
        return names.sorted()
    }

    @Test("every name is found at its place, and no other name is found", arguments: [0, 1, 3, 8, 9, 64, 300])
    func lookups(count: Int) async throws {
        try await offPool {
            let names = Self.names(count: count, seed: UInt64(count) &+ 5)
            let table = NameTable(names)
            #expect(table.count == names.count && table.names == names)
            for (index, name) in names.enumerated() {
                #expect(table.index(of: name) == index, "\(name)")
            }
            let known = Set(names)
            var strangers = Self.names(count: 500, seed: UInt64(count) &+ 99)
            for name in names {
                strangers.append(name + "x")
                strangers.append(String(name.dropLast()))
                var bytes = Array(name.utf8)
                guard !bytes.isEmpty else { continue }
                bytes[bytes.count / 2] ^= 1
                strangers.append(String(decoding: bytes, as: UTF8.self))
            }
            strangers.append("")
            var tried = 0
            for name in strangers where !known.contains(name) {
                tried += 1
                #expect(table.index(of: name) == nil, "\(name)")
            }
            #expect(tried > 500)
            // The names stand for any spelling: each looked up as a dictionary keyed by them would.
            let places = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0) })
            for name in strangers { #expect(table.index(of: name) == places[name], "\(name)") }
        }
    }

    @Test(
        "a name is found as a dictionary keyed by the names finds it: another spelling of the same text too, wherever it hashes"
    )
    func spellings() async throws {
        try await offPool {
            // Equal as Swift strings, other bytes: composed and decomposed, combining marks in either
            // order, the Kelvin and Ångström signs (whose canonical forms are K and Å).
            let pairs = [
                ("caf\u{E9}", "cafe\u{301}"), ("a\u{301}\u{316}x", "a\u{316}\u{301}x"),
                ("\u{C5}ngstr", "A\u{30A}ngstr"),
                ("Kelvin", "\u{212A}elvin"), ("\u{212B}", "\u{C5}"),
            ]
            var tried = 0
            for (written, other) in pairs {
                #expect(written == other && Array(written.utf8) != Array(other.utf8))
                for (inMap, asked) in [(written, other), (other, written)] {
                    // Tables of 1 to 64 names, ASCII but for this one: the other spelling's bytes lead
                    // to its slot in some, elsewhere in the others.
                    for count in 0..<64 {
                        let names = Array(
                            Set(Self.names(count: count, seed: UInt64(count)).filter(Self.isASCII) + [inMap])
                        )
                        .sorted()
                        let table = NameTable(names)
                        let places = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0) })
                        #expect(table.index(of: asked) == places[asked] && places[asked] != nil, "\(count) names")
                        #expect(table.index(of: inMap) == places[inMap])
                        tried += 1
                    }
                }
            }
            #expect(tried == pairs.count * 2 * 64)
            // Only ASCII on both sides: a name not found by its bytes is not there.
            let ascii = NameTable(["chat", "home", "settings"])
            #expect(ascii.index(of: "Chat") == nil && ascii.index(of: "chat ") == nil && ascii.index(of: "home") == 1)
        }
    }

    static func isASCII(_ name: String) -> Bool { name.utf8.allSatisfy { $0 < 0x80 } }

    @Test("a name made from a substring is found as the name it spells")
    func otherStorage() {
        let names = ["chat", "conversationSettingsWithALongName", "é-screen"]
        let table = NameTable(names.sorted())
        for name in names {
            let made = String(Substring("<" + name + ">").dropFirst().dropLast())
            #expect(table.index(of: made) == names.sorted().firstIndex(of: name))
        }
    }

    @Test("the index answers what the route map says, screen by screen")
    func againstTheMap() throws {
        let map = RouteMap.demo
        let index = RouteIndex(map)
        #expect(index.names.names == map.screens.keys.sorted())
        #expect(index.screenNames == map.screens.keys.sorted().joined(separator: ", "))
        #expect(index.hasBlocking == map.screens.values.contains { $0.blocking })
        #expect(index.tabNames == map.tabs.map(\.name) && !index.tabNames.isEmpty)
        for (name, spec) in map.screens {
            let entry = try #require(index.entry(name))
            #expect(entry.spec == spec)
            #expect(entry.requiredInfo == spec.requiredInfo)
            #expect(entry.blocking == spec.blocking)
            #expect(entry.tabRoot == map.tab(rootedAt: name)?.name)
            #expect(entry.info.map(\.key) == spec.info.keys.sorted())
            for (key, declared) in spec.info { #expect(entry.declared(key) == declared) }
            #expect(entry.declared("notDeclared") == nil)
            #expect(
                entry.declaredKeys
                    == (spec.info.isEmpty ? "no info" : "one of \(spec.info.keys.sorted().joined(separator: ", "))"))
        }
        #expect(index.entry("noSuchScreen") == nil && index.entry("") == nil)
    }
}
