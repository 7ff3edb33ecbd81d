import Locking
import NavigatorCore
import NavigatorWire

/// The names of every route map this process loaded, numbered (``NameIndex``), for sessions
/// packed at rest (``CompactSession``). One table for the process: it only grows, by the names
/// an operator's route maps hold (a reload adds the new map's), so bytes packed under an
/// earlier map still decode. Producers cannot add to it.
enum PackedNames {
    private static let table = Locked(NameIndex())

    static func add(_ map: RouteMap) { table.withLock { $0 = $0.adding(map) } }

    static var current: NameIndex { table.withLock { $0 } }
}
