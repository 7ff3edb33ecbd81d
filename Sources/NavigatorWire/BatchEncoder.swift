import NavigatorCore

/// A command batch as a worker publishes it: NavigatorCore's commands and the batch's fields,
/// encoded to `navigator.v1.CommandBatch` bytes by hand (``encoded()``), in one pass over the
/// commands, without building SwiftProtobuf messages first. The bytes are those SwiftProtobuf
/// writes with deterministic ordering (map entries by key; `BatchEncoderTests` checks this over
/// random batches), so every protobuf library reads them. ``message`` builds the
/// SwiftProtobuf message when one is needed (a reply to an acknowledged request).
public struct Batch: Hashable, Sendable {
    public var session: String
    public var seq: UInt64
    public var intentID: String
    public var animated: Bool
    public var commands: [Command]
    public var treeVersion: UInt64
    /// What the summary is made from: rendered when read or encoded, not when the batch is made.
    public var summarySource: Summary
    public var cause: Navigator_V1_BatchCause
    public var epoch: UInt64

    /// A batch's one line: text, or the resolution's step it tells (``ExplanationStep/summary``),
    /// written out only when read — the encoder writes it straight into the batch's bytes, so a
    /// published batch makes no string for it unless something reads ``summary`` or ``message``
    /// (an in-process follow, an acknowledged reply). Equal when the texts are.
    public enum Summary: Hashable, Sendable {
        case text(String)
        case step(ExplanationStep)

        public var text: String {
            switch self {
            case .text(let text): text
            case .step(let step): step.summary
            }
        }

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.text == rhs.text }
        public func hash(into hasher: inout Hasher) { hasher.combine(text) }
    }

    /// The summary's text.
    public var summary: String {
        get { summarySource.text }
        set { summarySource = .text(newValue) }
    }

    public init(
        session: String, seq: UInt64, intentID: String, animated: Bool, commands: [Command], treeVersion: UInt64,
        summary: String, cause: Navigator_V1_BatchCause, epoch: UInt64
    ) {
        self.init(
            session: session, seq: seq, intentID: intentID, animated: animated, commands: commands,
            treeVersion: treeVersion, summary: Summary.text(summary), cause: cause, epoch: epoch)
    }

    public init(
        session: String, seq: UInt64, intentID: String, animated: Bool, commands: [Command], treeVersion: UInt64,
        summary: Summary, cause: Navigator_V1_BatchCause, epoch: UInt64
    ) {
        self.session = session
        self.seq = seq
        self.intentID = intentID
        self.animated = animated
        self.commands = commands
        self.treeVersion = treeVersion
        self.summarySource = summary
        self.cause = cause
        self.epoch = epoch
    }

    /// The SwiftProtobuf message of the same batch.
    public var message: Navigator_V1_CommandBatch {
        var batch = Navigator_V1_CommandBatch(
            session: session, seq: seq, intentID: intentID, animated: animated, commands: commands,
            treeVersion: treeVersion, summary: summary, cause: cause)
        batch.epoch = epoch
        return batch
    }

    /// The `navigator.v1.CommandBatch` bytes.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }

    /// The `navigator.v1.CommandBatch` bytes in place of what `bytes` held, in its storage when
    /// that is large enough: a publisher encodes every batch into the same array.
    public func encode(into bytes: inout [UInt8]) {
        var writer = ProtoWriter(reusing: &bytes, capacity: 320 + commands.count * 64)
        defer { writer.finish(into: &bytes) }
        write(to: &writer)
    }

    private func write(to writer: inout ProtoWriter) {
        writer.string(1, session)
        writer.uint64(2, seq)
        writer.string(3, intentID)
        writer.bool(4, animated)
        for command in commands { writer.message(5) { $0.command(command) } }
        writer.uint64(6, treeVersion)
        switch summarySource {
        case .text(let text): writer.string(7, text)
        case .step(let step): writer.string(7) { step.appendSummary(to: &$0) }
        }
        writer.uint64(8, UInt64(cause.rawValue))
        writer.uint64(9, epoch)
    }
}

/// Protobuf's binary encoding, written forwards in one pass: a nested message's length is left
/// one byte and the message is moved along in the rare case its length needs more (128 bytes or
/// longer). Fields with proto3's default value are left out, as generated code does; what
/// oneofs and map entries hold is always written.
struct ProtoWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// A writer that writes into `storage`'s array (emptied, its capacity kept and grown to
    /// `capacity`); ``finish(into:)`` hands it back. `storage` is empty meanwhile.
    init(reusing storage: inout [UInt8], capacity: Int) {
        bytes = []
        swap(&bytes, &storage)
        bytes.removeAll(keepingCapacity: true)
        bytes.reserveCapacity(capacity)
    }

    /// Puts what was written into `storage`.
    mutating func finish(into storage: inout [UInt8]) {
        swap(&bytes, &storage)
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// Eight bytes, little-endian.
    mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// `values` as consecutive fixed64s, little-endian.
    mutating func fixed64s(_ values: [UInt64]) {
        #if _endian(little)
            values.withUnsafeBytes { bytes.append(contentsOf: $0) }  // as in memory: one copy
        #else
            for value in values { fixed64(value) }
        #endif
    }

    mutating func tag(_ field: Int, _ wireType: UInt8) { varint(UInt64(field) << 3 | UInt64(wireType)) }

    /// A varint field, left out when 0.
    mutating func uint64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, 0)
        varint(value)
    }

    mutating func bool(_ field: Int, _ value: Bool) {
        guard value else { return }
        tag(field, 0)
        bytes.append(1)
    }

    /// A string field, left out when empty.
    mutating func string(_ field: Int, _ value: String) {
        guard !value.isEmpty else { return }
        stringAlways(field, value)
    }

    /// A string field given as its UTF-8 bytes, left out when empty.
    mutating func string(_ field: Int, utf8: ArraySlice<UInt8>) {
        guard !utf8.isEmpty else { return }
        tag(field, 2)
        varint(UInt64(utf8.count))
        bytes += utf8
    }

    /// A string field whose UTF-8 bytes `body` appends, left out when it appends none.
    mutating func string(_ field: Int, _ body: (inout [UInt8]) -> Void) {
        let tagged = bytes.count
        tag(field, 2)
        let start = bytes.count
        bytes.append(0)  // the length, if it fits one byte
        body(&bytes)
        guard bytes.count > start + 1 else { return bytes.removeSubrange(tagged...) }
        patchLength(at: start)
    }

    /// A string field even when empty (a oneof's member, a map entry's key or value).
    mutating func stringAlways(_ field: Int, _ value: String) {
        tag(field, 2)
        lengthPrefixed(value)
    }

    /// A string's UTF-8 length as a varint, then its bytes (no tag).
    mutating func lengthPrefixed(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// One byte as it is.
    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// A nested message: its tag, its length and what `body` writes.
    mutating func message(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        tag(field, 2)
        let start = bytes.count
        bytes.append(0)  // the length, if it fits one byte
        body(&self)
        patchLength(at: start)
    }

    /// Writes the length of what follows the byte at `start` (left for it) into that byte, or,
    /// when it needs more, in its place with what follows moved along.
    private mutating func patchLength(at start: Int) {
        let length = bytes.count - start - 1
        if length < 0x80 {
            bytes[start] = UInt8(length)
            return
        }
        // Room made after the byte left for it, then the varint written in place: no array of
        // its own for the prefix (an allocation for every message of 128 bytes or more).
        var size = 1
        while length >> (7 * size) != 0 { size += 1 }
        bytes.insert(contentsOf: repeatElement(0, count: size - 1), at: start + 1)
        var value = UInt64(length)
        for offset in 0..<size {
            bytes[start + offset] = offset == size - 1 ? UInt8(value) : UInt8(truncatingIfNeeded: value) | 0x80
            value >>= 7
        }
    }

    /// A `map<string, string>`, entries in key order.
    mutating func map(_ field: Int, _ map: [String: String]) {
        guard !map.isEmpty else { return }
        if map.count == 1, let (key, value) = map.first {
            entry(field, key, value)
            return
        }
        Self.inKeyOrder(map) { key, value in entry(field, key, value) }
    }

    /// Calls `body` with each entry of `map` in key order, the entries' places sorted in room on
    /// the stack, not in an array of sorted pairs made for every map of two entries or more.
    /// (For maps of a screen's or a session's size: a large one may still take heap room for
    /// its places, and its sort for scratch.)
    static func inKeyOrder<Value>(_ map: [String: Value], _ body: (String, Value) -> Void) {
        withUnsafeTemporaryAllocation(of: Dictionary<String, Value>.Index.self, capacity: map.count) { places in
            var filled = 0
            for place in map.indices {
                places.initializeElement(at: filled, to: place)
                filled += 1
            }
            var places = places
            places.sort { map[$0].key < map[$1].key }
            for place in places { body(map[place].key, map[place].value) }
            places.deinitialize()
        }
    }

    private mutating func entry(_ field: Int, _ key: String, _ value: String) {
        message(field) {
            $0.stringAlways(1, key)
            $0.stringAlways(2, value)
        }
    }

    // MARK: navigator.v1 messages

    mutating func command(_ command: Command) {
        switch command {
        case .selectTab(let name):
            message(1) { $0.string(1, name) }
        case .push(let screen, let ref):
            message(2) {
                $0.message(1) { $0.stackRef(ref) }
                $0.message(2) { $0.screen(screen) }
            }
        case .present(let modal):
            message(3) { $0.message(1) { $0.modal(modal) } }
        case .popTo(let id):
            message(4) { $0.uint64(1, id.rawValue) }
        case .popToRoot(let ref):
            message(5) { $0.message(1) { $0.stackRef(ref) } }
        case .dismissTo(let id):
            message(6) { $0.uint64(1, id?.rawValue ?? 0) }
        case .setRoot(let root):
            message(7) { $0.message(1) { $0.root(root) } }
        case .replace(let id, let screen):
            message(8) {
                $0.uint64(1, id.rawValue)
                $0.message(2) { $0.screen(screen) }
            }
        case .refresh(let id, let info):
            message(9) {
                $0.uint64(1, id.rawValue)
                $0.map(2, info)
            }
        }
    }

    mutating func screen(_ screen: Screen) { withUnsafePointer(to: screen) { self.screen(at: $0) } }

    /// ``screen(_:)`` of the screen at `screen`, read where it is.
    private mutating func screen(at screen: UnsafePointer<Screen>) {
        uint64(1, screen.pointee.id.rawValue)
        message(2) {
            $0.string(1, screen.pointee.context.screen)
            $0.map(2, screen.pointee.context.info)
        }
    }

    /// Each of `stack`'s screens as a `field` message. The screens, the modals and the tabs of a
    /// tree are read where they are, through their arrays' base addresses: a loop over an array
    /// takes a copy of each element (a retain of each string, array and dictionary in it), and
    /// the write-behind encodes every changed session's tree.
    private mutating func screens(_ field: Int, _ stack: [Screen]) {
        stack.withUnsafeBufferPointer { screens in
            guard let base = screens.baseAddress else { return }
            for index in 0..<screens.count { message(field) { $0.screen(at: base + index) } }
        }
    }

    mutating func stackRef(_ ref: StackRef) {
        switch ref {
        case .tab(let name): stringAlways(1, name)
        case .modal(let id):
            tag(2, 0)
            varint(id.rawValue)
        case .root:
            tag(3, 0)
            bytes.append(1)
        }
    }

    mutating func modal(_ modal: Modal) { withUnsafePointer(to: modal) { self.modal(at: $0) } }

    /// ``modal(_:)`` of the modal at `modal`, read where it is.
    private mutating func modal(at modal: UnsafePointer<Modal>) {
        uint64(1, modal.pointee.id.rawValue)
        uint64(2, UInt64(Navigator_V1_PresentationStyle(modal.pointee.style).rawValue))
        screens(3, modal.pointee.stack)
    }

    /// Each of `modals` as a `field` message, read where they are.
    mutating func modals(_ field: Int, _ modals: [Modal]) {
        modals.withUnsafeBufferPointer { modals in
            guard let base = modals.baseAddress else { return }
            for index in 0..<modals.count { message(field) { $0.modal(at: base + index) } }
        }
    }

    mutating func root(_ root: Root) {
        switch root {
        case .tabs(let bar):
            message(1) { writer in
                bar.tabs.withUnsafeBufferPointer { tabs in
                    guard let base = tabs.baseAddress else { return }
                    for index in 0..<tabs.count {
                        writer.message(1) {
                            $0.string(1, base[index].name)
                            $0.screens(2, base[index].stack)
                        }
                    }
                }
                writer.string(2, bar.selected)
            }
        case .stack(let list):
            message(2) { $0.screens(1, list) }
        }
    }
}
