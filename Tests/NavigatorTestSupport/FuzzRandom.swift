import NavigatorClient
import NavigatorCore

/// The fuzzers' random numbers (SplitMix64): the same sequence for the same seed.
public struct FuzzRandom: RandomNumberGenerator {
    private var source: SplitMix64
    public init(state: UInt64) { source = SplitMix64(seed: state) }
    public mutating func next() -> UInt64 { source.next() }
    /// True one time in `n`.
    public mutating func chance(_ n: Int) -> Bool { Int.random(in: 0..<n, using: &self) == 0 }
    public mutating func below(_ n: Int) -> Int { Int.random(in: 0..<n, using: &self) }
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
    public mutating func pick<T>(_ elements: [T]) -> T { elements[below(elements.count)] }
}
