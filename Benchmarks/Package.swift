// swift-tools-version: 6.1
// Allocation benchmarks of Navigator's hot path (issue 16), with ordo-one/benchmark: how many
// mallocs a resolution, a batch encoding, an intent decoding and a stored session's encoding
// take. Allocation counts do not move with the machine, so their p90s are kept as thresholds
// (Thresholds/) and checked: `./dev bench allocations` (part of `./dev test`); after a change
// that is meant to allocate less (or, with a reason, more), `./dev bench allocations --update`.
// A package of its own, so that building navigatord does not build the benchmark library.
import PackageDescription

let package = Package(
    name: "NavigatorBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Navigator", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "NavigatorBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "NavigatorCore", package: "Navigator"),
                .product(name: "NavigatorWire", package: "Navigator"),
                .product(name: "NavigatorMix", package: "Navigator"),
            ],
            path: "NavigatorBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
