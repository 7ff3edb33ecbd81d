/// The arrays a resolution is built in, kept from one resolution to the next so that their room
/// is used again: a caller that hands each resolution back once it is done with it
/// (``recycle(_:)-(Resolution)``) resolves the common intent without making an array for its
/// explanation, its commands or a push's chain of parents
/// (``Resolver/resolve(_:into:now:buffers:)``, ``Resolver/apply(_:to:now:authoritative:buffers:)``).
///
/// A value: whoever resolves keeps its own (a worker: one, used by one thread at a time). At most ``keptPerKind``
/// arrays of each kind are kept, each with room for 4 to ``largestKept`` elements (a long path's
/// goes), so what is kept stays small; they are kept in the value, so buffers that keep nothing
/// (those the overloads without `buffers:` make) make no array either. An array still held
/// elsewhere when it comes back (the caller kept a copy of the resolution) costs the allocation it
/// would have cost anyway.
public struct ResolutionBuffers: Sendable {
    /// The most arrays of one kind (explanations, commands, chains) kept: no more than an
    /// ``InlineList`` holds in the value.
    public static let keptPerKind = 4
    /// The most elements a kept array may have room for.
    public static let largestKept = 32

    /// For explanations.
    var steps = SpareArrays<ExplanationStep>()
    /// The plans' ids (set for each tree planned on) and arrays.
    var plans = PlanScratch(ids: IDAllocator(next: 1))

    public init() {}

    /// Takes the arrays out of a resolution the caller is done with (its explanation and its
    /// commands, and those of the intents it released), emptied, for the next ones: the
    /// resolution is left with none of them (no explanation, its outcome `ignored`, nothing
    /// released). Taken in place: unless the caller kept a copy, nothing else holds them.
    public mutating func recycle(_ resolution: inout Resolution) {
        steps.keep(&resolution.explanation)
        var commands: [Command] = []
        switch resolution.outcome {
        case .resolved(let planned), .refreshed(let planned), .parked(_, redirect: let planned): commands = planned
        case .ignored, .rejected: break
        }
        resolution.outcome = .ignored("")  // the resolution lets go of its commands
        plans.commands.keep(&commands)
        recycle(released: &resolution.released)
    }

    /// Takes the arrays out of a client event's result the caller is done with (its echo, and
    /// the intents it released), as ``recycle(_:)-(Resolution)`` does.
    public mutating func recycle(_ result: inout EventResolution) {
        plans.commands.keep(&result.echo)
        recycle(released: &result.released)
    }

    private mutating func recycle(released: inout [Resolution]) {
        for index in released.indices { recycle(&released[index]) }
        released = []
    }
}

/// Empty arrays with room, kept for the next taker: at most ``ResolutionBuffers/keptPerKind``,
/// each with room for 4 to ``ResolutionBuffers/largestKept`` elements, last kept first taken.
struct SpareArrays<Element: Sendable>: Sendable {
    /// In the value: keeping and taking them makes no array of its own.
    private var arrays = InlineList<[Element]>()

    var count: Int { arrays.count }

    /// An empty array with room for four elements at least: a kept one, else a new one.
    mutating func take() -> [Element] {
        if !arrays.isEmpty { return arrays.removeLast() }
        var array: [Element] = []
        array.reserveCapacity(4)
        return array
    }

    /// Keeps `array`, emptied, unless it has room for fewer than four elements (it would have to
    /// grow: a refresh's array of one, say) or for more than the largest kept, or enough are kept
    /// already; `array` is left empty in any case.
    mutating func keep(_ array: inout [Element]) {
        guard array.capacity >= 4, array.capacity <= ResolutionBuffers.largestKept,
            arrays.count < ResolutionBuffers.keptPerKind
        else {
            array = []
            return
        }
        array.removeAll(keepingCapacity: true)
        var kept: [Element] = []
        swap(&kept, &array)
        arrays.append(kept)
    }
}
