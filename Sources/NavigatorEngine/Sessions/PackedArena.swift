import Synchronization
import ZeroMQ

/// A block of packed records: memory mapped for it alone (``Heap/mapPages(_:)``), written once
/// per record and never overwritten, so a reader holding a record copied out of its shard's
/// lock reads its bytes while the shard's writer appends others. Kept alive by the records
/// that point into it (and by its arena while it is the one being filled); unmapped when the
/// last goes.
final class PackedBlock: @unchecked Sendable {
    // @unchecked: `base` and `capacity` never change; the bytes of a range are written once,
    // under the shard's lock, before any record pointing at them is stored or copied; `live` is
    // atomic.
    let base: UnsafeMutableRawPointer
    let capacity: Int
    private let mapped: Bool
    /// Bytes of records still kept here (records unpacked, dropped or moved no longer count).
    let live = Atomic<Int>(0)

    init(capacity requested: Int) {
        let pages = (requested + Heap.pageSize - 1) / Heap.pageSize * Heap.pageSize
        if let pointer = Heap.mapPages(pages) {
            (base, capacity, mapped) = (pointer, pages, true)
        } else {
            (base, capacity, mapped) = (.allocate(byteCount: requested, alignment: 16), requested, false)
        }
    }

    deinit {
        if mapped { Heap.unmapPages(base, capacity) } else { base.deallocate() }
    }
}

/// Where a packed record's bytes are: a range of a ``PackedBlock``.
struct PackedBytes: Sendable {
    let block: PackedBlock
    let offset: Int32
    let count: Int32

    /// Runs `body` on the bytes where they are (the block kept alive meanwhile).
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withExtendedLifetime(block) { body(UnsafeRawBufferPointer(start: block.base + Int(offset), count: Int(count))) }
    }

    /// The bytes, copied into an array (to decode or write them).
    var array: [UInt8] { withBytes { [UInt8]($0) } }

    /// The record no longer keeps these bytes (unpacked, removed, packed again elsewhere).
    func release() { block.live.subtract(Int(count), ordering: .relaxed) }
}

/// The packed records of one shard, in blocks of their own instead of an allocation each.
///
/// Sessions at rest are most of a long-running service's sessions, and each kept its packed
/// bytes in an allocation of its own among everything else malloc hands out; once the live
/// states around them were freed (sessions packed, parked intents expired after a restart), the
/// pages stayed in RSS for a few records each — 1.5 KB of RSS a session at rest for 0.7 KB in
/// use (BENCHMARKS.md, "Memory per active-screen tree"). Here records packed together lie
/// together, and blocks a quarter of whose bytes are no longer used are compacted
/// (``Records/compact(_:)``).
/// Used under its shard's lock only.
struct PackedArena {
    /// Bytes a block holds; a record larger than a quarter of it gets a block of its own size.
    static let blockSize = 256 << 10

    /// The block being filled.
    private var filling: PackedBlock?
    /// Bytes used of it.
    private var used = 0
    /// The other blocks that records may still point into.
    private var sealed: [PackedBlock] = []

    /// Keeps `bytes`, returning where.
    mutating func store(_ bytes: UnsafeRawBufferPointer) -> PackedBytes {
        let count = bytes.count
        let block: PackedBlock
        let offset: Int
        if count > Self.blockSize / 4 {
            block = PackedBlock(capacity: count)  // its own
            sealed.append(block)
            offset = 0
        } else {
            if filling == nil || used + count > filling!.capacity {
                if let full = filling { sealed.append(full) }
                filling = PackedBlock(capacity: Self.blockSize)
                used = 0
            }
            block = filling!
            offset = used
            used += count
        }
        if count > 0 { (block.base + offset).copyMemory(from: bytes.baseAddress!, byteCount: count) }
        block.live.add(count, ordering: .relaxed)
        return PackedBytes(block: block, offset: Int32(offset), count: Int32(count))
    }

    mutating func store(_ bytes: [UInt8]) -> PackedBytes { bytes.withUnsafeBytes { store($0) } }

    /// Bytes mapped, and bytes of records kept in them.
    var size: (mapped: Int, live: Int) {
        (sealed + (filling.map { [$0] } ?? [])).reduce((0, 0)) {
            ($0.0 + $1.capacity, $0.1 + $1.live.load(ordering: .relaxed))
        }
    }

    /// Lets go of the filled blocks no record keeps anything in (unmapped once no copy of a
    /// record points into them either).
    mutating func prune() { sealed.removeAll { $0.live.load(ordering: .relaxed) == 0 } }

    /// ``prune()``, then the filled blocks to compact (``Records/compact(_:)``): those less than
    /// three quarters used, if moving their records would give back at least a block's worth
    /// (moving at most three bytes for each byte freed). `atRest` (nothing else is being written)
    /// instead takes every filled block an eighth free or more, counting the room left in the
    /// block being filled, which the moved records fill first: while the service is busy, the
    /// blocks each hold up to a quarter free for good (20,000 sessions after a 20-minute load
    /// kept 8 blocks for 5 blocks' worth of records, BENCHMARKS.md); at rest the records lie in
    /// as few blocks as they fill, give or take an eighth of each.
    mutating func sparse(atRest: Bool = false) -> Set<ObjectIdentifier> {
        prune()
        var sparse: Set<ObjectIdentifier> = []
        var freed = atRest ? (filling.map { $0.capacity - used } ?? 0) : 0
        for block in sealed {
            let live = block.live.load(ordering: .relaxed)
            if atRest ? live * 8 < block.capacity * 7 : live * 4 < block.capacity * 3 {
                sparse.insert(ObjectIdentifier(block))
                freed += block.capacity - live
            }
        }
        return freed >= Self.blockSize ? sparse : []
    }
}

/// A shard's sessions: their records by id, and the arena their packed bytes are kept in. A
/// record's packed bytes enter the arena through the methods here; a record whose packed bytes
/// are an array of their own (restored, not yet in a shard) is kept as it is otherwise.
struct Records {
    /// Records are changed in place by ``SessionStore/update(_:_:)`` only (which keeps `packed`
    /// with ``unpacked()``); they come and go through the methods here.
    var table: [String: SessionStore.Record] = [:]
    private(set) var arena = PackedArena()
    /// How many of the records are packed.
    private(set) var packed = 0

    subscript(session: String) -> SessionStore.Record? { table[session] }

    /// Puts a record in, its packed bytes into this arena (copied, if they were in another);
    /// returns the one it replaced.
    @discardableResult
    mutating func insert(_ session: String, _ record: SessionStore.Record) -> SessionStore.Record? {
        var record = record
        record.settle(in: &arena)
        let replaced = table.updateValue(record, forKey: session)
        replaced?.releasePacked()
        packed += (record.isPacked ? 1 : 0) - (replaced?.isPacked == true ? 1 : 0)
        return replaced
    }

    /// Takes a record out.
    @discardableResult
    mutating func remove(_ session: String) -> SessionStore.Record? {
        let removed = table.removeValue(forKey: session)
        removed?.releasePacked()
        if removed?.isPacked == true { packed -= 1 }
        return removed
    }

    /// Lets go of the table's room once most sessions went (see ``Swift/Dictionary/releaseSpareRoom(threshold:)``).
    mutating func releaseSpareRoom() { table.releaseSpareRoom() }

    /// Packs a live record as `bytes` (``SessionStore/Record/stored()`` of it).
    mutating func pack(_ session: String, _ bytes: [UInt8]) {
        guard table[session]?.isPacked == false else { return }
        table[session]!.pack(bytes, in: &arena)
        packed += 1
    }

    /// A packed record was unpacked by a change in place.
    mutating func unpacked() { packed -= 1 }

    /// A packed record: keeps `bytes` instead (``SessionStore/Record/forgetPast(now:window:)``).
    mutating func repack(_ session: String, _ bytes: [UInt8]) {
        table[session]?.repack(bytes, in: &arena)
    }

    /// The sessions whose packed bytes are in blocks ``PackedArena/sparse(atRest:)`` returned, to
    /// move with ``compact(_:)``.
    mutating func sparseSessions(atRest: Bool = false) -> [String] {
        let sparse = arena.sparse(atRest: atRest)
        guard !sparse.isEmpty else { return [] }
        return table.compactMap { session, record in
            record.packedBlock.map { sparse.contains(ObjectIdentifier($0)) } == true ? session : nil
        }
    }

    /// Moves the packed bytes of `sessions` to the block being filled (records changed since
    /// are passed over); returns how many moved. The blocks they leave are unmapped once no
    /// record, nor any copy of one, points into them.
    mutating func compact(_ sessions: some Sequence<String>) -> Int {
        var moved = 0
        for session in sessions where table[session]?.packedBlock != nil {
            table[session]!.move(to: &arena)
            moved += 1
        }
        arena.prune()
        return moved
    }
}
