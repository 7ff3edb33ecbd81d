/// SplitMix64: the fuzzers' random numbers, the same sequence for the same seed.
public struct FuzzRandom: RandomNumberGenerator {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// True one time in `n`.
    public mutating func chance(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &self) == 0 }
    public mutating func below(_ n: Int) -> Int { Int.random(in: 0..<n, using: &self) }
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
    public mutating func pick<T>(_ elements: [T]) -> T { elements[below(elements.count)] }
}
